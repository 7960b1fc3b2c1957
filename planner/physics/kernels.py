"""A forward pass as a sum of kernel groups, each on its own roofline.

A step is a sequence of kernels, not one roofline: the dense GEMMs stream the
weights and multiply every token through them; attention streams each sequence's
KV cache and does its own (BF16) arithmetic; the MoE expert GEMMs stream only the
experts the tokens touch.  Each group is timed on its own roofline at its own rate
and the groups add (the seeds' ``t ≥ max(F/(η_c·C), D/(η_b·BW))`` applied per kernel):

    t_gemm      = max(F_dense / (η_c·C_w·s), (W_dense + A_dense) / (η_b·BW))
    t_experts   = max(F_expert / (η_c·C_w), (W_touched + A_expert) / (η_b·BW))
    t_attention = max(F_attention / (η_c·C_attn), KV bytes / (η_b·BW))

F: FLOPs on one GPU, W: weight bytes, A: activation bytes (each GEMM reads its input and
writes its output in 16-bit), s: the GEMM shard factor (``attention.shard_gemm_factor``),
C_attn: the 16-bit rate unless the engine runs FP8 attention (``roofline.attention_dtype``).
Collectives and the launch overhead are added by :mod:`planner.physics.step`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import betainc

from planner.physics.roofline import attention_peak_flops_per_s, peak_flops_per_s
from planner.physics.terms import term
from planner.spec.params import param_counts
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = ["ACTIVATION_BYTES", "moe_overhead_s", "moe_prefill_slot_s", "moe_slot_ranks", "KernelGroups",
           "activation_elements_per_token", "expert_active_params", "experts_touched", "experts_touched_busiest",
           "kernel_groups"]

# Activations are read and written in 16-bit.
ACTIVATION_BYTES = 2.0
Arr = NDArray[np.float64]


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


def _out(x: Arr) -> Arr | float:
    return float(x) if np.ndim(x) == 0 else x


def experts_touched(*, experts: int, top_k: int, tokens: ArrayLike) -> Arr | float:
    """Expected distinct experts a batch touches per layer: E × (1 − (1 − k/E)^tokens)."""
    t = _f(tokens)
    return _out(experts * (1.0 - (1.0 - top_k / experts) ** t))


def _binomial_cdf(x: Arr, n: Arr, p: Arr) -> Arr:
    """P(Binomial(n, p) ≤ x) for whole x, as the regularized incomplete beta function:
    F(x) = I_{1−p}(n − x, x + 1) for x < n, else 1 (scipy.stats.binom.cdf's own identity,
    without importing scipy.stats, which costs half a second at every start)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        below = betainc(np.maximum(n - x, 1e-300), x + 1.0, 1.0 - p)
    return np.asarray(np.where(x >= n, 1.0, below), dtype=float)


def experts_touched_busiest(*, experts: int, top_k: int, tokens: ArrayLike, ep: ArrayLike) -> Arr | float:
    """Expected touched experts on the busiest of EP GPUs (each holding E/EP):
    E[max of EP Binomial(E/EP, q)] = Σ_{x<E/EP} (1 − F(x)^EP), q = 1 − (1 − k/E)^tokens.
    At EP = 1 this is E × q (``experts_touched``)."""
    t0, g0 = np.broadcast_arrays(_f(tokens), _f(ep))
    t, g = np.atleast_1d(t0), np.atleast_1d(g0)
    q = 1.0 - (1.0 - top_k / experts) ** t
    out = np.array(experts * q, dtype=float)
    many = g > 1
    if np.any(many):
        n = experts / g[many]
        x = np.arange(experts, dtype=float)
        shape = n.shape + (1,)
        cdf = _binomial_cdf(x, n.reshape(shape), q[many].reshape(shape))
        terms = np.where(x < n.reshape(shape), 1.0 - cdf ** g[many].reshape(shape), 0.0)
        out[many] = terms.sum(axis=-1)
    return _out(out.reshape(np.shape(t0)))


