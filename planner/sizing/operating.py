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

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.layout import attention_dp, attention_tp
from planner.physics.prefill import host_floor_s
from planner.physics.queueing import TTFT_PERCENTILE, QueueWait, ServiceTimes, sojourn_quantile
from planner.physics.speculative import drafter_for
from planner.physics.step import (
    DecodeCycle,
    PrefillChunks,
    decode_cycle,
    prefill_chunks,
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
from planner.sizing.candidate_arrays import OperatingArrays, chunk_times_at, cycle_at
from planner.sizing.gpu_memory import ReplicaMemory, replica_memory, scenario_draft
from planner.sizing.modes import (
    CEIL_TOLERANCE,
    MAX_PREFILL_POOL_GROWTH,
    ModeLoad,
    colocated_load,
    disaggregated_load,
)
from planner.sizing.prefill_alone import MeanPrefill, mean_prefill
from planner.sizing.workload import MAX_PROMPT_CLASSES, WorkloadStats, workload_stats
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
                      decode_tokens=float(sp.draft_tokens + 1), launch_s=float(pc.launch_s) if riding else 0.0,
                      host_floor_s=np.asarray(host_floor_s(r.model, tp=tp, pp=pp), dtype=float).reshape(-1, 1)
                      if riding else 0.0)
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
    ttft_w = sv.weights if ld.ttft_weights is None else ld.ttft_weights
    ttft_share = _ttft_share(slo.ttft_s, ld, ttft_w, shape)
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
        ttft_p99_s=_ttft_p99(ld, ttft_w, rows, idx, shape),
        ttft_wait_s=pick(ld.ttft_wait_s),
        ttft_recv_wait_s=pick(0.0 if ld.recv_wait_s is None else ld.recv_wait_s),
        fleet_cycle_s=pick(np.nan if ld.fleet_cycle_s is None else ld.fleet_cycle_s),
        prefill_service_s=pick(ld.prefill_service_s),
        goodput_req_s_per_replica=np.where(feasible, pick(ld.goodput_req_s), 0.0),
        prefill_req_s_per_replica=np.where(feasible, pick(ld.prefill_req_s), 0.0),
        tok_s_per_replica=grid[idx] / pick(ld.itl_s),
        kv_transfer_s=pick(ld.kv_transfer_s),
        kv_transfer_exposed_s=pick(ld.kv_transfer_exposed_s),
        decode_admission_s=pick(0.0 if ld.decode_admission_s is None else ld.decode_admission_s),
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
