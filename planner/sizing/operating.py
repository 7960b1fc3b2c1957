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
* colocated: ITL and the rate B implies come from the load model
  (``physics.queueing.colocated_decode``), the ITL percentile including chunk
  stalls; a prompt's prefill spans ⌈n/chunk⌉ iterations of (cycle + chunk i).
* disaggregated: decode ITL = cycle/τ; a prefill replica serves prompts' chunks
  back to back, pipelined over its PP stages; TTFT adds the exposed part of the
  layer-by-layer KV transfer.
* the fleet: replicas = max(min_replicas, ⌈peak / (u × rate per replica)⌉); the
  prefill servers (colocated replicas, or the prefill pool) form one M/G/c pool
  behind the router, and TTFT is its p90 at the peak rate; the prefill pool
  grows past the utilization sizing until the p90 TTFT meets the target.
* ITL is checked at ``slo.itl_percentile`` at the batch B (the capacity point),
  TTFT at the fleet's own load; the ``fleet_*`` numbers are the decode batch and
  ITL at the fleet's load (Little's law on the batch grid).

The largest feasible B is the operating point.  ``plan`` calls this with one
candidate and ``sweep`` with many: one physics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.lengths import LengthSamples, length_samples, weighted_quantile
from planner.physics.link import DEFAULT_KV_LINK_EFFICIENCY, kv_link_bytes_per_s, kv_transfer_exposed_s
from planner.physics.memory import (
    activation_peak_bytes,
    activation_profile_tokens,
    kv_budget_bytes,
    kv_bytes_per_token_per_gpu,
    weight_bytes_per_gpu,
)
from planner.physics.queueing import (
    TTFT_PERCENTILE,
    ServiceTimes,
    batch_at_rate,
    colocated_decode,
    pipelined_prefill,
    ttft_pool,
)
from planner.physics.step import decode_cycle, prefill_chunks
from planner.physics.techniques import kv_transfer_s
from planner.spec.context import Resolved
from planner.spec.defaults import DEFAULT_MAX_BATCH

__all__ = [
    "CEIL_TOLERANCE",
    "KV_TAIL_Z",
    "MAX_PREFILL_POOL_GROWTH",
    "MAX_PROMPT_CLASSES",
    "OperatingArrays",
    "WorkloadStats",
    "operating_arrays",
    "workload_stats",
]

KV_TAIL_Z = 2.326  # one-sided 99% normal quantile
# A ratio that is an integer in exact arithmetic (100 req/s / 10 req/s per replica)
# can land a rounding error above it; ceil(x − tolerance) keeps it at 10, not 11.
CEIL_TOLERANCE = 1e-9
# Prompt lengths are grouped into at most this many equal-probability classes for
# the prefill and TTFT arithmetic (48 lognormal quantiles per dimension otherwise;
# the TTFT p90 moves by well under 1% between 24 and 48 classes).
MAX_PROMPT_CLASSES = 24
# The prefill pool may grow to this multiple of its utilization sizing to meet
# the p90 TTFT; beyond it the candidate is reported as missing TTFT.
MAX_PREFILL_POOL_GROWTH = 64
Arr = NDArray[np.float64]


@dataclass(frozen=True)
class WorkloadStats:
    """The moments of the length distribution the operating point needs."""

    samples: LengthSamples
    cached_tokens: float  # mean cached prompt tokens = prefix × hit rate
    mean_prompt: float
    mean_output: float
    capacity_context_mean: float  # residence-weighted E[n + o]
    capacity_context_std: float
    live_context: float  # residence-weighted E[n + o/2]: the KV a decode step reads
    p90_prompt: float
    class_prompt: Arr  # prompt classes × {hit, miss}: prompt tokens
    class_cached: Arr  # cached prompt tokens of each class
    class_weight: Arr  # probability of each class (sums to 1)
    prefix_tokens: float  # shared prefix held once per replica (0: none)
    prefix_hit_rate: float


def _prompt_classes(smp: LengthSamples) -> tuple[Arr, Arr]:
    """(prompt, weight) of at most MAX_PROMPT_CLASSES equal-probability groups."""
    order = np.argsort(smp.prompt, kind="stable")
    p, w = smp.prompt[order], smp.weight[order]
    values = np.unique(p)
    if values.size <= MAX_PROMPT_CLASSES:
        return values.astype(float), np.array([float(w[p == v].sum()) for v in values])
    cum = np.cumsum(w) - 0.5 * w
    group = np.minimum((cum * MAX_PROMPT_CLASSES).astype(int), MAX_PROMPT_CLASSES - 1)
    weights = np.bincount(group, weights=w, minlength=MAX_PROMPT_CLASSES).astype(float)
    means = np.bincount(group, weights=w * p, minlength=MAX_PROMPT_CLASSES) / np.where(weights > 0, weights, 1.0)
    keep = weights > 0
    return means[keep], weights[keep]