def expert_active_params(model: ModelSpec) -> float:
    """Routed-expert parameters one token multiplies through: k × per-expert × MoE layers."""
    pc = param_counts(model)
    if not model.is_moe or pc.expert_total <= 0:
        return 0.0
    return float(model.experts_per_token * pc.per_expert_per_layer * model.moe_layer_count)


def activation_elements_per_token(model: ModelSpec, tp: ArrayLike) -> tuple[Arr, Arr]:
    """(dense, expert) activation elements one token's GEMMs read and write on one GPU,
    all layers: each GEMM's input (replicated) and output (sharded over TP).
    Dense layer: QKV in h, out (H + 2·H_kv)·d/TP; O in H·d/TP, out h; MLP gate-up in h,
    out 2I/TP; down in I/TP, out h.  A MoE layer's MLP is the k experts' instead."""
    t = _f(tp)
    h = float(model.hidden_width)
    qkv = float((model.heads + 2 * model.kv_heads) * model.head_dim)
    att = h + qkv / t + model.heads * model.head_dim / t + h
    inter = float(model.intermediate or 4 * h)
    mlp = h + 2 * inter / t + inter / t + h
    moe_layers = model.moe_layer_count
    dense = att * model.layers + mlp * (model.layers - moe_layers)
    if moe_layers:
        im = float(model.moe_intermediate or inter)
        per_expert = h + 3 * im / t + h
        expert = per_expert * (model.experts_per_token + model.shared_experts) * moe_layers
    else:
        expert = 0.0 * t
    return _f(dense), _f(expert)


@dataclass(frozen=True)
class KernelGroups:
    """The kernel groups of one pass on one GPU (arrays broadcast over the inputs)."""

    gemm_s: Arr
    expert_s: Arr
    attention_s: Arr
    gemm_compute_s: Arr  # the dense GEMMs' compute alone (what a chunk riding in a decode iteration adds)
    compute_s: Arr  # Σ of the groups' compute times
    memory_s: Arr  # Σ of the groups' memory times

    @property
    def total_s(self) -> Arr:
        return self.gemm_s + self.expert_s + self.attention_s


def kernel_groups(
    *, gpu: GpuSpec, weights_dtype: str, dense_flops: ArrayLike, dense_bytes: ArrayLike, expert_flops: ArrayLike,
    expert_bytes: ArrayLike, attention_flops: ArrayLike, attention_bytes: ArrayLike, compute_efficiency: ArrayLike,
    bandwidth_efficiency: ArrayLike, gemm_factor: ArrayLike = 1.0, fp8_attention: bool = False,
) -> KernelGroups:
    """Each group's time = max(its FLOPs / rate, its bytes / bandwidth); all per GPU."""
    ce, bw = _f(compute_efficiency), _f(bandwidth_efficiency) * gpu.hbm_bytes_per_s
    cw = peak_flops_per_s(gpu, weights_dtype) * ce
    ca = attention_peak_flops_per_s(gpu, "fp8", fp8_attention=fp8_attention) * ce
    g_c = _f(dense_flops) / (cw * _f(gemm_factor))
    g_m = _f(dense_bytes) / bw
    e_c, e_m = _f(expert_flops) / cw, _f(expert_bytes) / bw
    a_c, a_m = _f(attention_flops) / ca, _f(attention_bytes) / bw
    return KernelGroups(gemm_s=np.maximum(g_c, g_m), expert_s=np.maximum(e_c, e_m), attention_s=np.maximum(a_c, a_m),
                        gemm_compute_s=g_c, compute_s=g_c + e_c + a_c, memory_s=g_m + e_m + a_m)


