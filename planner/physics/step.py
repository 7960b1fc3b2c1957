"""Step time: one decode iteration and one prefill, on the roofline.

The seeds' bound (002):

    t_step ≥ max( F / (η_c · C_peak), D_HBM / (η_b · B_HBM) ) + collectives + overhead

Compute splits by the kernel that does it: the linear layers run at the weight
format's tensor-core rate C_w, attention at C_attn, the 16-bit rate unless the
KV cache is FP8 and the GPU has FP8 units (attention kernels read K and V in the
cache's format): F / C = F_linear / C_w + F_attention / C_attn.

Decode at batch B, live context S (per GPU of a TP·PP·EP replica):

    D = W_dense/(TP·PP) + busiest GPU's touched experts × W_expert/(TP·PP) + (B/EP) × S × K_gpu
    F = (2 × P_active + attention per cached token × S) × B/(TP·PP·EP)
    step_s = PP × max(F/(η_c·C), D/(η_b·BW)) + 2·L all-reduces (TP>1)
             + 2 all-to-alls per MoE layer (EP>1) + PP hops + overhead,
    overhead = step_overhead_s + layer_overhead_s × L + sequence_overhead_s × B
    (the last a fitted term, planner.physics.terms: per sequence per step)

MoE decode reads only the experts a batch touches: each expert is touched with
probability q = 1 − (1 − k/E)^tokens; with EP the E/EP experts of one GPU are
touched Binomial(E/EP, q) times, and the GPU with the most sets the step: its
expected count is E[max of EP such counts] = Σ_x (1 − F(x)^EP).  At EP = 1 that
is E × q.  The all-to-all (dispatch and combine) moves each GPU's own tokens:
(B/EP) × k × hidden × 2 bytes per GPU, none at EP = 1.  TP collectives: 2
all-reduces per layer per token, each λ + 2(TP−1)/TP × bytes / link (λ ≈ 5 µs
NVLink, 25 µs PCIe).  A PP hop is point to point: λ + bytes / link.

Attention FLOPs and the per-kernel compute rate: :mod:`planner.physics.attention`;
collectives (ring all-reduce with its per-hop latency): :mod:`planner.physics.comm`.

Prefill of n new tokens after c cached ones (all TP·EP GPUs share the work: the
experts are spread over them and attention runs data-parallel across EP ranks):

    F = 2 × P_active × n + attention per token-context × (n·c + n²/2)   (causal)
    t = max(F/(TP·EP·η_c·C), (W/TP + (n+c)·K)/(η_b·BW)) + all-reduces + all-to-alls + overhead
    (W: dense weights and the experts the n tokens touch on the busiest GPU)

All inputs broadcast over numpy arrays (batch, context, tp, pp, ep ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import binom

from planner.physics.attention import attention_flops_per_token_context, compute_time_s, shard_gemm_factor
from planner.physics.comm import all_to_all_s, collective_s, layer_comm_s, p2p_s
from planner.physics.link import LINK_DIRECTIONS, NVLINK_COLLECTIVE_LATENCY_S, PCIE_COLLECTIVE_LATENCY_S
from planner.physics.memory import kv_bytes_per_token_per_gpu
from planner.physics.techniques import speculative_cycle_s, speculative_tokens_per_pass
from planner.physics.terms import term
from planner.spec.context import StepKwargs
from planner.spec.params import param_counts
from planner.spec.precision import bytes_per_weight
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = [
    "ACTIVATION_BYTES",
    "LINK_DIRECTIONS",
    "NVLINK_COLLECTIVE_LATENCY_S",
    "PCIE_COLLECTIVE_LATENCY_S",
    "DecodeCycle",
    "DecodeStep",
    "PrefillChunks",
    "PrefillStep",
    "all_to_all_s",
    "attention_flops_per_token_context",
    "collective_s",
    "decode_cycle",
    "decode_step",
    "experts_touched",
    "experts_touched_busiest",
    "p2p_s",
    "prefill_chunks",
    "prefill_flops",
    "prefill_step",
]

# Activations travel in 16-bit.
ACTIVATION_BYTES = 2.0

Arr = NDArray[np.float64]


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


def _out(x: Arr) -> Arr | float:
    return float(x) if np.ndim(x) == 0 else x


def _hidden(model: ModelSpec) -> float:
    return float(model.hidden or model.heads * model.head_dim)


def experts_touched(*, experts: int, top_k: int, tokens: ArrayLike) -> Arr | float:
    """Expected distinct experts a batch touches per layer: E × (1 − (1 − k/E)^tokens)."""
    t = _f(tokens)
    return _out(experts * (1.0 - (1.0 - top_k / experts) ** t))


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
        cdf = binom.cdf(x, n.reshape(shape), q[many].reshape(shape))
        terms = np.where(x < n.reshape(shape), 1.0 - cdf ** g[many].reshape(shape), 0.0)
        out[many] = terms.sum(axis=-1)
    return _out(out.reshape(np.shape(t0)))


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
    attention_flops_per_gpu: Arr | float  # of which attention (at the attention kernel's rate)
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
        busiest = _f(experts_touched_busiest(experts=model.experts, top_k=model.experts_per_token,
                                             tokens=micro * tps, ep=ep_a))
        w_exp = busiest * (pc.expert_total / model.experts) * bpw / (tp_a * pp_a)
    else:
        w_exp = np.zeros_like(micro)
    k_gpu = _f(kv_bytes_per_token_per_gpu(model=model, kv_dtype=kv_dtype, tp=tp_a, pp=pp_a))
    kv = (micro / ep_a) * s * k_gpu
    bytes_stage = w_dense + w_exp + kv
    gpus = tp_a * pp_a * ep_a
    linear = 2.0 * pc.active * micro * tps * pp_a / gpus
    attn = (attention_flops_per_token_context(model, absorbed=True) * s * micro * tps * pp_a / gpus
            if include_attention else np.zeros_like(linear))
    flops_stage = (linear + attn) / pp_a
    compute_s = compute_time_s(gpu, weights_dtype, kv_dtype, linear / pp_a, attn / pp_a, np.ones_like(gpus),
                               compute_efficiency, gemm_factor=shard_gemm_factor(model, tp_a))
    memory_s = bytes_stage / (_f(bandwidth_efficiency) * gpu.hbm_bytes_per_s)
    stage_s = np.maximum(compute_s, memory_s)
    msg = micro * tps * _hidden(model) * ACTIVATION_BYTES
    comm = layer_comm_s(model=model, gpu=gpu, tp=tp_a, pp=pp_a, ep=ep_a, message_bytes=msg,
                        latency_s=collective_latency_s)
    overhead = np.broadcast_to(_f(step_overhead_s) + _f(layer_overhead_s) * model.layers
                               + term("sequence_overhead_s") * b, np.shape(stage_s)).astype(float)
    step = pp_a * stage_s + comm + overhead
    return DecodeStep(
        step_s=_out(step),
        compute_s=_out(compute_s),
        memory_s=_out(memory_s),
        comm_s=_out(np.broadcast_to(comm, np.shape(step)).astype(float)),
        overhead_s=_out(overhead),
        bytes_per_gpu=_out(pp_a * bytes_stage),
        flops_per_gpu=_out(pp_a * flops_stage),
        attention_flops_per_gpu=_out(np.broadcast_to(attn, np.shape(step)).astype(float)),
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
    lin, att = _prefill_flops_parts(model, tokens, cached_tokens, include_attention)
    return _out(lin + att)


def _prefill_flops_parts(model: ModelSpec, tokens: ArrayLike, cached_tokens: ArrayLike,
                         include_attention: bool) -> tuple[Arr, Arr]:
    """(linear FLOPs 2·P_active·n, causal attention FLOPs) of a prefill."""
    c = _f(cached_tokens)
    n = np.maximum(_f(tokens) - c, 0.0)
    lin = 2.0 * param_counts(model).active * n
    att = attention_flops_per_token_context(model) * (n * c + n * n / 2.0) if include_attention else 0.0 * n
    return lin, _f(att)


@dataclass(frozen=True)
class PrefillStep:
    """One prefill (or prefill chunk) on a replica."""

    time_s: Arr | float
    compute_s: Arr | float
    memory_s: Arr | float
    comm_s: Arr | float
    overhead_s: Arr | float
    flops: Arr | float  # whole replica
    attention_flops: Arr | float  # of which attention (timed at the attention kernel's rate)
    bytes_per_gpu: Arr | float  # HBM bytes one GPU streams (weights + KV)
    compute_bound: NDArray[np.bool_] | bool
    # Its cost riding in a decode iteration (chunked prefill): the dense weights
    # are already streamed and the overhead already paid by the decode step, so only
    # max(compute, (KV + touched experts' bytes) / bandwidth) + its collectives are added.
    marginal_s: Arr | float


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
    """Time to prefill ``tokens`` (of which ``cached_tokens`` hit the prefix cache),
    the prompt passing every pipeline stage in turn."""
    pc = param_counts(model)
    bpw = bytes_per_weight(weights_dtype)
    tp_a, pp_a, ep_a = _f(tp), _f(pp), _f(ep)
    c = _f(cached_tokens)
    n = np.maximum(_f(tokens) - c, 0.0)
    lin, att = _prefill_flops_parts(model, tokens, cached_tokens, include_attention)
    flops = lin + att
    compute_s = compute_time_s(gpu, weights_dtype, kv_dtype, lin, att, tp_a * ep_a, compute_efficiency,
                               gemm_factor=shard_gemm_factor(model, tp_a))
    if model.is_moe and pc.expert_total > 0:
        # The experts the prompt's tokens touch, on the busiest GPU (all of its E/EP for long prompts).
        busiest = _f(experts_touched_busiest(experts=model.experts, top_k=model.experts_per_token, tokens=n,
                                             ep=ep_a))
        w_exp = busiest * (pc.expert_total / model.experts) * bpw / tp_a
    else:
        w_exp = np.zeros_like(n)
    w = (pc.total - pc.expert_total) / tp_a * bpw + w_exp
    k_gpu = _f(kv_bytes_per_token_per_gpu(model=model, kv_dtype=kv_dtype, tp=tp_a, pp=1))
    hbm = w + (n + c) * k_gpu
    memory_s = hbm / (_f(bandwidth_efficiency) * gpu.hbm_bytes_per_s)
    # Riding in a decode iteration, the dense weights are already streamed; the
    # experts its tokens touch may not be (counted in full: an upper bound).
    kv_s = (w_exp + (n + c) * k_gpu) / (_f(bandwidth_efficiency) * gpu.hbm_bytes_per_s)
    msg = n * _hidden(model) * ACTIVATION_BYTES
    comm = layer_comm_s(model=model, gpu=gpu, tp=tp_a, pp=pp_a, ep=ep_a, message_bytes=msg,
                        latency_s=collective_latency_s)
    overhead = _f(step_overhead_s) + _f(layer_overhead_s) * model.layers
    t = np.maximum(compute_s, memory_s) + comm + overhead
    t = np.where(n > 0, t, 0.0)
    marginal = np.where(n > 0, np.maximum(compute_s, kv_s) + comm, 0.0)
    shape = np.shape(t)
    return PrefillStep(
        time_s=_out(t),
        compute_s=_out(np.broadcast_to(compute_s, shape).astype(float)),
        memory_s=_out(np.broadcast_to(memory_s, shape).astype(float)),
        comm_s=_out(np.broadcast_to(comm, shape).astype(float)),
        overhead_s=_out(np.broadcast_to(overhead, shape).astype(float)),
        flops=_out(np.broadcast_to(flops, shape).astype(float)),
        attention_flops=_out(np.broadcast_to(att, shape).astype(float)),
        bytes_per_gpu=_out(np.broadcast_to(hbm, shape).astype(float)),
        compute_bound=bool(compute_s >= memory_s) if np.ndim(t) == 0 else np.broadcast_to(compute_s >= memory_s, shape),
        marginal_s=_out(np.broadcast_to(marginal, shape).astype(float)),
    )


@dataclass(frozen=True)
class PrefillChunks:
    """A prompt prefilled in chunks: chunk i of n new tokens attends to the cached
    tokens and the i earlier chunks.  ``times_s`` has the prompts (and any
    leading layout axes) before a last axis of chunk indices; ``mask`` marks the
    real chunks."""

    times_s: Arr  # (…, S, K) each chunk run alone (a prefill-only iteration)
    marginal_s: Arr  # (…, S, K) each chunk riding in a decode iteration (PrefillStep.marginal_s)
    mask: NDArray[np.bool_]  # (S, K)
    counts: Arr  # (S,) chunks per prompt = ⌈new tokens / chunk⌉

    @property
    def total_s(self) -> Arr:
        """Σ chunk times per prompt (…, S), chunks run alone."""
        return np.asarray(np.sum(np.where(self.mask, self.times_s, 0.0), axis=-1), dtype=float)

    @property
    def marginal_total_s(self) -> Arr:
        """Σ chunk times per prompt (…, S), chunks riding in decode iterations."""
        return np.asarray(np.sum(np.where(self.mask, self.marginal_s, 0.0), axis=-1), dtype=float)


def prefill_chunks(
    *, new_tokens: ArrayLike, cached_tokens: ArrayLike, chunk_tokens: int, **kw: Unpack[StepKwargs],
) -> PrefillChunks:
    """Every chunk's time for prompts of ``new_tokens`` after ``cached_tokens``
    (1-D, one entry per prompt class): chunk i prefills min(chunk, n − i·chunk)
    tokens after cached + i·chunk.  Layout arrays in the step keywords broadcast
    in front: shape (C, 1, 1) gives times of shape (C, S, K)."""
    n = np.atleast_1d(_f(new_tokens))
    c0 = np.broadcast_to(_f(cached_tokens), n.shape)
    counts = np.maximum(np.ceil(n / chunk_tokens), 1.0)
    k = int(np.max(counts))
    i = np.arange(k, dtype=float)
    start = c0[:, None] + i[None, :] * chunk_tokens
    size = np.clip(n[:, None] - i[None, :] * chunk_tokens, 0.0, float(chunk_tokens))
    mask = i[None, :] < counts[:, None]
    st = prefill_step(tokens=start + size, cached_tokens=start, **kw)
    return PrefillChunks(times_s=np.asarray(st.time_s, dtype=float), marginal_s=np.asarray(st.marginal_s, dtype=float),
                         mask=mask, counts=counts)