def workload_stats(r: Resolved) -> WorkloadStats:
    w = r.scenario.workload
    smp = length_samples(distribution=w.distribution, prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens,
                         prompt_sigma=w.prompt_sigma, output_sigma=w.output_sigma, trace=w.trace)
    eo = smp.mean_output
    tw = smp.weight * smp.output / eo  # residence-time weights
    cap = smp.prompt + smp.output
    mu = float(np.sum(tw * cap))
    sd = float(math.sqrt(max(float(np.sum(tw * cap * cap)) - mu * mu, 0.0)))
    live = float(np.sum(tw * (smp.prompt + smp.output / 2.0)))
    ctx = r.scenario.serving.context_tokens
    if ctx is not None:
        mu, sd, live = float(ctx), 0.0, float(ctx)
    prompts, weights = _prompt_classes(smp)
    h, pre = w.prefix_hit_rate, float(w.prefix_tokens)
    if pre > 0 and 0 < h:
        hit = np.minimum(pre, np.maximum(prompts - 1.0, 0.0))
        cls_p = np.concatenate([prompts, prompts]) if h < 1 else prompts
        cls_c = np.concatenate([hit, np.zeros_like(prompts)]) if h < 1 else hit
        cls_w = np.concatenate([weights * h, weights * (1 - h)]) if h < 1 else weights
    else:
        cls_p, cls_c, cls_w = prompts, np.zeros_like(prompts), weights
    return WorkloadStats(
        samples=smp, cached_tokens=pre * h, mean_prompt=smp.mean_prompt,
        mean_output=eo, capacity_context_mean=mu, capacity_context_std=sd, live_context=live,
        p90_prompt=weighted_quantile(smp.prompt, smp.weight, 0.9),
        class_prompt=cls_p, class_cached=cls_c, class_weight=cls_w / cls_w.sum(),
        prefix_tokens=pre if h > 0 else 0.0, prefix_hit_rate=h if pre > 0 else 0.0,
    )


@dataclass(frozen=True)
class OperatingArrays:
    """One entry per candidate (arrays of shape (C,))."""

    mode: str
    batch_size: NDArray[np.int64]
    feasible: NDArray[np.bool_]
    reason: NDArray[np.object_]
    max_sequences: Arr
    step_s: Arr
    itl_s: Arr  # mean ITL at the batch
    itl_percentile_s: Arr  # ITL at slo.itl_percentile, chunk stalls included (checked)
    itl_worst_s: Arr  # cycle + the longest chunk
    ttft_s: Arr  # mean, at the fleet's load: ttft_wait_s + prefill_service_s (+ exposed transfer)
    ttft_p90_s: Arr
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
    fleet_itl_percentile_s: Arr  # ITL at slo.itl_percentile there
    weight_bytes_per_gpu: Arr
    kv_budget_bytes: Arr
    gpus_per_replica: Arr


def _kv_capacity(budget: Arr, kg: Arr, ep: Arr, st: WorkloadStats, b: Arr) -> tuple[NDArray[np.bool_], Arr]:
    """(KV fits at each batch, max sequences per replica) with the shared prefix
    held once where sharing pays (p99 of the live KV across the batch)."""
    mu, sd = st.capacity_context_mean, st.capacity_context_std
    pre, h = st.prefix_tokens, st.prefix_hit_rate

    def fits(own_mean: float, held: Arr) -> tuple[NDArray[np.bool_], Arr]:
        x = b / ep
        ok = (x * own_mean * kg + KV_TAIL_Z * np.sqrt(x) * sd * kg + held <= budget) & (budget > 0)
        cap = np.maximum(budget - held, 0.0) / kg
        sq = (-KV_TAIL_Z * sd + np.sqrt((KV_TAIL_Z * sd) ** 2 + 4.0 * own_mean * cap)) / (2.0 * own_mean)
        return ok, (sq * sq * ep)[:, 0]

    ok, seqs = fits(mu, np.zeros_like(budget))
    if pre > 0 and h > 0:
        ok2, seqs2 = fits(mu - h * pre, pre * kg)
        ok, seqs = ok | ok2, np.maximum(seqs, seqs2)
    return ok, seqs


