"""The operating point under SLOs, computed on arrays of candidate layouts.

For each candidate (TP, PP, EP) and every decode batch B on a grid, with the
workload's length distribution (weighted samples of prompt n and output o):

* KV fits: (B/EP)·(μ_c − h·P)·K_gpu + z·√(B/EP)·σ_c·K_gpu + P·K_gpu ≤ KV budget per GPU
  (or without the shared copy when sharing does not pay), where c = n + o is a
  sequence's final context weighted by its residence time o (z = 2.326: a p99 of
  the live KV across the batch) and a shared prefix of P tokens that a share h
  of requests hits is held once per replica.
* decode cycle at B (speculative: verify pass + k·draft_cost·step), τ tokens per pass.
* requests are split into prompt classes, and each class into prefix hits
  (P tokens cached) and misses, weighted h and 1 − h: prefill is averaged over
  hits and misses, never taken at the mean cached length.
* every prefill is chunked (``serving.chunk_tokens``), chunk i attending to the
  cached tokens and the i earlier chunks (``physics.step.prefill_chunks``).
* each serving mode under load (:mod:`planner.sizing.modes`): colocated, the
  load model with chunk stalls; disaggregated, a decode pool and a prefill pool
  pipelined over PP with the exposed KV transfer.
* the fleet: replicas = max(min_replicas, ⌈peak / (u × rate per replica)⌉); the
  prefill servers (colocated replicas, or the prefill pool) form one M/G/c pool
  behind the router, and TTFT is its p90 at the peak rate; the prefill pool
  grows past the utilization sizing until the p90 TTFT meets the target.
* the SLO is scored per request, as the simulator scores it
  (:mod:`planner.sizing.attainment`): the share of requests whose TTFT (at the fleet's
  own load) and TPOT (at the batch B, the capacity point) both meet their targets must
  reach ``slo.attainment``; the TPOT is shown at ``slo.itl_percentile`` and the stall
  as the p99 of all token gaps (bounded by ``slo.itl_gap_p99_s`` when set); the
  ``fleet_*`` numbers are the decode batch, ITL, TPOT and attainment at the fleet's
  load (Little's law on the batch grid).

The largest feasible B is the operating point.  ``plan`` calls this with one
candidate and ``sweep`` with many: one physics.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.draft import draft_memory
from planner.physics.layout import attention_dp, attention_tp
from planner.physics.memory import (
    activation_peak_bytes,
    activation_profile_tokens,
    kv_budget_bytes,
    kv_bytes_per_token_per_gpu,
    weight_bytes_per_gpu,
)
from planner.physics.queueing import TTFT_PERCENTILE, QueueWait, ServiceTimes, sojourn_quantile
from planner.physics.speculative import drafter_for
from planner.physics.step import (
    DecodeCycle,
    DecodeStep,
    PrefillChunks,
    PrefillStep,
    decode_cycle,
    prefill_chunks,
    prefill_step,
)
from planner.sizing.attainment import (
    GAP_PERCENTILE,
    TpotLoad,
    attainment,
    output_classes,
    tpot_quantile,
    tpot_within,
    ttft_within,
)
from planner.sizing.modes import (
    CEIL_TOLERANCE,
    MAX_PREFILL_POOL_GROWTH,
    ModeLoad,
    colocated_load,
    disaggregated_load,
)
from planner.sizing.workload import MAX_PROMPT_CLASSES, WorkloadStats, workload_stats
from planner.spec.catalog import get_model
from planner.spec.context import Resolved
from planner.spec.defaults import DEFAULT_MAX_BATCH

__all__ = [
    "CEIL_TOLERANCE",
    "KV_TAIL_Z",
    "TAIL_PERCENTILE",
    "MAX_PREFILL_POOL_GROWTH",
    "MAX_PROMPT_CLASSES",
    "MeanPrefill",
    "OperatingArrays",
    "ReplicaMemory",
    "WorkloadStats",
    "chunk_times_at",
    "cycle_at",
    "mean_prefill",
    "operating_arrays",
    "replica_memory",
    "scenario_draft",
    "workload_stats",
]

KV_TAIL_Z = 2.326  # one-sided 99% normal quantile
Arr = NDArray[np.float64]


@dataclass(frozen=True)
class OperatingArrays:
    """One entry per candidate (arrays of shape (C,))."""

    mode: str
    batch_size: NDArray[np.int64]
    feasible: NDArray[np.bool_]
    reason: NDArray[np.object_]
    max_sequences: Arr
    step_s: Arr
    itl_s: Arr  # mean ITL at the batch (= the mean TPOT)
    itl_percentile_s: Arr  # per-request TPOT at slo.itl_percentile at the batch, chunk stalls averaged in
    itl_gap_p99_s: Arr  # p99 of all token gaps at the batch (the chunk stall)
    itl_worst_s: Arr  # cycle + the longest chunk
    slo_attainment: Arr  # share of requests meeting both targets (TPOT at the batch, TTFT at the fleet's load)
    ttft_attainment: Arr  # of which: share with TTFT ≤ slo.ttft_s
    tpot_attainment: Arr  # share with TPOT ≤ slo.itl_s
    ttft_s: Arr  # mean, at the fleet's load: ttft_wait_s + prefill_service_s (+ exposed transfer)
    ttft_p90_s: Arr
    ttft_p99_s: Arr  # at the fleet's load (NaN where the load model gives no distribution)
    ttft_wait_s: Arr  # mean queueing wait before the prefill starts
    prefill_service_s: Arr  # a request's own mean prefill latency (colocated: its chunked iterations)
    goodput_req_s_per_replica: Arr  # decode replicas in disaggregated mode
    prefill_req_s_per_replica: Arr  # prefill replicas (colocated: same as goodput)
    tok_s_per_replica: Arr
    kv_transfer_s: Arr  # mean whole-prompt KV transfer (0 colocated)
    kv_transfer_exposed_s: Arr  # of which not hidden behind the prefill, + setup
    prefill_utilization: Arr  # utilization of the prefill servers at the fleet's load
    replicas: Arr  # colocated replicas, or prefill + decode
    prefill_replicas: Arr
    decode_replicas: Arr
    fleet_batch_size: Arr  # decode batch per replica at the peak rate on this fleet
    fleet_itl_s: Arr  # mean ITL there
    fleet_itl_percentile_s: Arr  # per-request TPOT at slo.itl_percentile there
    fleet_itl_gap_p99_s: Arr  # p99 of all token gaps there
    fleet_slo_attainment: Arr  # share of requests meeting both targets there (what the simulator scores)
    weight_bytes_per_gpu: Arr
    kv_budget_bytes: Arr
    gpus_per_replica: Arr
    batch_grid: Arr  # the decode batches tried, shape (B,)
    decode: DecodeCycle  # the decode cycle at each candidate × batch (C, B): the Plan's decode section reads it
    class_prompt: Arr  # the prompt classes the prefill chunks were computed for (WorkloadStats), shape (S,)
    class_cached: Arr
    prefill: PrefillChunks  # every class's chunk times per candidate (C, S, K): the Plan's prefill section reads them
    # A prefill pool with its own layout (planner.sizing.pools): its GPUs per replica; None: gpus_per_replica.
    prefill_gpus_per_replica: Arr | None = None


def chunk_times_at(op: OperatingArrays, candidate: int, *, prompt_tokens: float, cached_tokens: float
                   ) -> list[float] | None:
    """The chunk times (riding in decode iterations) of a prompt class ``operating_arrays``
    already computed, as floats (None: no class has that prompt and cached length)."""
    new = np.maximum(op.class_prompt - op.class_cached, 1.0)
    hits = np.flatnonzero((op.class_prompt == prompt_tokens) & (op.class_cached == cached_tokens)
                          & (new == prompt_tokens - cached_tokens))
    if hits.size == 0:
        return None
    k = int(hits[0])
    pc = op.prefill
    marginal = np.broadcast_to(pc.marginal_s, (op.batch_size.shape[0],) + pc.mask.shape)[candidate, k]
    return [float(x) for x, m in zip(marginal, pc.mask[k], strict=True) if m]


@dataclass(frozen=True)
class MeanPrefill:
    """The mean prompt prefilled alone, computed once (one array call) for the Plan's
    prefill and routing sections: a miss (nothing cached), a hit (the prefix cached, at
    most prompt − 1 tokens) and warm (the routing comparison: the whole prefix cached)."""

    hit_cached_tokens: float
    miss: PrefillStep
    hit: PrefillStep
    warm: PrefillStep


def mean_prefill(r: Resolved) -> MeanPrefill:
    """Miss, hit and warm prefills of ``workload.prompt_tokens`` on the scenario's layout."""
    w = r.scenario.workload
    hit_cached = float(min(w.prefix_tokens, w.prompt_tokens - 1))
    st = prefill_step(tokens=w.prompt_tokens, cached_tokens=np.array([0.0, hit_cached, float(w.prefix_tokens)]),
                      **r.step_kwargs())
    shape = np.shape(st.time_s)

    def at(i: int) -> PrefillStep:
        def f(a: ArrayLike) -> float:
            return float(np.broadcast_to(np.asarray(a, float), shape)[i])

        # Every field at prompt i (the kernel groups' times too): floats, the flag a bool.
        values: dict[str, Any] = {k.name: f(getattr(st, k.name)) for k in fields(PrefillStep)}
        values["compute_bound"] = bool(np.broadcast_to(st.compute_bound, shape)[i])
        return PrefillStep(**values)

    return MeanPrefill(hit_cached_tokens=hit_cached, miss=at(0), hit=at(1), warm=at(2))


