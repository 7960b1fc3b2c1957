"""The roofline: machine balance, arithmetic intensity, attainable FLOP/s.

* ridge (machine balance) = peak FLOP/s / HBM bytes/s      (H100 BF16: 989e12 / 3.35e12 ≈ 295)
* decode intensity at batch B = B × 2P / (W + B × S × K)   (weights amortize, KV does not)
* prefill intensity at N tokens = 2P × N / W               (≈ N for 16-bit weights)
* attainable FLOP/s = min(peak, intensity × bandwidth)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.errors import ScenarioError
from planner.spec.precision import compute_dtype_candidates
from planner.spec.specs import GpuSpec

__all__ = [
    "attainable_flops_per_s",
    "attention_dtype",
    "attention_peak_flops_per_s",
    "bound",
    "compute_dtype",
    "decode_intensity",
    "hbm_sweep_s",
    "peak_flops_per_s",
    "prefill_intensity",
    "ridge_flop_per_byte",
]


def compute_dtype(gpu: GpuSpec, weights_dtype: str) -> str:
    """The tensor-core format a weight format computes in on this GPU
    (FP8 weights on an A100, which lacks FP8 units, compute in BF16)."""
    for cand in compute_dtype_candidates(weights_dtype):
        if gpu.flops_per_s.get(cand) is not None:
            return cand
    return "bf16"


def peak_flops_per_s(gpu: GpuSpec, weights_dtype: str) -> float:
    """Dense peak FLOP/s at the compute format of ``weights_dtype``."""
    value = gpu.flops_per_s.get(compute_dtype(gpu, weights_dtype))
    if value is None:  # pragma: no cover - bf16 is always present
        raise ScenarioError(f"gpu '{gpu.id}' has no FLOP/s figure for {weights_dtype}")
    return value


def attention_dtype(gpu: GpuSpec, kv_dtype: str, *, fp8_attention: bool = False) -> str:
    """The tensor-core format attention runs in: 16-bit (FlashAttention kernels
    compute in BF16/FP16, dequantizing an FP8 KV cache as they read it), whatever
    the weights and the cache are; FP8 only where the engine runs FP8 attention
    (``fp8_attention``, e.g. TensorRT-LLM's FP8 context FMHA) on an FP8 cache and
    the chip has FP8 units.  An FP8 KV cache alone halves the bytes, not the FLOP time."""
    if fp8_attention and kv_dtype == "fp8" and gpu.flops_per_s.fp8 is not None:
        return "fp8"
    return "bf16"


def attention_peak_flops_per_s(gpu: GpuSpec, kv_dtype: str, *, fp8_attention: bool = False) -> float:
    """Dense peak FLOP/s of the attention kernel for a KV-cache format."""
    value = gpu.flops_per_s.get(attention_dtype(gpu, kv_dtype, fp8_attention=fp8_attention))
    return value if value is not None else gpu.flops_per_s.bf16


def ridge_flop_per_byte(gpu: GpuSpec, weights_dtype: str = "bf16") -> float:
    """Machine balance = peak FLOP/s / HBM bytes/s."""
    return peak_flops_per_s(gpu, weights_dtype) / gpu.hbm_bytes_per_s


def hbm_sweep_s(gpu: GpuSpec) -> float:
    """Time to touch every byte of HBM once = capacity / bandwidth (80 GB / 3.35 TB/s ≈ 24 ms)."""
    return gpu.hbm_bytes / gpu.hbm_bytes_per_s


def decode_intensity(
    *, params_active: float, weight_bytes: ArrayLike, batch_size: ArrayLike,
    context_tokens: ArrayLike, kv_bytes_per_token: ArrayLike,
) -> NDArray[np.float64] | float:
    """Effective decode intensity = B × 2P / (W + B × S × K) (K may vary with S: windowed layers)."""
    b = np.asarray(batch_size, float)
    out = b * 2.0 * params_active / (
        np.asarray(weight_bytes, float) + b * np.asarray(context_tokens, float) * np.asarray(kv_bytes_per_token, float)
    )
    return float(out) if np.ndim(out) == 0 else out


def prefill_intensity(
    *, params_active: float, weight_bytes: float, tokens: ArrayLike
) -> NDArray[np.float64] | float:
    """Prefill intensity ≈ 2P × N / W (weights read once for N tokens)."""
    out = 2.0 * params_active * np.asarray(tokens, float) / weight_bytes
    return float(out) if np.ndim(out) == 0 else out


def attainable_flops_per_s(
    *, peak_flops_per_s: float, hbm_bytes_per_s: float, intensity: ArrayLike
) -> NDArray[np.float64] | float:
    """attainable FLOP/s = min(peak, intensity × bandwidth)."""
    out = np.minimum(peak_flops_per_s, np.asarray(intensity, float) * hbm_bytes_per_s)
    return float(out) if np.ndim(out) == 0 else out


def bound(*, intensity: float, ridge: float) -> Literal["memory", "compute"]:
    """Which roof binds: memory below the ridge, compute at or above it."""
    return "memory" if intensity < ridge else "compute"