def _replicas(peak: float, u: float, rate: Arr, floor: int) -> Arr:
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.ceil(peak / (u * rate) - CEIL_TOLERANCE)
    return np.where(rate > 0, np.maximum(floor, n), np.inf)


def _interp_rows(x: Arr, grid: Arr, values: Arr) -> Arr:
    """values(x) per candidate row, linear on the batch grid (x: (C, B'), values: (C, B))."""
    out = np.empty(x.shape)
    for i in range(x.shape[0]):
        out[i] = np.interp(x[i], grid, values[i])
    return out


def _grow_prefill_pool(peak: float, start: Arr, server: Arr, own: Arr, w: Arr, target: float) -> tuple[Arr, Arr]:
    """Smallest pool ≥ ``start`` whose p90 TTFT meets ``target`` (per candidate),
    and that p90; infinite where even a pool MAX_PREFILL_POOL_GROWTH × larger misses."""
    n_out = np.array(start, dtype=float)
    t_out = np.full(start.shape, np.inf)
    for i in range(start.shape[0]):
        if not np.isfinite(start[i]):
            continue

        def p90(n: float, i: int = i) -> float:
            return float(ttft_pool(arrival_per_s=peak, servers=n, server_s=server[i], own_s=own[i],
                                   weights=w).quantile_s)

        lo = float(start[i])
        t = p90(lo)
        if t <= target:
            n_out[i], t_out[i] = lo, t
            continue
        hi = lo
        while True:
            hi = min(2.0 * hi, lo * MAX_PREFILL_POOL_GROWTH)
            th = p90(hi)
            if th <= target or hi >= lo * MAX_PREFILL_POOL_GROWTH:
                break
        if th > target:
            n_out[i], t_out[i] = lo, t
            continue
        while hi - lo > 1:
            mid = math.floor((lo + hi) / 2)
            tm = p90(mid)
            if tm <= target:
                hi, th = mid, tm
            else:
                lo = mid
        n_out[i], t_out[i] = hi, th
    return n_out, t_out


