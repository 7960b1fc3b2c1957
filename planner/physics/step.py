"""Step time: one decode iteration and one prefill, on the roofline.

The seeds' bound (002):

    t_step ≥ max( F / (η_c · C_peak), D_HBM / (η_b · B_HBM) ) + collectives + overhead

Decode at batch B, live context S (per GPU of a TP·PP·EP replica):

    D = W_dense/(TP·PP) + touched experts' W/(TP·PP·EP) + (B/EP) × S × K_gpu
    F = 2 × P_active × B/(TP·PP·EP) + attention 2·(d_qk+d_v)·L·H·S·B/(TP·PP·EP)
    step_s = PP × max(F/(η_c·C), D/(η_b·BW)) + 2·L all-reduces (TP>1) + all-to-alls (EP>1)
             + PP hops + overhead,  overhead = step_overhead_s + layer_overhead_s × L

The overhead has a fixed part (scheduling, sampling) and a part per layer
(kernel launches and synchronization not hidden by CUDA graphs), so a deep
model pays more of it than a shallow one.

MoE decode reads only the experts a batch touches, in expectation
E × (1 − (1 − k/E)^tokens) per layer.  TP collectives: 2 all-reduces per layer
per token, each λ + 2(TP−1)/TP × bytes / link (λ ≈ 5 µs NVLink, 25 µs PCIe).

Prefill of n new tokens after c cached ones:

    F = 2 × P_active × n + 2·(d_qk+d_v)·L·H·(n·c + n²/2)   (causal attention)
    t = max(F/(TP·η_c·C), (W/TP + (n+c)·K)/(η_b·BW)) + all-reduces + overhead

All inputs broadcast over numpy arrays (batch, context, tp, pp, ep ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.memory import kv_bytes_per_token_per_gpu
from planner.physics.roofline import peak_flops_per_s
from planner.physics.techniques import speculative_cycle_s, speculative_tokens_per_pass
from planner.spec.context import StepKwargs
from planner.spec.params import param_counts
from planner.spec.precision import bytes_per_weight
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = [
    "ACTIVATION_BYTES",
    "LINK_DIRECTIONS",
    "PP_HOP_MESSAGE_FRACTION",
    "NVLINK_COLLECTIVE_LATENCY_S",
    "PCIE_COLLECTIVE_LATENCY_S",
    "DecodeCycle",
    "DecodeStep",
    "PrefillStep",
    "attention_flops_per_token_context",
    "collective_s",
    "decode_cycle",
    "decode_step",
    "experts_touched",
    "prefill_flops",
    "prefill_step",
]

# Per-collective launch + latency floor (seeds 001: "160 × ~5 µs ≈ 0.8 ms" over
# NVLink, "~25 µs each" over PCIe).
NVLINK_COLLECTIVE_LATENCY_S = 5e-6
PCIE_COLLECTIVE_LATENCY_S = 25e-6
# Activations travel in 16-bit.
ACTIVATION_BYTES = 2.0
# The catalog's scaleup_bytes_per_s is the vendor's aggregate figure, both
# directions summed (H100 NVLink 4: 900 GB/s = 450 GB/s each way); a collective's
# send, or a transfer, uses one direction.
LINK_DIRECTIONS = 2.0
# A pipeline hop is point-to-point, but collective_s charges a ring all-reduce
# 2(g−1)/g × bytes; halving the message turns it into (g−1)/g × bytes per hop.
PP_HOP_MESSAGE_FRACTION = 0.5

Arr = NDArray[np.float64]


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


def _out(x: Arr) -> Arr | float:
    return float(x) if np.ndim(x) == 0 else x


def _hidden(model: ModelSpec) -> float:
    return float(model.hidden or model.heads * model.head_dim)


def _attn_dims(model: ModelSpec) -> float:
    """d_qk + d_v per head."""
    if model.attention == "mla":
        return float(model.head_dim + (model.v_head_dim or model.head_dim))
    return 2.0 * model.head_dim


def attention_flops_per_token_context(model: ModelSpec) -> float:
    """FLOPs one token spends attending to one cached token: 2·(d_qk + d_v)·L·H."""
    return 2.0 * _attn_dims(model) * model.layers * model.heads


def experts_touched(*, experts: int, top_k: int, tokens: ArrayLike) -> Arr | float:
    """Expected distinct experts a batch touches per layer: E × (1 − (1 − k/E)^tokens)."""
    t = _f(tokens)
    return _out(experts * (1.0 - (1.0 - top_k / experts) ** t))


def _link(gpu: GpuSpec, group: Arr) -> tuple[Arr, Arr]:
    """(latency_s, bytes/s one direction) of the link a group of GPUs talks over."""
    on_nvlink = (group <= gpu.scaleup_domain_gpus) & (gpu.scaleup_bytes_per_s is not None)
    lat = np.where(on_nvlink, NVLINK_COLLECTIVE_LATENCY_S, PCIE_COLLECTIVE_LATENCY_S)
    bw = np.where(on_nvlink, (gpu.scaleup_bytes_per_s or gpu.pcie_bytes_per_s) / LINK_DIRECTIONS, gpu.pcie_bytes_per_s)
    return lat, bw


def collective_s(
    *, gpu: GpuSpec, group: ArrayLike, message_bytes: ArrayLike, count: ArrayLike,
    latency_s: float | None = None,
) -> Arr | float:
    """count × (λ + 2(g−1)/g × bytes / link), zero for a group of one."""
    g = _f(group)
    lat, bw = _link(gpu, g)
    if latency_s is not None:
        lat = np.full_like(lat, latency_s)
    per = lat + 2.0 * (g - 1.0) / g * _f(message_bytes) / bw
    return _out(np.where(g > 1, _f(count) * per, 0.0))


@dataclass(frozen=True)
class DecodeStep:
    """One decode iteration of a replica (arrays when inputs are arrays)."""

    step_s: Arr | float
    compute_s: Arr | float  # per stage pass
    memory_s: Arr | float  # per stage pass
    comm_s: Arr | float
    overhead_s: Arr | float
    bytes_per_gpu: Arr | float  # HBM bytes one GPU streams per step (all its passes)
    flops_per_gpu: Arr | float
    memory_bound: NDArray[np.bool_] | bool


def decode_step(
    *,
    model: ModelSpec,
    gpu: GpuSpec,
    weights_dtype: str,
    kv_dtype: str,
    batch_size: ArrayLike,
    context_tokens: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    ep: ArrayLike = 1,
    bandwidth_efficiency: ArrayLike = 1.0,
    compute_efficiency: ArrayLike = 1.0,
    step_overhead_s: ArrayLike = 0.0,
    collective_latency_s: float | None = None,
    layer_overhead_s: ArrayLike = 0.0,
    tokens_per_sequence: ArrayLike = 1.0,
    include_attention: bool = True,
) -> DecodeStep:
    """Time of one decode iteration for ``batch_size`` sequences at ``context_tokens``.

    ``tokens_per_sequence`` > 1 is a speculative verify pass (k+1 positions per
    sequence: the same bytes, k+1 times the FLOPs).
    """
    pc = param_counts(model)
    bpw = bytes_per_weight(weights_dtype)
    b, s = _f(batch_size), _f(context_tokens)
    tp_a, pp_a, ep_a = _f(tp), _f(pp), _f(ep)
    tps = _f(tokens_per_sequence)
    micro = b / pp_a  # sequences per pipeline microbatch
    w_dense = (pc.total - pc.expert_total) * bpw / (tp_a * pp_a)
    if model.is_moe and pc.expert_total > 0:
        touched = _f(experts_touched(experts=model.experts, top_k=model.experts_per_token, tokens=micro * tps))
        w_exp = touched / model.experts * pc.expert_total * bpw / (tp_a * pp_a * ep_a)
    else:
        w_exp = np.zeros_like(micro)
    k_gpu = _f(kv_bytes_per_token_per_gpu(model=model, kv_dtype=kv_dtype, tp=tp_a, pp=pp_a))
    kv = (micro / ep_a) * s * k_gpu
    bytes_stage = w_dense + w_exp + kv
    attn = attention_flops_per_token_context(model) * s if include_attention else 0.0
    flops_stage = (2.0 * pc.active + attn) * micro * tps / (tp_a * pp_a * ep_a)
    peak = peak_flops_per_s(gpu, weights_dtype)
    compute_s = flops_stage / (_f(compute_efficiency) * peak)
    memory_s = bytes_stage / (_f(bandwidth_efficiency) * gpu.hbm_bytes_per_s)
    stage_s = np.maximum(compute_s, memory_s)
    msg = micro * tps * _hidden(model) * ACTIVATION_BYTES
    comm = _f(collective_s(gpu=gpu, group=tp_a, message_bytes=msg, count=2 * model.layers,
                           latency_s=collective_latency_s))
    if model.is_moe:
        moe_layers = model.layers - model.dense_layers
        comm = comm + _f(collective_s(gpu=gpu, group=tp_a * ep_a, message_bytes=msg * model.experts_per_token,
                                      count=2 * moe_layers, latency_s=collective_latency_s))
    comm = comm + _f(collective_s(gpu=gpu, group=pp_a, message_bytes=msg * PP_HOP_MESSAGE_FRACTION, count=pp_a - 1,
                                  latency_s=collective_latency_s))
    overhead = np.broadcast_to(_f(step_overhead_s) + _f(layer_overhead_s) * model.layers,
                               np.shape(stage_s)).astype(float)
    step = pp_a * stage_s + comm + overhead
    return DecodeStep(
        step_s=_out(step),
        compute_s=_out(compute_s),
        memory_s=_out(memory_s),
        comm_s=_out(np.broadcast_to(comm, np.shape(step)).astype(float)),
        overhead_s=_out(overhead),
        bytes_per_gpu=_out(pp_a * bytes_stage),
        flops_per_gpu=_out(pp_a * flops_stage),
        memory_bound=bool(memory_s >= compute_s) if np.ndim(stage_s) == 0 else (memory_s >= compute_s),
    )


@dataclass(frozen=True)
class DecodeCycle:
    """A decode step and, with speculation, its verify cycle (arrays when inputs are arrays).

    cycle = verify step + k × draft_cost × step (= step without speculation);
    ITL = cycle / tokens per pass.
    """

    step: DecodeStep
    cycle_s: Arr | float
    tokens_per_pass: float
    itl_s: Arr | float


def decode_cycle(
    *, batch_size: ArrayLike, context_tokens: ArrayLike, draft_tokens: int = 0, acceptance: float = 0.0,
    draft_cost: float = 0.0, **kw: Unpack[StepKwargs],
) -> DecodeCycle:
    """The decode cycle at a batch: one step, or a speculative verify pass over
    k+1 positions plus k draft steps, and the ITL it gives."""
    st = decode_step(batch_size=batch_size, context_tokens=context_tokens, **kw)
    if draft_tokens == 0:
        return DecodeCycle(step=st, cycle_s=st.step_s, tokens_per_pass=1.0, itl_s=st.step_s)
    verify = decode_step(batch_size=batch_size, context_tokens=context_tokens, tokens_per_sequence=draft_tokens + 1,
                         **kw)
    cycle = speculative_cycle_s(step_s=st.step_s, verify_step_s=verify.step_s, draft_tokens=draft_tokens,
                                draft_cost=draft_cost)
    tpp = float(speculative_tokens_per_pass(draft_tokens=draft_tokens, acceptance=acceptance))
    return DecodeCycle(step=st, cycle_s=cycle, tokens_per_pass=tpp, itl_s=_out(np.asarray(cycle) / tpp))


def prefill_flops(
    *, model: ModelSpec, tokens: ArrayLike, cached_tokens: ArrayLike = 0, include_attention: bool = True
) -> Arr | float:
    """F = 2 × P_active × n + 2·(d_qk+d_v)·L·H·(n·c + n²/2), n = tokens − cached."""
    c = _f(cached_tokens)
    n = np.maximum(_f(tokens) - c, 0.0)
    f = 2.0 * param_counts(model).active * n
    if include_attention:
        f = f + attention_flops_per_token_context(model) * (n * c + n * n / 2.0)
    return _out(f)


@dataclass(frozen=True)
class PrefillStep:
    """One prefill (or prefill chunk) on a replica."""

    time_s: Arr | float
    compute_s: Arr | float
    memory_s: Arr | float
    comm_s: Arr | float
    overhead_s: Arr | float
    flops: Arr | float  # whole replica
    bytes_per_gpu: Arr | float  # HBM bytes one GPU streams (weights + KV)
    compute_bound: NDArray[np.bool_] | bool


def prefill_step(
    *,
    model: ModelSpec,
    gpu: GpuSpec,
    weights_dtype: str,
    kv_dtype: str,
    tokens: ArrayLike,
    cached_tokens: ArrayLike = 0,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    ep: ArrayLike = 1,
    bandwidth_efficiency: ArrayLike = 1.0,
    compute_efficiency: ArrayLike = 1.0,
    step_overhead_s: ArrayLike = 0.0,
    collective_latency_s: float | None = None,
    layer_overhead_s: ArrayLike = 0.0,
    include_attention: bool = True,
) -> PrefillStep:
    """Time to prefill ``tokens`` (of which ``cached_tokens`` hit the prefix cache)."""
    pc = param_counts(model)
    bpw = bytes_per_weight(weights_dtype)
    tp_a, pp_a, ep_a = _f(tp), _f(pp), _f(ep)
    c = _f(cached_tokens)
    n = np.maximum(_f(tokens) - c, 0.0)
    flops = _f(prefill_flops(model=model, tokens=tokens, cached_tokens=cached_tokens,
                             include_attention=include_attention))
    peak = peak_flops_per_s(gpu, weights_dtype)
    compute_s = flops / (tp_a * _f(compute_efficiency) * peak)
    w = ((pc.total - pc.expert_total) / tp_a + pc.expert_total / (tp_a * ep_a)) * bpw
    k_gpu = _f(kv_bytes_per_token_per_gpu(model=model, kv_dtype=kv_dtype, tp=tp_a, pp=1))
    hbm = w + (n + c) * k_gpu
    memory_s = hbm / (_f(bandwidth_efficiency) * gpu.hbm_bytes_per_s)
    msg = n * _hidden(model) * ACTIVATION_BYTES
    comm = _f(collective_s(gpu=gpu, group=tp_a, message_bytes=msg, count=2 * model.layers,
                           latency_s=collective_latency_s))
    comm = comm + _f(collective_s(gpu=gpu, group=pp_a, message_bytes=msg * PP_HOP_MESSAGE_FRACTION, count=pp_a - 1,
                                  latency_s=collective_latency_s))
    overhead = _f(step_overhead_s) + _f(layer_overhead_s) * model.layers
    t = np.maximum(compute_s, memory_s) + comm + overhead
    t = np.where(n > 0, t, 0.0)
    return PrefillStep(
        time_s=_out(t),
        compute_s=_out(compute_s),
        memory_s=_out(memory_s),
        comm_s=_out(np.broadcast_to(comm, np.shape(t)).astype(float)),
        overhead_s=_out(np.broadcast_to(overhead, np.shape(t)).astype(float)),
        flops=_out(flops),
        bytes_per_gpu=_out(np.broadcast_to(hbm, np.shape(t)).astype(float)),
        compute_bound=bool(compute_s >= memory_s) if np.ndim(t) == 0 else (compute_s >= memory_s),
    )