def cycle_at(cyc: DecodeCycle, candidate: int, column: int) -> DecodeCycle:
    """One candidate's decode cycle at one batch of the grid, as floats."""
    st = cyc.step

    def at(a: ArrayLike) -> float:
        return float(np.broadcast_to(np.asarray(a, float), np.shape(cyc.cycle_s))[candidate, column])

    values: dict[str, Any] = {k.name: at(getattr(st, k.name)) for k in fields(DecodeStep) if k.name != "memory_bound"}
    step = DecodeStep(**values,
                      memory_bound=bool(np.broadcast_to(st.memory_bound, np.shape(cyc.cycle_s))[candidate, column]))
    return DecodeCycle(step=step, cycle_s=at(cyc.cycle_s), tokens_per_pass=cyc.tokens_per_pass, itl_s=at(cyc.itl_s),
                       verify_s=at(cyc.verify_s), draft_s=at(cyc.draft_s))


def _kv_capacity(budget: Arr, kg: Arr, ranks: Arr, st: WorkloadStats, b: Arr) -> tuple[NDArray[np.bool_], Arr]:
    """(KV fits at each batch, max sequences per replica) with the shared prefix
    held once where sharing pays (p99 of the live KV across the batch).  ``ranks``:
    attention ranks per stage (data-parallel attention: TP, each with 1/TP of the batch
    and its own KV; else 1)."""
    mu, sd = st.capacity_context_mean, st.capacity_context_std
    pre, h = st.prefix_tokens, st.prefix_hit_rate

    def fits(own_mean: float, held: Arr) -> tuple[NDArray[np.bool_], Arr]:
        x = b / ranks
        ok = (x * own_mean * kg + KV_TAIL_Z * np.sqrt(x) * sd * kg + held <= budget) & (budget > 0)
        cap = np.maximum(budget - held, 0.0) / kg
        sq = (-KV_TAIL_Z * sd + np.sqrt((KV_TAIL_Z * sd) ** 2 + 4.0 * own_mean * cap)) / (2.0 * own_mean)
        return ok, (sq * sq * ranks)[:, 0]

    ok, seqs = fits(mu, np.zeros_like(budget))
    if pre > 0 and h > 0:
        ok2, seqs2 = fits(mu - h * pre, pre * kg)
        ok, seqs = ok | ok2, np.maximum(seqs, seqs2)
    return ok, seqs