def moe_prefill_slot_s(model: ModelSpec, *, hbm_bytes_per_s: ArrayLike) -> Arr:
    """What one routed token slot costs a prefill pass in one MoE layer, beyond the expert
    GEMMs (fitted terms, planner.physics.terms):

        t_slot = moe_prefill_token_overhead_s + N_pass × h × 2 B / (η_b × BW)

    The memory-bound kernels around a prefill's grouped GEMM move each routed slot's
    hidden vector (h elements, 16-bit) through HBM several times: the gather into expert
    order, the activation quantization, the scatter back and the weighted combine.  They
    run between the GEMMs, so the GEMM's roofline (compute-bound at prefill) hides none of
    it.  N_pass (``moe_prefill_slot_passes``) counts those hidden-vector passes, an
    effective count fitted on the MoE rows (it also carries the grouped GEMM's own per-slot
    losses); ``hbm_bytes_per_s`` is the sustained bandwidth η_b × BW (0: the bytes term off).
    A decode pass has its own per-slot term (``moe_token_overhead_s``: its kernels are fused
    and latency-bound at small batches)."""
    bw = _f(hbm_bytes_per_s)
    hidden = float(model.hidden_width)
    with np.errstate(divide="ignore", invalid="ignore"):
        hbm = np.where(bw > 0, term("moe_prefill_slot_passes") * hidden * ACTIVATION_BYTES / np.where(bw > 0, bw, 1.0),
                       0.0)
    return np.asarray(term("moe_prefill_token_overhead_s") + hbm, dtype=float)


def moe_slot_ranks(*, ep: ArrayLike, dp_attention: ArrayLike = False) -> Arr:
    """The ranks a MoE layer's routed token slots are divided over, for its per-slot kernels
    (routing, the permute into expert order, the combine back):

        EP_slots = EP with data-parallel attention, else 1

    With data-parallel attention each rank holds its own sequences and the all-to-all
    dispatch hands every rank only the slots routed to its experts: T·k/EP of them.  With
    tensor-parallel attention every rank holds every token after the attention's
    all-reduce, and the EP MoE kernels of the engines run over all T·k slots on each rank,
    the other ranks' experts masked (SGLang's EP MoE gathers into a T·k buffer and its
    post-reorder kernel combines over every token of the batch; TensorRT-LLM's fused MoE
    expands and finalizes every row), before the all-reduce sums the partial outputs.  So
    laying the experts over EP GPUs divides the expert GEMMs and their weights, not these
    kernels' slots."""
    return np.asarray(np.where(np.asarray(dp_attention, bool), _f(ep), 1.0), dtype=float)


def moe_overhead_s(model: ModelSpec, *, tokens: ArrayLike, ep: ArrayLike, dp_attention: ArrayLike = False,
                   decode: bool = True, hbm_bytes_per_s: ArrayLike = 0.0) -> Arr:
    """What a MoE layer costs beyond its GEMMs, over the model's MoE layers (fitted terms,
    off unless fitted; planner.physics.terms):

        t_moe = L_moe × (moe_layer_overhead_s + moe_token_overhead_s × T × k / EP_slots)

    per layer: routing (gate, top-k), the permute into expert order and back, the grouped
    GEMM's launch; per routed token slot on one GPU (T tokens × k experts over the
    ``moe_slot_ranks``: EP with data-parallel attention, else 1): the gather/scatter and the
    small-M grouped GEMM's inefficiency, a decode pass's.  A prefill pass (``decode`` False)
    has its own: the eager pass's extra per-layer cost (``moe_prefill_layer_overhead_s``,
    beyond ``moe_layer_overhead_s``) and a per-slot cost (:func:`moe_prefill_slot_s`: the
    gather, activation quantization, scatter and combine of every routed token,
    memory-bound kernels the GEMM roofline does not see; it needs the sustained bandwidth
    ``hbm_bytes_per_s`` = η_b × BW):

        t_moe,prefill = L_moe × (moe_layer_overhead_s + moe_prefill_layer_overhead_s
                                 + t_slot × T × k / EP_slots)

    0 for a dense model."""
    t = _f(tokens)
    if not model.is_moe:
        return np.zeros_like(t)
    layers = float(param_counts(model).moe_layers)
    slots = t * model.experts_per_token / moe_slot_ranks(ep=ep, dp_attention=dp_attention)
    if decode:
        return layers * (term("moe_layer_overhead_s") + term("moe_token_overhead_s") * slots)
    per_layer = term("moe_layer_overhead_s") + term("moe_prefill_layer_overhead_s")
    return layers * (per_layer + moe_prefill_slot_s(model, hbm_bytes_per_s=hbm_bytes_per_s) * slots)
