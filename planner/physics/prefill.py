"""Prefill: one prefill pass (or chunk) of a replica, as a sum of kernel groups.

Prefill of n new tokens after c cached ones (all TP·EP GPUs share the work: the
experts are spread over them and attention runs data-parallel across EP ranks):

    F = 2 × P_active × n + attention per token-context × (n·c + n²/2)   (causal)
    t = t_gemm + t_experts + t_attention (each on its roofline, over TP·EP GPUs)
        + all-reduces + all-to-alls + step_overhead_s + layer_overhead_s × L
        + MoE: L_moe × (per layer + t_slot × n·k/EP_slots), t_slot = N_pass × h × 2 B / (η_b × BW)
          (kernels.moe_overhead_s: the routed slots' gather, quantize, scatter and combine;
          EP_slots = EP with DP attention, else 1: kernels.moe_slot_ranks)
    riding in a decode iteration (marginal_s): the dense GEMMs' compute only (the decode
    step streams the weights), + t_experts + t_attention + collectives + layer_overhead_s × L

The decode step and the shared conventions: :mod:`planner.physics.step` (which
re-exports these names).  All inputs broadcast over numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.attention import attention_flops_per_token_context, shard_gemm_factor
from planner.physics.comm import layer_comm
from planner.physics.kernels import (
    ACTIVATION_BYTES,
    activation_elements_per_token,
    expert_active_params,
    experts_touched_busiest,
    kernel_groups,
    moe_overhead_s,
)
from planner.physics.kvledger import attention_layer_pairs
from planner.physics.layout import attention_tp, moe_tp
from planner.physics.memory import dp_replicated_params, kv_bytes_per_token_per_gpu
from planner.physics.terms import term
from planner.spec.context import StepKwargs
from planner.spec.params import param_counts
from planner.spec.precision import bytes_per_weight
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = ["PrefillChunks", "PrefillStep", "host_floor_s", "prefill_chunks", "prefill_flops", "prefill_step"]

Arr = NDArray[np.float64]


def host_floor_s(model: ModelSpec, *, tp: ArrayLike = 1, pp: ArrayLike = 1) -> Arr | float:
    """The hosts' floor on a colocated prompt's first token, on a replica of a MoE model laid
    over several GPUs:

        t_host = L × moe_prefill_host_layer_s   (TP·PP > 1; else 0, and 0 for a dense model)

    (a fitted term, planner.physics.terms).  The first token reaches the client no sooner
    than t_host after the iteration that prefills it begins.  Each GPU's host process issues
    an eager iteration's kernels layer by layer (routing, permutes, quantization, grouped
    GEMMs) and a layer's collectives hold every rank until the slowest host has launched
    it, so a short prompt at a light load waits on the hosts, not the GPUs.  The GPU's
    passes and the decode's pace are not held: at a high load the hosts launch the next
    iteration while the GPUs run this one, and the runs' decode shows no such cost.  One
    GPU is left out: the single-GPU MoE runs measured (Qwen3-30B-A3B offline on one B200)
    run their prompt iterations well under a floor of this size, and no data pins one of
    its own."""
    if not model.is_moe:
        return _out(np.zeros(np.broadcast_shapes(np.shape(tp), np.shape(pp))))
    multi = _f(tp) * _f(pp) > 1
    return _out(np.where(multi, float(model.layers) * term("moe_prefill_host_layer_s"), 0.0))


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


def _out(x: Arr) -> Arr | float:
    return float(x) if np.ndim(x) == 0 else x


def prefill_flops(
    *, model: ModelSpec, tokens: ArrayLike, cached_tokens: ArrayLike = 0, include_attention: bool = True
) -> Arr | float:
    """F = 2 × P_active × n + 2·(d_qk+d_v)·L·H·(n·c + n²/2), n = tokens − cached."""
    lin, att = _prefill_flops_parts(model, tokens, cached_tokens, include_attention)
    return _out(lin + att)


def _prefill_flops_parts(model: ModelSpec, tokens: ArrayLike, cached_tokens: ArrayLike,
                         include_attention: bool, sequences: ArrayLike = 1.0) -> tuple[Arr, Arr]:
    """(linear FLOPs 2·P_active·n, causal attention FLOPs) of a prefill; ``sequences``
    prompts of equal length share the pass (each attends only to its own tokens:
    s × attention(n/s after c/s))."""
    c = _f(cached_tokens)
    n = np.maximum(_f(tokens) - c, 0.0)
    seqs = np.maximum(_f(sequences), 1.0)
    lin = 2.0 * param_counts(model).active * n
    ns, cs = n / seqs, c / seqs
    if not include_attention:
        att = 0.0 * n
    elif model.has_windowed_layers:  # windowed layers attend only to the tokens they hold (kvledger)
        att = seqs * attention_flops_per_token_context(model) * _f(attention_layer_pairs(model, ns, cs)) / model.layers
    else:
        att = seqs * attention_flops_per_token_context(model) * (ns * cs + ns * ns / 2.0)
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
    # Its cost riding in a decode iteration (chunked prefill): the dense weights are
    # already streamed and the step overhead paid by the decode step, so the dense GEMMs'
    # compute + the expert and attention groups + its collectives + the eager launches.
    marginal_s: Arr | float
    gemm_s: Arr | float = 0.0  # dense GEMMs on their roofline
    expert_s: Arr | float = 0.0  # MoE expert GEMMs
    attention_s: Arr | float = 0.0  # attention (BF16 unless the engine runs FP8 attention)
    # The eager launches (layer_overhead_s × L) in marginal_s: paid once per iteration that
    # carries prompt tokens, however many prompts share it.
    launch_s: Arr | float = 0.0
    all_to_all_s: Arr | float = 0.0  # of comm_s: MoE dispatch + combine from the prompt's rank


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
    dp_attention: ArrayLike = False,
    redundant_experts: int = 0,
    bandwidth_efficiency: ArrayLike = 1.0,
    compute_efficiency: ArrayLike = 1.0,
    step_overhead_s: ArrayLike = 0.0,
    collective_latency_s: float | None = None,
    layer_overhead_s: ArrayLike = 0.0,
    include_attention: bool = True,
    fp8_attention: bool = False,
    sequences: ArrayLike = 1,
) -> PrefillStep:
    """Time to prefill ``tokens`` (of which ``cached_tokens`` hit the prefix cache),
    the prompt passing every pipeline stage in turn: dense GEMMs + expert GEMMs +
    attention, each on its own roofline, + collectives + step overhead + the eager
    launch cost per layer (a prefill pass is not a captured graph).  ``sequences``:
    the pass carries that many prompts of equal length (tokens and cached tokens are
    their sums), each attending only to its own tokens."""
    pc = param_counts(model)
    bpw = bytes_per_weight(weights_dtype)
    tp_a, pp_a, ep_a = _f(tp), _f(pp), _f(ep)
    dp = np.asarray(dp_attention, bool)
    a_tp, m_tp = _f(attention_tp(tp_a, dp)), _f(moe_tp(tp_a, ep_a))
    c = _f(cached_tokens)
    n = np.maximum(_f(tokens) - c, 0.0)
    seqs = np.maximum(_f(sequences), 1.0)
    lin, att = _prefill_flops_parts(model, tokens, cached_tokens, include_attention, seqs)
    flops = lin + att
    p_exp = expert_active_params(model)
    lin_exp = 2.0 * p_exp * n
    # Data-parallel attention: the prompt runs on ONE rank: its attention (and the replicated
    # projections) on that GPU alone; the MLPs and experts over the whole group.
    p_rep = np.where(dp, _f(dp_replicated_params(model, ep=ep_a)), 0.0)
    lin_rep = 2.0 * p_rep * n
    if model.is_moe and pc.expert_total > 0:
        # The experts the prompt's tokens touch, on the busiest GPU (all of its slots for long prompts).
        busiest = _f(experts_touched_busiest(experts=model.experts + int(redundant_experts),
                                             top_k=model.experts_per_token, tokens=n, ep=ep_a))
        w_exp = busiest * (pc.expert_total / model.experts) * bpw / m_tp
    else:
        w_exp = np.zeros_like(n)
    rep = p_rep * bpw
    w_dense = ((pc.total - pc.expert_total) * bpw - rep) / tp_a + rep
    k_gpu = _f(kv_bytes_per_token_per_gpu(model=model, kv_dtype=kv_dtype, tp=a_tp, pp=1,
                                         context_tokens=(n + c) / seqs))
    kv = (n + c) * k_gpu
    act_d = activation_elements_per_token(model, a_tp)[0]
    act_e = activation_elements_per_token(model, m_tp)[1]
    kg = kernel_groups(gpu=gpu, weights_dtype=weights_dtype, dense_flops=(lin - lin_exp - lin_rep) / tp_a + lin_rep,
                       dense_bytes=w_dense + n * act_d * ACTIVATION_BYTES, expert_flops=lin_exp / tp_a,
                       expert_bytes=w_exp + n / ep_a * act_e * ACTIVATION_BYTES, attention_flops=att / a_tp,
                       attention_bytes=kv, compute_efficiency=compute_efficiency,
                       bandwidth_efficiency=bandwidth_efficiency, gemm_factor=shard_gemm_factor(model, tp_a),
                       fp8_attention=fp8_attention)
    hbm = w_dense + w_exp + (n + c) * k_gpu
    lc = layer_comm(model=model, gpu=gpu, weights_dtype=weights_dtype, tp=tp_a, pp=pp_a, ep=ep_a, dp_attention=dp,
                    tokens=n, rank_tokens=n, latency_s=collective_latency_s, redundant_experts=redundant_experts)
    comm = lc.total_s
    launches = _f(layer_overhead_s) * model.layers
    # routing, permute, and each routed slot's memory-bound kernels at the sustained bandwidth (fitted terms)
    moe = moe_overhead_s(model, tokens=n, ep=ep_a, dp_attention=dp, decode=False,
                         hbm_bytes_per_s=_f(bandwidth_efficiency) * gpu.hbm_bytes_per_s)
    overhead = _f(step_overhead_s) + launches + moe
    t = kg.total_s + comm + overhead
    t = np.where(n > 0, t, 0.0)
    # Riding in a decode iteration, the dense weights are already streamed (their GEMMs add
    # only the prompt tokens' compute), the step overhead is paid; the iteration runs eagerly.
    marginal = np.where(n > 0, kg.gemm_compute_s + kg.expert_s + kg.attention_s + comm + launches + moe, 0.0)
    shape = np.shape(t)

    def full(x: Arr) -> Arr | float:
        return _out(np.broadcast_to(x, shape).astype(float))

    return PrefillStep(
        time_s=_out(t),
        compute_s=full(kg.compute_s),
        memory_s=full(kg.memory_s),
        comm_s=full(comm),
        overhead_s=full(overhead),
        flops=full(flops),
        attention_flops=full(att),
        bytes_per_gpu=full(hbm),
        compute_bound=bool(kg.compute_s >= kg.memory_s) if np.ndim(t) == 0 else
        np.broadcast_to(kg.compute_s >= kg.memory_s, shape),
        marginal_s=full(marginal),
        gemm_s=full(kg.gemm_s),
        expert_s=full(kg.expert_s),
        attention_s=full(kg.attention_s),
        launch_s=full(np.where(n > 0, launches, 0.0)),
        all_to_all_s=full(np.where(n > 0, lc.all_to_all_s, 0.0)),
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
    launch_s: Arr | float = 0.0  # the eager launches each riding chunk's marginal_s includes (per iteration)

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
    launch = np.asarray(st.launch_s, dtype=float)
    return PrefillChunks(times_s=np.asarray(st.time_s, dtype=float), marginal_s=np.asarray(st.marginal_s, dtype=float),
                         mask=mask, counts=counts, launch_s=float(np.max(launch)) if launch.size else 0.0)