@dataclass(frozen=True)
class ReplicaMemory:
    """One GPU's memory per candidate layout (shape (C, 1); floats for one scalar
    layout): computed once here for the operating point and the Plan's memory
    section, whose derivations substitute these same values."""

    weight_bytes_per_gpu: Arr
    activation_bytes: Arr  # the engine's profile-run peak (0 with the seeds' accounting)
    kv_budget_bytes: Arr  # net of the drafter's weights (speculation: planner.physics.draft)
    kv_bytes_per_token_per_gpu: Arr  # the target's
    draft_weight_bytes_per_gpu: Arr  # speculation's drafter (0: off)
    draft_kv_bytes_per_token_per_gpu: Arr

    @property
    def cache_bytes_per_token_per_gpu(self) -> Arr:
        """KV bytes per token the engine's pool holds: target + drafter."""
        return np.asarray(self.kv_bytes_per_token_per_gpu) + np.asarray(self.draft_kv_bytes_per_token_per_gpu)


def scenario_draft(r: Resolved, *, tp: ArrayLike) -> tuple[Arr, Arr]:
    """(draft weight bytes per GPU, draft KV bytes/token per GPU) per layout (zeros: speculation off)."""
    s = r.scenario
    sp = s.speculative
    tp_a = np.asarray(tp, float)
    if sp.draft_tokens <= 0:
        return np.zeros_like(tp_a), np.zeros_like(tp_a)
    draft = get_model(sp.draft_model) if sp.draft_model is not None else None
    rows = {int(t): draft_memory(target=r.model, draft=draft, draft_tokens=sp.draft_tokens,
                                 draft_layers=sp.draft_layers, weights_dtype=sp.draft_weights_dtype or s.weights_dtype,
                                 kv_dtype=s.kv_dtype, tp=int(t), method=sp.method) for t in np.unique(tp_a)}
    w = np.vectorize(lambda t: rows[int(t)].weight_bytes_per_gpu, otypes=[float])(tp_a)
    k = np.vectorize(lambda t: rows[int(t)].kv_bytes_per_token_per_gpu, otypes=[float])(tp_a)
    return w, k


