"""Step time: one decode iteration and one prefill, as a sum of kernel groups.

The seeds' bound (002), ``t ≥ max(F/(η_c·C), D/(η_b·BW))``, holds per kernel, not per
step: a step runs the dense GEMMs, then attention over the KV cache, then (MoE) the
expert GEMMs, each limited by its own roof (:mod:`planner.physics.kernels`):

    step_s = PP × (t_gemm + t_experts + t_attention) + collectives + overhead

Decode at batch B, live context S (per GPU of a TP·PP·EP replica, per stage pass):

    t_gemm      = max(2·P_dense·B/(TP·PP·EP) / (η_c·C_w), (W_dense/(TP·PP) + activations) / (η_b·BW))
    t_experts   = max(2·P_expert,active·B/(TP·PP·EP) / (η_c·C_w),
                      busiest GPU's touched experts × W_expert/(TP·PP) / (η_b·BW))
    t_attention = max(attention per cached token × S × B/(TP·PP·EP) / (η_c·C_attn), (B/EP)·S·K_gpu / (η_b·BW))
    overhead    = step_overhead_s + layer_overhead_s × L without CUDA graphs
                  (with: graph_layer_overhead_s × L, a fitted term, 0 unless kept)
                  + sequence_overhead_s × B (a fitted term, planner.physics.terms)

C_attn is the 16-bit rate unless the engine runs FP8 attention (an FP8 KV cache halves
the KV bytes, not the attention FLOP time).  Decode replays a captured CUDA graph, so
the per-kernel launch cost (``layer_overhead_s`` per layer) is paid by prefill and
hybrid iterations only.

MoE decode reads only the experts a batch touches: each expert is touched with
probability q = 1 − (1 − k/E)^tokens; with EP the E/EP experts of one GPU are
touched Binomial(E/EP, q) times, and the GPU with the most sets the step: its
expected count is E[max of EP such counts] = Σ_x (1 − F(x)^EP).  At EP = 1 that
is E × q.  The all-to-all (dispatch and combine) moves each GPU's own tokens:
(B/EP) × k × hidden × 2 bytes per GPU, none at EP = 1.  TP collectives: 2
all-reduces per layer per token, each λ + 2(TP−1)/TP × bytes / link (λ ≈ 5 µs
NVLink, 25 µs PCIe).  A PP hop is point to point: λ + bytes / link.

Attention FLOPs: :mod:`planner.physics.attention`; collectives (ring all-reduce with
its per-hop latency): :mod:`planner.physics.comm`.

Prefill (one pass or chunk, and a prompt's chunks): :mod:`planner.physics.prefill`,
whose names this module re-exports.

All inputs broadcast over numpy arrays (batch, context, tp, pp, ep ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.attention import attention_flops_per_token_context, shard_gemm_factor
from planner.physics.comm import all_to_all_s, collective_s, layer_comm, p2p_s
from planner.physics.kernels import (
    ACTIVATION_BYTES,
    activation_elements_per_token,
    expert_active_params,
    experts_touched,
    experts_touched_busiest,
    kernel_groups,
    moe_overhead_s,
)
from planner.physics.kvledger import attended_layer_tokens
from planner.physics.layout import attention_dp, attention_tp, moe_tp
from planner.physics.link import LINK_DIRECTIONS, NVLINK_COLLECTIVE_LATENCY_S, PCIE_COLLECTIVE_LATENCY_S
from planner.physics.memory import dp_replicated_params, kv_bytes_per_token_per_gpu
from planner.physics.prefill import (
    PrefillChunks,
    PrefillStep,
    host_floor_s,
    prefill_chunks,
    prefill_flops,
    prefill_step,
)
from planner.physics.speculative import Drafter, tokens_per_verify
from planner.physics.techniques import speculative_cycle_s
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
    "draft_cycle_s",
    "draft_step_s",
    "experts_touched",
    "experts_touched_busiest",
    "host_floor_s",
    "p2p_s",
    "prefill_chunks",
    "prefill_flops",
    "prefill_step",
]

Arr = NDArray[np.float64]


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


def _out(x: Arr) -> Arr | float:
    return float(x) if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class DecodeStep:
    """One decode iteration of a replica (arrays when inputs are arrays)."""

    step_s: Arr | float
    compute_s: Arr | float  # per stage pass, Σ over the kernel groups
    memory_s: Arr | float  # per stage pass, Σ over the kernel groups
    comm_s: Arr | float
    overhead_s: Arr | float
    bytes_per_gpu: Arr | float  # HBM bytes one GPU streams per step (all its passes)
    flops_per_gpu: Arr | float
    attention_flops_per_gpu: Arr | float  # of which attention (at the attention kernel's rate)
    memory_bound: NDArray[np.bool_] | bool  # Σ memory times ≥ Σ compute times over the kernel groups
    gemm_s: Arr | float = 0.0  # per stage pass: dense GEMMs on their roofline
    expert_s: Arr | float = 0.0  # MoE expert GEMMs
    attention_s: Arr | float = 0.0  # attention reading the KV cache
    # The dense GEMMs' memory time not covered by their compute: prompt tokens riding in this
    # iteration multiply through the weights it already streams, for free up to this much.
    gemm_slack_s: Arr | float = 0.0
    all_reduce_s: Arr | float = 0.0  # of comm_s: the TP all-reduces (and DP attention's MLP gather/scatter)
    all_to_all_s: Arr | float = 0.0  # of comm_s: MoE dispatch + combine over the EP group (busiest GPU)


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
    dp_attention: ArrayLike = False,
    redundant_experts: int = 0,
    bandwidth_efficiency: ArrayLike = 1.0,
    compute_efficiency: ArrayLike = 1.0,
    step_overhead_s: ArrayLike = 0.0,
    collective_latency_s: float | None = None,
    layer_overhead_s: ArrayLike = 0.0,
    tokens_per_sequence: ArrayLike = 1.0,
    include_attention: bool = True,
    cuda_graphs: bool = True,
    fp8_attention: bool = False,
) -> DecodeStep:
    """Time of one decode iteration for ``batch_size`` sequences at ``context_tokens``:
    PP × (dense GEMMs + expert GEMMs + attention, each on its own roofline) + collectives
    + overhead.  ``cuda_graphs``: the decode pass replays a captured graph (no per-layer
    launch cost, the engines' default for decode); without, ``layer_overhead_s`` × L is paid.

    ``tokens_per_sequence`` > 1 is a speculative verify pass (k+1 positions per
    sequence: the same bytes, k+1 times the FLOPs).
    """
    pc = param_counts(model)
    bpw = bytes_per_weight(weights_dtype)
    b, s = _f(batch_size), _f(context_tokens)
    tp_a, pp_a, ep_a = _f(tp), _f(pp), _f(ep)
    dp = np.asarray(dp_attention, bool)
    a_tp, ranks, m_tp = _f(attention_tp(tp_a, dp)), _f(attention_dp(tp_a, dp)), _f(moe_tp(tp_a, ep_a))
    tps = _f(tokens_per_sequence)
    micro = b / pp_a  # sequences per pipeline microbatch
    gpus = tp_a * pp_a
    # Data-parallel attention streams the attention weights (and, EP > 1, the shared experts) on every rank.
    rep = np.where(dp, _f(dp_replicated_params(model, ep=ep_a)), 0.0) * bpw
    w_dense = ((pc.total - pc.expert_total) * bpw - rep) / gpus + rep / pp_a
    p_exp = expert_active_params(model)
    if model.is_moe and pc.expert_total > 0:
        busiest = _f(experts_touched_busiest(experts=model.experts + int(redundant_experts),
                                             top_k=model.experts_per_token, tokens=micro * tps, ep=ep_a))
        w_exp = busiest * (pc.expert_total / model.experts) * bpw / (m_tp * pp_a)
    else:
        w_exp = np.zeros_like(micro)
    # KV/token at the context: the ledger's where layers are windowed (gpt-oss, Llama 4), else constant.
    k_gpu = _f(kv_bytes_per_token_per_gpu(model=model, kv_dtype=kv_dtype, tp=a_tp, pp=pp_a, context_tokens=s))
    kv = (micro / ranks) * s * k_gpu  # each attention rank reads its own sequences' KV
    tokens_gpu = micro * tps / ranks  # tokens one GPU's attention and dense GEMMs see
    act_d = activation_elements_per_token(model, a_tp)[0]
    act_e = activation_elements_per_token(model, m_tp)[1]
    # Per GPU, per stage pass (one PP stage holds 1/PP of the layers).
    lin_dense = 2.0 * (pc.active - p_exp) * micro * tps / gpus
    lin_exp = 2.0 * p_exp * micro * tps / gpus
    # A decode token attends to what each layer holds: the context, or its window (kvledger).
    attended = _f(attended_layer_tokens(model, s)) / model.layers if model.has_windowed_layers else s
    attn = (attention_flops_per_token_context(model, absorbed=True) * attended * micro * tps / gpus
            if include_attention else np.zeros_like(lin_dense))
    kg = kernel_groups(gpu=gpu, weights_dtype=weights_dtype, dense_flops=lin_dense,
                       dense_bytes=w_dense + tokens_gpu * act_d * ACTIVATION_BYTES / pp_a,
                       expert_flops=lin_exp,
                       expert_bytes=w_exp + micro * tps / ep_a * act_e * ACTIVATION_BYTES / pp_a,
                       attention_flops=attn, attention_bytes=kv if include_attention else np.zeros_like(kv),
                       compute_efficiency=compute_efficiency, bandwidth_efficiency=bandwidth_efficiency,
                       gemm_factor=shard_gemm_factor(model, tp_a), fp8_attention=fp8_attention)
    stage_s = kg.total_s
    bytes_stage = w_dense + w_exp + kv
    flops_stage = lin_dense + lin_exp + attn
    lc = layer_comm(model=model, gpu=gpu, weights_dtype=weights_dtype, tp=tp_a, pp=pp_a, ep=ep_a, dp_attention=dp,
                    tokens=micro * tps, rank_tokens=micro * tps / ranks, latency_s=collective_latency_s,
                    redundant_experts=redundant_experts)
    comm = lc.total_s
    launches = (term("graph_layer_overhead_s") if cuda_graphs else _f(layer_overhead_s)) * model.layers
    # MoE layers beyond their GEMMs (routing, permute; fitted terms): each stage's microbatch
    # passes its share of the MoE layers, so over PP stages: every MoE layer once per microbatch.
    moe = moe_overhead_s(model, tokens=micro * tps, ep=ep_a, dp_attention=dp)
    overhead = np.broadcast_to(_f(step_overhead_s) + launches + term("sequence_overhead_s") * b + moe,
                               np.shape(stage_s)).astype(float)
    step = pp_a * stage_s + comm + overhead
    shape = np.shape(step)

    def full(x: Arr) -> Arr | float:
        return _out(np.broadcast_to(x, shape).astype(float))

    return DecodeStep(
        step_s=_out(step),
        compute_s=full(kg.compute_s),
        memory_s=full(kg.memory_s),
        comm_s=full(comm),
        overhead_s=_out(overhead),
        bytes_per_gpu=full(pp_a * bytes_stage),
        flops_per_gpu=full(pp_a * flops_stage),
        attention_flops_per_gpu=full(pp_a * attn),
        memory_bound=bool(kg.memory_s >= kg.compute_s) if np.ndim(step) == 0 else
        np.broadcast_to(kg.memory_s >= kg.compute_s, shape),
        gemm_s=full(kg.gemm_s),
        expert_s=full(kg.expert_s),
        attention_s=full(kg.attention_s),
        gemm_slack_s=full(np.maximum(kg.gemm_s - kg.gemm_compute_s, 0.0)),
        all_reduce_s=full(lc.all_reduce_s),
        all_to_all_s=full(lc.all_to_all_s),
    )


@dataclass(frozen=True)
class DecodeCycle:
    """A decode step and, with speculation, its verify cycle (arrays when inputs are arrays).

    cycle = verify step + the k draft forwards (= step without speculation), those the
    drafter's own decode steps (planner.physics.speculative, ``draft_cycle_s``) or
    k × draft_cost × step;
    ITL = cycle / tokens per pass.
    """

    step: DecodeStep
    cycle_s: Arr | float
    tokens_per_pass: float
    itl_s: Arr | float
    verify_s: Arr | float = 0.0  # the target's pass over k + 1 positions per sequence (0: off)
    draft_s: Arr | float = 0.0  # the cycle's draft forwards, all k of them (0: off)


def draft_step_s(drafter: Drafter, *, batch_size: ArrayLike, context_tokens: ArrayLike,
                 tokens_per_sequence: ArrayLike = 1.0, **kw: Unpack[StepKwargs]) -> Arr | float:
    """One draft forward: the drafter's own decode step at the batch, by the same step model
    (its weights streamed, its KV read, its experts touched), on the target's TP group
    (the engines run the drafter at the target's TP), one pipeline stage, no scheduler
    overhead of its own (it runs inside the target's iteration)."""
    m = drafter.timing_model
    args: StepKwargs = {**kw, "model": m, "weights_dtype": drafter.weights_dtype or kw["weights_dtype"], "pp": 1,
                        "ep": kw["ep"] if m.is_moe else 1, "step_overhead_s": 0.0}
    return decode_step(batch_size=batch_size, context_tokens=context_tokens,
                       tokens_per_sequence=tokens_per_sequence, **args).step_s


def draft_cycle_s(drafter: Drafter, *, draft_tokens: int, batch_size: ArrayLike, context_tokens: ArrayLike,
                  **kw: Unpack[StepKwargs]) -> Arr | float:
    """The k draft forwards of one cycle: the first over the k + 1 positions the last verify
    pass settled (the drafter reads the target's state, or the tokens, of every accepted
    position: vLLM's proposers and SGLang's draft-extend pass), the other k − 1 over one
    position each (engines pad to k + 1: CUDA graphs)."""
    first = _f(draft_step_s(drafter, batch_size=batch_size, context_tokens=context_tokens,
                            tokens_per_sequence=draft_tokens + 1, **kw))
    if draft_tokens == 1:
        return _out(first)
    one = _f(draft_step_s(drafter, batch_size=batch_size, context_tokens=context_tokens, **kw))
    return _out(first + (draft_tokens - 1) * one)


def decode_cycle(
    *, batch_size: ArrayLike, context_tokens: ArrayLike, draft_tokens: int = 0,
    acceptance: float | Sequence[float] = 0.0, draft_cost: float | None = 0.0, drafter: Drafter | None = None,
    **kw: Unpack[StepKwargs],
) -> DecodeCycle:
    """The decode cycle at a batch: one step, or a speculative verify pass over
    k+1 positions plus k draft forwards, and the ITL it gives.

    ``drafter`` (``speculative.drafter_for``) sets the acceptance per position and, with
    its ``draft_cost`` None, times the draft forwards by the step model (``draft_cycle_s``);
    otherwise ``acceptance`` (one α, or a_1 … a_K) and k × ``draft_cost`` × step."""
    st = decode_step(batch_size=batch_size, context_tokens=context_tokens, **kw)
    if draft_tokens == 0:
        return DecodeCycle(step=st, cycle_s=st.step_s, tokens_per_pass=1.0, itl_s=st.step_s)
    verify = decode_step(batch_size=batch_size, context_tokens=context_tokens, tokens_per_sequence=draft_tokens + 1,
                         **kw)
    if drafter is not None:
        acceptance, draft_cost = drafter.acceptance, drafter.draft_cost
    if draft_cost is None:
        if drafter is None:
            raise ValueError("speculative.draft_cost: None needs a drafter to time")
        d_s = _f(draft_cycle_s(drafter, draft_tokens=draft_tokens, batch_size=batch_size,
                               context_tokens=context_tokens, **kw)) / draft_tokens
    else:
        d_s = float(draft_cost) * _f(st.step_s)
    cycle = speculative_cycle_s(step_s=d_s, verify_step_s=verify.step_s, draft_tokens=draft_tokens, draft_cost=1.0)
    tpp = tokens_per_verify(acceptance, draft_tokens)
    return DecodeCycle(step=st, cycle_s=cycle, tokens_per_pass=tpp, itl_s=_out(np.asarray(cycle) / tpp),
                       verify_s=verify.step_s,
                       draft_s=_out(np.broadcast_to(draft_tokens * d_s, np.shape(cycle)).astype(float)))
