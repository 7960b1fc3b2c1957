"""Attention work and the compute time of a pass at each kernel's rate.

Attention FLOPs per head per cached token: 2·(d_qk + d_v) for GQA and for MLA
prefill (un-absorbed, 2·(192 + 128) = 640 for DeepSeek-V3); MLA decode runs the
absorbed kernel over the latent: 2·(kv_lora_rank + rope) + 2·kv_lora_rank
(2·576 + 2·512 = 2,176).  Linear layers run at the weight format's tensor-core
rate C_w, attention at C_attn (the 16-bit rate unless the engine runs FP8
attention on an FP8 cache: ``roofline.attention_dtype``): t = (F_linear / C_w + F_attention / C_attn) / (GPUs × η_c).
A GEMM whose per-GPU shard is narrow runs below the wide-matrix rate
(``shard_gemm_factor``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.roofline import attention_peak_flops_per_s, peak_flops_per_s
from planner.physics.terms import term
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = ["attention_flops_per_token_context", "compute_time_s", "shard_gemm_factor"]

Arr = NDArray[np.float64]


def attention_flops_per_token_context(model: ModelSpec, *, absorbed: bool = False) -> float:
    """FLOPs one token spends attending to one cached token, all layers and heads:
    2·(d_qk + d_v)·L·H; MLA with ``absorbed`` (decode): (2·(r + rope) + 2·r)·L·H."""
    if model.attention == "mla":
        if absorbed:
            r, rope = float(model.kv_lora_rank or 0), float(model.qk_rope_head_dim or 0)
            return (2.0 * (r + rope) + 2.0 * r) * model.layers * model.heads
        dims = float(model.head_dim + (model.v_head_dim or model.head_dim))
    else:
        dims = 2.0 * model.head_dim
    return 2.0 * dims * model.layers * model.heads


def shard_gemm_factor(model: ModelSpec, tp: ArrayLike) -> Arr:
    """GEMM efficiency relative to a wide matrix when each GPU holds 1/TP of it:
    n / (n + n½), n = hidden / TP (the per-GPU N of a column-parallel or K of a
    row-parallel GEMM), n½ the fitted term ``gemm_half_width`` (0: no effect)."""
    n = float(model.hidden_width) / np.asarray(tp, dtype=float)
    return np.asarray(n / (n + term("gemm_half_width")), dtype=float)


def compute_time_s(gpu: GpuSpec, weights_dtype: str, kv_dtype: str, linear: Arr, attention: Arr | float,
                   gpus: Arr, efficiency: ArrayLike, gemm_factor: ArrayLike = 1.0, *, fp8_attention: bool = False
                   ) -> Arr:
    """(F_linear / (C_w × shard factor) + F_attention / C_attn) / (GPUs × η_c)."""
    flops_time = (linear / (peak_flops_per_s(gpu, weights_dtype) * np.asarray(gemm_factor, dtype=float))
                  + np.asarray(attention, dtype=float) / attention_peak_flops_per_s(gpu, kv_dtype,
                                                                            fp8_attention=fp8_attention))
    return np.asarray(flops_time / (gpus * np.asarray(efficiency, dtype=float)), dtype=float)