def replica_memory(r: Resolved, *, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike,
                   dp_attention: ArrayLike | None = None, context_tokens: ArrayLike | None = None) -> ReplicaMemory:
    """Weights, activation peak, KV budget and KV bytes/token on one GPU of each layout
    (``dp_attention`` None: the scenario's).  KV bytes/token per GPU follow the attention
    shards: TP heads over TP GPUs (MLA's latent on every GPU), whole KV with
    data-parallel attention (each rank its own sequences).  ``context_tokens``: the
    capacity context, at which a model with windowed layers has its KV/token (the
    ledger's KV per sequence / context; planner.physics.kvledger)."""
    s, model = r.scenario, r.model
    dp = s.parallel.dp_attention if dp_attention is None else dp_attention
    wg = np.asarray(weight_bytes_per_gpu(model=model, weights_dtype=s.weights_dtype, tp=tp, pp=pp, ep=ep,
                                         dp_attention=dp, redundant_experts=s.parallel.redundant_experts))
    util = s.serving.memory_utilization
    act = np.asarray(activation_peak_bytes(model=model, tp=tp, batched_tokens=activation_profile_tokens(
        s.serving.chunk_tokens)) if util else 0.0)
    budget = np.asarray(kv_budget_bytes(gpu=r.gpu, weight_bytes_per_gpu=wg, reserved_bytes=s.serving.reserved_bytes,
                                        memory_utilization=util, activation_bytes=act, engine=s.serving.engine))
    kg = np.asarray(kv_bytes_per_token_per_gpu(model=model, kv_dtype=s.kv_dtype, tp=attention_tp(tp, dp), pp=pp,
                                               context_tokens=context_tokens))
    dw, dk = scenario_draft(r, tp=tp)
    if s.speculative.draft_tokens > 0:
        budget = np.maximum(budget - dw, 0.0)
    return ReplicaMemory(weight_bytes_per_gpu=wg, activation_bytes=act, kv_budget_bytes=budget,
                         kv_bytes_per_token_per_gpu=kg, draft_weight_bytes_per_gpu=dw,
                         draft_kv_bytes_per_token_per_gpu=dk)