def operating_arrays(
    r: Resolved, *, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike, mode: str, stats: WorkloadStats | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
) -> OperatingArrays:
    """Operating points for candidate layouts (tp, pp, ep arrays of equal shape)."""
    s = r.scenario
    st = stats or workload_stats(r)
    tp_c = np.asarray(tp, float).reshape(-1, 1)
    pp_c = np.asarray(pp, float).reshape(-1, 1)
    ep_c = np.asarray(ep, float).reshape(-1, 1)
    fixed = s.serving.batch_size
    grid = np.array([float(fixed)]) if fixed is not None else np.arange(1.0, max_batch + 1.0)
    b = grid.reshape(1, -1)
    kw = r.step_kwargs(tp=tp_c, pp=pp_c, ep=ep_c)
    model, gpu = r.model, r.gpu
    u = s.fleet.target_utilization
    slo = s.slo
    peak = s.workload.peak_rate
    floor = s.fleet.min_replicas
    n_c = tp_c.shape[0]

    # Memory.
    wg = np.asarray(weight_bytes_per_gpu(model=model, weights_dtype=s.weights_dtype, tp=tp_c, pp=pp_c, ep=ep_c))
    util = s.serving.memory_utilization
    act = (activation_peak_bytes(model=model, batched_tokens=activation_profile_tokens(s.serving.chunk_tokens),
                                 tp=tp_c) if util else 0.0)
    budget = np.asarray(kv_budget_bytes(gpu=gpu, weight_bytes_per_gpu=wg, reserved_bytes=s.serving.reserved_bytes,
                                        memory_utilization=util, activation_bytes=act))
    kg = np.asarray(kv_bytes_per_token_per_gpu(model=model, kv_dtype=s.kv_dtype, tp=tp_c, pp=pp_c))
    kv_ok, max_seq = _kv_capacity(budget, kg, ep_c, st, b)

    # Decode cycle.
    sp = s.speculative
    cyc = decode_cycle(batch_size=b, context_tokens=st.live_context, draft_tokens=sp.draft_tokens,
                       acceptance=sp.acceptance, draft_cost=sp.draft_cost, **kw)
    step = np.asarray(cyc.step.step_s)
    tpp, cycle = cyc.tokens_per_pass, np.broadcast_to(np.asarray(cyc.cycle_s), (n_c, grid.size))
    eo = st.mean_output

    # Prefill: every class's chunks (hits start after the cached prefix).
    chunk = s.serving.chunk_tokens
    new = np.maximum(st.class_prompt - st.class_cached, 1.0)
    kw3 = r.step_kwargs(tp=tp_c[..., None], pp=pp_c[..., None], ep=ep_c[..., None])
    pc = prefill_chunks(new_tokens=new, cached_tokens=st.class_cached, chunk_tokens=chunk, **kw3)
    # Colocated chunks ride in decode iterations (their marginal cost); a prefill
    # replica runs them alone.
    riding = mode == "colocated"
    work = np.broadcast_to(pc.marginal_total_s if riding else pc.total_s, (n_c, new.size))  # (C, S)
    w = st.class_weight
    each = pc.marginal_s if riding else pc.times_s
    stalls = np.broadcast_to(each, (n_c,) + each.shape[-2:]).reshape(n_c, -1)
    stall_w = (w[:, None] * pc.mask).reshape(-1)
    sv = ServiceTimes(cycle_s=cycle, tokens_per_pass=tpp, mean_output_tokens=eo, weights=w, prefill_work_s=work,
                      prefill_iterations=np.broadcast_to(pc.counts, work.shape), chunk_share=np.broadcast_to(
                          new / chunk, work.shape), stall_s=stalls, stall_weights=stall_w / stall_w.sum())

    if mode == "colocated":
        dec = colocated_decode(sv, batch=b, itl_percentile=slo.itl_percentile)
        itl, itl_q, itl_worst = dec.itl_mean_s, dec.itl_quantile_s, dec.itl_worst_s
        goodput = dec.rate_per_s
        reps = _replicas(peak, u, goodput, floor)
        # The fleet's load: per-replica rate, the batch it holds, its cycle.
        lam = np.where(np.isfinite(reps), peak / reps, 0.0)
        bf = batch_at_rate(lam, batches=grid, rates_per_s=goodput)
        cyc_f = _interp_rows(bf, grid, cycle)
        fleet = colocated_decode(replace(sv, cycle_s=cyc_f), batch=bf,
                                 itl_percentile=slo.itl_percentile)
        server = cyc_f[..., None] * sv.prefill_iterations[:, None, :] + work[:, None, :]  # (C, B, S)
        # A prompt also waits out the iteration in progress when it arrives.
        own_lat = server + fleet.residual_s[..., None]
        pool = ttft_pool(arrival_per_s=peak, servers=np.where(np.isfinite(reps), reps, 1.0), server_s=server,
                         own_s=own_lat, weights=w)
        ttft, ttft90 = pool.mean_s, pool.quantile_s
        rho = pool.wait.utilization
        prefill_ok = (dec.chunk_share < 1.0) & (rho < 1.0)
        prefill_rate = goodput
        pre_reps, dec_reps = np.zeros_like(reps), np.zeros_like(reps)
        transfer = exposed = np.zeros_like(goodput)
        wait, service = pool.wait.mean_s, pool.service_mean_s
        fleet_b, fleet_itl, fleet_itl_q = bf, fleet.itl_mean_s, fleet.itl_quantile_s
    else:
        itl = cycle / tpp
        itl_q = itl_worst = itl
        goodput = b / (eo * itl)
        dec_reps = _replicas(peak, u, goodput, floor)
        lam = np.where(np.isfinite(dec_reps), peak / dec_reps, 0.0)
        fleet_b = batch_at_rate(lam, batches=grid, rates_per_s=goodput)
        fleet_itl = fleet_itl_q = _interp_rows(fleet_b, grid, cycle) / tpp
        # Prefill pool: chunked prefill pipelined over PP stages, plus the exposed KV transfer.
        srv, lat = pipelined_prefill(prefill_s=work, stages=pp_c, microbatches=sv.prefill_iterations)
        link = kv_link_bytes_per_s(gpu, link=s.fleet.link, link_bytes_per_s=s.fleet.link_bytes_per_s)
        kv_gpu = np.asarray(kv_bytes_per_token_per_gpu(model=model, kv_dtype=s.kv_dtype, tp=tp_c, pp=pp_c))
        t_full = np.asarray(kv_transfer_s(kv_bytes=st.class_prompt * kv_gpu, link_bytes_per_s=link,
                                          efficiency=DEFAULT_KV_LINK_EFFICIENCY))
        t_exp = np.asarray(kv_transfer_exposed_s(transfer_s=t_full, prefill_s=lat, layers=model.layers,
                                                 setup_s=s.fleet.kv_transfer_setup_s))
        own = lat + t_exp
        es = np.sum(w * srv, axis=-1)
        start = _replicas(peak, u, 1.0 / es, floor)
        pre_n, ttft90_c = _grow_prefill_pool(peak, start, srv, own, w, slo.ttft_s)
        pool = ttft_pool(arrival_per_s=peak, servers=pre_n, server_s=srv, own_s=own, weights=w)
        shape = goodput.shape
        ttft = np.broadcast_to(pool.mean_s[:, None], shape)
        ttft90 = np.broadcast_to(ttft90_c[:, None], shape)
        rho = np.broadcast_to(pool.wait.utilization[:, None], shape)
        prefill_ok = np.ones(shape, dtype=bool)
        prefill_rate = np.broadcast_to((1.0 / es)[:, None], shape)
        pre_reps = np.broadcast_to(pre_n[:, None], shape)
        reps = pre_reps + dec_reps
        transfer = np.broadcast_to(np.sum(w * t_full, axis=-1)[:, None], shape)
        exposed = np.broadcast_to(np.sum(w * t_exp, axis=-1)[:, None], shape)
        wait = np.broadcast_to(pool.wait.mean_s[:, None], shape)
        service = np.broadcast_to(np.sum(w * lat, axis=-1)[:, None], shape)

    itl_ok = itl_q <= slo.itl_s
    ttft_ok = ttft90 <= slo.ttft_s
    ok = kv_ok & itl_ok & ttft_ok & prefill_ok
    if fixed is not None:
        idx = np.zeros(n_c, dtype=int)
    else:
        any_ok = ok.any(axis=1)
        last = ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
        idx = np.where(any_ok, last, 0)
    rows = np.arange(n_c)
    feasible = ok[rows, idx]
    reason = np.array([""] * n_c, dtype=object)
    for i in range(n_c):
        j = idx[i]
        if feasible[i]:
            continue
        if budget[i, 0] <= 0 or not kv_ok[i, j]:
            reason[i] = "does not fit" if budget[i, 0] <= 0 or not kv_ok[i, 0] else "KV budget below batch"
        elif not itl_ok[i, j]:
            reason[i] = f"misses ITL (p{slo.itl_percentile * 100:g} with chunk stalls)"
        elif not prefill_ok[i, j]:
            reason[i] = "prefill cannot keep up (raise serving.chunk_tokens)"
        else:
            reason[i] = f"misses TTFT (p{TTFT_PERCENTILE * 100:g})"

    def pick(a: ArrayLike) -> Arr:
        return np.broadcast_to(np.asarray(a, float), ok.shape)[rows, idx]

    nan = np.full(n_c, np.nan)
    return OperatingArrays(
        mode=mode,
        batch_size=grid[idx].astype(np.int64),
        feasible=feasible,
        reason=reason,
        max_sequences=max_seq,
        step_s=pick(step),
        itl_s=pick(itl),
        itl_percentile_s=pick(itl_q),
        itl_worst_s=pick(itl_worst),
        ttft_s=pick(ttft),
        ttft_p90_s=pick(ttft90),
        ttft_wait_s=pick(wait),
        prefill_service_s=pick(service),
        goodput_req_s_per_replica=np.where(feasible, pick(goodput), 0.0),
        prefill_req_s_per_replica=np.where(feasible, pick(prefill_rate), 0.0),
        tok_s_per_replica=grid[idx] / pick(itl),
        kv_transfer_s=pick(transfer),
        kv_transfer_exposed_s=pick(exposed),
        prefill_utilization=pick(rho),
        replicas=np.where(feasible, pick(reps), nan),
        prefill_replicas=np.where(feasible, pick(pre_reps), nan),
        decode_replicas=np.where(feasible, pick(dec_reps), nan),
        fleet_batch_size=pick(fleet_b),
        fleet_itl_s=pick(fleet_itl),
        fleet_itl_percentile_s=pick(fleet_itl_q),
        weight_bytes_per_gpu=wg[:, 0],
        kv_budget_bytes=budget[:, 0],
        gpus_per_replica=(tp_c * pp_c * ep_c)[:, 0],
    )
