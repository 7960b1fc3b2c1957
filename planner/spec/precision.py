"""Number formats: bytes per stored weight or KV element, and which tensor-core
peak a weight format computes at.

Block-scaled formats carry their scale overhead in the byte count:

* ``nvfp4``: 4-bit E2M1 values with one FP8 (E4M3) scale per 16 values
  -> 4 + 8/16 = 4.5 bits/weight (the per-tensor FP32 scale is negligible).
* ``mxfp4``: 4-bit E2M1 values with one E8M0 scale per 32 values
  -> 4 + 8/32 = 4.25 bits/weight (OCP Microscaling spec v1.0).
* ``int4``: group-quantized (AWQ/GPTQ style) with one FP16 scale and a 4-bit
  zero point per 128 weights -> 4 + 16/128 + 4/128 = 4.15625 bits/weight.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "ComputeDtype",
    "KvDtype",
    "WeightsDtype",
    "WEIGHTS_DTYPES",
    "KV_DTYPES",
    "bits_per_weight",
    "bytes_per_weight",
    "bytes_per_kv_element",
    "compute_dtype_candidates",
]

WeightsDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"]
KvDtype = Literal["fp32", "bf16", "fp16", "fp8"]
ComputeDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "fp4"]

WEIGHTS_DTYPES: tuple[str, ...] = get_args(WeightsDtype)
KV_DTYPES: tuple[str, ...] = get_args(KvDtype)

# Bits per stored weight, including block-scale overhead (see module docstring).
_BITS_PER_WEIGHT: dict[str, float] = {
    "fp32": 32.0,
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,
    "int8": 8.0,
    "int4": 4.0 + 16.0 / 128.0 + 4.0 / 128.0,
    "nvfp4": 4.0 + 8.0 / 16.0,
    "mxfp4": 4.0 + 8.0 / 32.0,
}

_BYTES_PER_KV: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}

# Which tensor-core rates a weight format can use, best first.  Weight-only
# formats (int4) dequantize to 16-bit and compute there; FP8/INT8 run natively
# where the chip has those units; FP4 formats run natively on FP4 units
# (Blackwell) and otherwise fall back to FP8, then 16-bit.
_COMPUTE_CANDIDATES: dict[str, tuple[ComputeDtype, ...]] = {
    "fp32": ("fp32", "bf16"),
    "bf16": ("bf16",),
    "fp16": ("fp16", "bf16"),
    "fp8": ("fp8", "bf16"),
    "int8": ("int8", "bf16"),
    "int4": ("bf16",),
    "nvfp4": ("fp4", "fp8", "bf16"),
    "mxfp4": ("fp4", "fp8", "bf16"),
}


def bits_per_weight(dtype: str) -> float:
    """Bits per stored weight, block scales included (nvfp4 = 4 + 8/16 = 4.5)."""
    return _BITS_PER_WEIGHT[dtype]


def bytes_per_weight(dtype: str) -> float:
    """Bytes per stored weight = bits_per_weight / 8."""
    return _BITS_PER_WEIGHT[dtype] / 8.0


def bytes_per_kv_element(dtype: str) -> float:
    """Bytes per cached K or V element (bf16 = 2, fp8 = 1)."""
    return _BYTES_PER_KV[dtype]


def compute_dtype_candidates(weights_dtype: str) -> tuple[ComputeDtype, ...]:
    """Tensor-core formats a weight format can compute in, best first."""
    return _COMPUTE_CANDIDATES[weights_dtype]