def _service_times(r: Resolved, st: WorkloadStats, *, tp: Arr, pp: Arr, ep: Arr, dp: Arr, b: Arr, riding: bool,
                   prefill_pool: Resolved | None = None) -> tuple[DecodeCycle, ServiceTimes, PrefillChunks]:
    """(decode cycle, the service times of the load model, every class's prefill chunks) per candidate × batch.

    Decode cycle at B (speculative: verify pass + k·draft step, the method's drafter), τ tokens per
    pass; prefill: every class's chunks (hits start after the cached prefix).
    Colocated chunks ride in decode iterations (``riding``: their marginal cost);
    a prefill replica runs them alone."""
    s = r.scenario
    n_c = tp.shape[0]
    sp = s.speculative
    cyc = decode_cycle(batch_size=b, context_tokens=st.live_context, draft_tokens=sp.draft_tokens,
                       drafter=drafter_for(sp, r.model, r.scenario.serving.engine), **r.step_kwargs(tp=tp, pp=pp, ep=ep, dp_attention=dp))
    cycle = np.broadcast_to(np.asarray(cyc.cycle_s), (n_c, b.shape[-1]))
    chunk = s.serving.chunk_tokens
    new = np.maximum(st.class_prompt - st.class_cached, 1.0)
    pc = prefill_chunks(new_tokens=new, cached_tokens=st.class_cached, chunk_tokens=chunk,
                        **(r.step_kwargs(tp=tp[..., None], pp=pp[..., None], ep=ep[..., None],
                                         dp_attention=dp[..., None])
                           if prefill_pool is None else prefill_pool.step_kwargs()))
    # Riding chunks: their marginal time less the launches, which an iteration pays once (ServiceTimes.launch_s).
    work = np.broadcast_to(pc.marginal_total_s - pc.counts * pc.launch_s if riding else pc.total_s,
                           (n_c, new.size))  # (C, S)
    w = st.class_weight
    each = pc.marginal_s if riding else pc.times_s
    stalls = np.broadcast_to(each, (n_c,) + each.shape[-2:]).reshape(n_c, -1)
    stall_w = (w[:, None] * pc.mask).reshape(-1)
    sv = ServiceTimes(cycle_s=cycle, tokens_per_pass=cyc.tokens_per_pass, mean_output_tokens=st.mean_output,
                      weights=w, prefill_work_s=work, prefill_iterations=np.broadcast_to(pc.counts, work.shape),
                      chunk_share=np.broadcast_to(new / chunk, work.shape), stall_s=stalls,
                      stall_weights=stall_w / stall_w.sum(), budget_tokens=float(chunk),
                      decode_tokens=float(sp.draft_tokens + 1), launch_s=float(pc.launch_s) if riding else 0.0)
    return cyc, sv, pc


def _reasons(r: Resolved, *, budget: Arr, kv_ok: NDArray[np.bool_], prefill_ok: NDArray[np.bool_],
             gap_ok: NDArray[np.bool_], att: Arr, ttft_share: Arr, tpot_share: Arr, feasible: NDArray[np.bool_],
             idx: NDArray[np.int64], budget_binds: NDArray[np.bool_] | None = None) -> NDArray[np.object_]:
    """Why each infeasible candidate misses at its chosen batch (the first check that fails)."""
    slo = r.scenario.slo
    reason = np.array([""] * feasible.shape[0], dtype=object)
    for i, j in enumerate(idx):
        if feasible[i]:
            continue
        if budget[i, 0] <= 0 or not kv_ok[i, j]:
            reason[i] = "does not fit" if budget[i, 0] <= 0 or not kv_ok[i, 0] else "KV budget below batch"
        elif not prefill_ok[i, j]:
            # The knob that binds: the token budget only where a prompt needs more than one iteration's room.
            reason[i] = ("prefill cannot keep up (the decodes leave too little of serving.chunk_tokens: raise it)"
                         if budget_binds is not None and budget_binds[i, j] else
                         "prefill cannot keep up (prompt compute fills the iterations: a faster GPU, more TP, "
                         "or disaggregated prefill)")
        elif not gap_ok[i, j]:
            reason[i] = f"misses ITL (token-gap p{GAP_PERCENTILE * 100:g} above slo.itl_gap_p99_s)"
        else:
            a, t, p = float(att[i, j]), float(ttft_share[i, j]), float(tpot_share[i, j])
            which = "ITL" if p <= t else "TTFT"
            reason[i] = (f"misses {which} (attainment {a:.0%} < {slo.attainment:.0%}: TTFT within target for "
                         f"{t:.0%} of requests, TPOT for {p:.0%})")
    return reason


def prefill_pool_misfit(prefill_pool: Resolved | None, st: WorkloadStats) -> str:
    """Why a prefill pool's own layout cannot hold the longest prompt's KV ("" when it can)."""
    if prefill_pool is None:
        return ""
    q = prefill_pool.scenario.parallel
    mem = replica_memory(prefill_pool, tp=q.tp, pp=q.pp, ep=q.ep)
    need = float(np.max(st.class_prompt)) * float(mem.kv_bytes_per_token_per_gpu)
    budget = float(mem.kv_budget_bytes)
    if budget >= need and budget > 0:
        return ""
    return (f"prefill pool does not fit: {float(mem.weight_bytes_per_gpu) / 1e9:,.1f} GB of weights per GPU leave "
            f"{max(budget, 0.0) / 1e9:,.2f} GB of KV budget on {prefill_pool.gpu.id}, the longest prompt needs "
            f"{need / 1e9:,.2f} GB; raise prefill.parallel.tp or choose a larger prefill.gpu")


def _tpot_load(ld_itl: Arr, rate: Arr, sv: ServiceTimes, st: WorkloadStats, *, riding: bool) -> TpotLoad:
    """What a request's TPOT depends on (chunks ride in the iterations only colocated)."""
    w = sv.weights
    e1 = np.sum(w * sv.prefill_work_s, axis=-1, keepdims=True) if riding else np.zeros((1, 1))
    e2 = np.sum(w * sv.prefill_work_s * sv.prefill_work_s, axis=-1, keepdims=True) if riding else np.zeros((1, 1))
    o, ow = output_classes(st.samples)
    return TpotLoad(itl_mean_s=np.asarray(ld_itl, float), rate_per_s=np.asarray(rate, float), work_mean_s=e1,
                    work_m2_s2=e2, outputs=o, output_weights=ow)


TAIL_PERCENTILE = 0.99  # the tail shown beside the p90 TTFT


def _ttft_p99(ld: ModeLoad, weights: Arr, rows: NDArray[np.int64], idx: NDArray[np.int64], shape: tuple[int, ...]
              ) -> Arr:
    """The p99 TTFT of each candidate at its chosen batch."""
    if ld.ttft_wait is None or ld.ttft_own_s is None:
        return np.full(rows.shape, np.nan)
    wt, own = ld.ttft_wait, np.asarray(ld.ttft_own_s, float)

    def pick(a: Arr) -> Arr:
        a = np.asarray(a, float)
        return a[rows, idx] if a.ndim == 2 else np.broadcast_to(a.reshape(-1), rows.shape)[rows]

    own_c = own[rows, idx] if own.ndim == 3 else np.broadcast_to(own, (rows.size, own.shape[-1]))
    w = QueueWait(mean_s=pick(wt.mean_s), p_wait=pick(wt.p_wait), utilization=pick(wt.utilization))
    return sojourn_quantile(TAIL_PERCENTILE, w, own_c, weights)


def _ttft_share(target_s: float, ld: ModeLoad, weights: Arr, shape: tuple[int, ...]) -> Arr:
    """P(TTFT ≤ target) per candidate × batch (the pool's distribution; without it,
    the p90 check: 90% where the p90 meets the target)."""
    if ld.ttft_wait is None or ld.ttft_own_s is None:
        return np.broadcast_to(np.where(np.asarray(ld.ttft_p90_s) <= target_s, TTFT_PERCENTILE, 0.0), shape)
    share = ttft_within(target_s, ld.ttft_wait, ld.ttft_own_s, weights)
    return np.broadcast_to(share.reshape(share.shape + (1,) * (len(shape) - share.ndim)), shape)


def operating_arrays(
    r: Resolved, *, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike, mode: str, stats: WorkloadStats | None = None,
    max_batch: int = DEFAULT_MAX_BATCH, dp_attention: ArrayLike | None = None,
    prefill_pool: Resolved | None = None,
) -> OperatingArrays:
    """Operating points for candidate layouts (tp, pp, ep and dp_attention arrays of equal
    shape; ``dp_attention`` None: the scenario's for every candidate).

    ``prefill_pool`` (disaggregated only; planner.sizing.pools): the prefill pool's own GPU
    and layout, ``r`` and the candidates then being the decode pool's; None: one layout."""
    s = r.scenario
    st = stats or workload_stats(r)
    tp_c = np.asarray(tp, float).reshape(-1, 1)
    pp_c = np.asarray(pp, float).reshape(-1, 1)
    ep_c = np.asarray(ep, float).reshape(-1, 1)
    dp_c = np.broadcast_to(np.asarray(s.parallel.dp_attention if dp_attention is None else dp_attention, bool),
                           np.shape(np.asarray(tp))).reshape(-1, 1)
    fixed = s.serving.batch_size
    grid = np.array([float(fixed)]) if fixed is not None else np.arange(1.0, max_batch + 1.0)
    b = grid.reshape(1, -1)
    n_c = tp_c.shape[0]

    mem = replica_memory(r, tp=tp_c, pp=pp_c, ep=ep_c, dp_attention=dp_c, context_tokens=st.capacity_context_mean)
    wg, budget = mem.weight_bytes_per_gpu, mem.kv_budget_bytes
    kv_ok, max_seq = _kv_capacity(budget, mem.cache_bytes_per_token_per_gpu, np.asarray(attention_dp(tp_c, dp_c)),
                                  st, b)
    if mode == "colocated":
        prefill_pool = None
    cyc, sv, pc = _service_times(r, st, tp=tp_c, pp=pp_c, ep=ep_c, dp=dp_c, b=b, riding=mode == "colocated",
                                 prefill_pool=prefill_pool)
    # The load model's gap quantile is asked at the stall percentile (p99 of all token
    # gaps); slo.itl_percentile is the percentile of per-request TPOT (below).
    slo = s.slo
    r_gap = replace(r, scenario=s.model_copy(update={"slo": slo.model_copy(update={"itl_percentile": GAP_PERCENTILE})}))
    if mode == "colocated":
        ld = colocated_load(r_gap, sv, grid=grid)
    else:
        # Its tp sets the KV shard one GPU ships: a data-parallel attention rank ships its prompt's whole KV.
        ld = disaggregated_load(r_gap, sv, st, grid=grid, tp=np.asarray(attention_tp(tp_c, dp_c)), pp=pp_c,
                                prefill_pool=prefill_pool)
    shape = np.broadcast_shapes(np.shape(ld.itl_s), np.shape(ld.goodput_req_s), (n_c, grid.size))
    riding = mode == "colocated"
    tl = _tpot_load(np.broadcast_to(ld.itl_s, shape), np.broadcast_to(ld.goodput_req_s, shape), sv, st, riding=riding)
    ttft_share = _ttft_share(slo.ttft_s, ld, sv.weights, shape)
    tpot_share = tpot_within(slo.itl_s, tl)
    att = attainment(ttft_share=ttft_share, tpot_share=tpot_share)
    gap = np.broadcast_to(np.asarray(ld.itl_percentile_s, float), shape)
    gap_ok = gap <= slo.itl_gap_p99_s if slo.itl_gap_p99_s is not None else np.ones(shape, dtype=bool)

    # The operating point: the largest batch where every check holds (the fixed batch if given).
    ok = kv_ok & ld.prefill_ok & gap_ok & (att >= slo.attainment * (1.0 - 1e-12))
    pre_miss = prefill_pool_misfit(prefill_pool, st)
    if pre_miss:
        ok = np.zeros_like(ok)
    if fixed is not None:
        idx = np.zeros(n_c, dtype=np.int64)
    else:
        last = ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
        idx = np.where(ok.any(axis=1), last, 0)
    rows = np.arange(n_c)
    feasible = ok[rows, idx]
    reason = _reasons(r, budget=budget, kv_ok=kv_ok, prefill_ok=np.broadcast_to(ld.prefill_ok, shape),
                      gap_ok=gap_ok, att=att, ttft_share=ttft_share, tpot_share=tpot_share, feasible=feasible,
                      idx=idx, budget_binds=None if ld.budget_binds is None else np.broadcast_to(ld.budget_binds, shape))
    if pre_miss:
        reason[:] = pre_miss

    def pick(a: ArrayLike) -> Arr:
        return np.broadcast_to(np.asarray(a, float), ok.shape)[rows, idx]

    # At the fleet's load: the rate per replica and the ITL there (TTFT is already at the fleet's load).
    reps = np.broadcast_to(np.asarray(ld.replicas, float), shape)
    lam_f = np.where(np.isfinite(reps) & (reps > 0), s.workload.peak_rate / np.where(reps > 0, reps, 1.0), 0.0)
    tl_f = _tpot_load(np.broadcast_to(ld.fleet_itl_s, shape), lam_f, sv, st, riding=riding)
    chosen, chosen_f = tl.at(rows, idx, shape), tl_f.at(rows, idx, shape)
    fleet_att = pick(ttft_share) * tpot_within(slo.itl_s, chosen_f)
    nan = np.full(n_c, np.nan)
    return OperatingArrays(
        mode=mode,
        batch_size=grid[idx].astype(np.int64),
        feasible=feasible,
        reason=reason,
        max_sequences=max_seq,
        step_s=pick(cyc.step.step_s),
        itl_s=pick(ld.itl_s),
        itl_percentile_s=tpot_quantile(slo.itl_percentile, chosen),
        itl_gap_p99_s=pick(gap),
        itl_worst_s=pick(ld.itl_worst_s),
        slo_attainment=pick(att),
        ttft_attainment=pick(ttft_share),
        tpot_attainment=pick(tpot_share),
        ttft_s=pick(ld.ttft_s),
        ttft_p90_s=pick(ld.ttft_p90_s),
        ttft_p99_s=_ttft_p99(ld, sv.weights, rows, idx, shape),
        ttft_wait_s=pick(ld.ttft_wait_s),
        prefill_service_s=pick(ld.prefill_service_s),
        goodput_req_s_per_replica=np.where(feasible, pick(ld.goodput_req_s), 0.0),
        prefill_req_s_per_replica=np.where(feasible, pick(ld.prefill_req_s), 0.0),
        tok_s_per_replica=grid[idx] / pick(ld.itl_s),
        kv_transfer_s=pick(ld.kv_transfer_s),
        kv_transfer_exposed_s=pick(ld.kv_transfer_exposed_s),
        prefill_utilization=pick(ld.prefill_utilization),
        replicas=np.where(feasible, pick(ld.replicas), nan),
        prefill_replicas=np.where(feasible, pick(ld.prefill_replicas), nan),
        decode_replicas=np.where(feasible, pick(ld.decode_replicas), nan),
        fleet_batch_size=pick(ld.fleet_batch_size),
        fleet_itl_s=pick(ld.fleet_itl_s),
        fleet_itl_percentile_s=tpot_quantile(slo.itl_percentile, chosen_f),
        fleet_itl_gap_p99_s=pick(ld.fleet_itl_percentile_s),
        fleet_slo_attainment=fleet_att,
        weight_bytes_per_gpu=wg[:, 0],
        kv_budget_bytes=budget[:, 0],
        gpus_per_replica=(tp_c * pp_c)[:, 0],
        batch_grid=grid,
        decode=cyc,
        class_prompt=st.class_prompt,
        class_cached=st.class_cached,
        prefill=pc,
        prefill_gpus_per_replica=None if prefill_pool is None
        else np.full(n_c, float(prefill_pool.gpus_per_replica)),
    )
