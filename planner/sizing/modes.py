"""The two serving modes under load, on arrays of candidates × decode batches.

* colocated: ITL and the rate a batch implies come from the load model
  (``physics.queueing.colocated_decode``), the ITL percentile including chunk
  stalls.  Each iteration's token budget (``serving.chunk_tokens``) holds the B
  decodes first and then R = T − B prompt tokens, as many waiting prompts (whole,
  or a chunk of a long one) as fit: a prompt of n tokens occupies its replica's
  prefill server for c·n/R + P(n) and waits ⌈n/R⌉·(c + ℓ) + P(n) for its own
  prefill (ℓ: the eager launches of an iteration carrying prompt tokens, P its
  chunks' work and its share of the launches: ``colocated_decode``);
  the replicas form one M/G/c pool of such servers behind the router.
* disaggregated: decode ITL = cycle/τ; a prefill replica serves prompts' chunks
  back to back, pipelined over its PP stages; TTFT adds the exposed part of the
  layer-by-layer KV transfer; the prefill pool grows past the utilization sizing
  until the p90 TTFT meets the target.  The prefill pool may run its own GPU and
  layout (``prefill_pool``, planner.sizing.pools): its prefill times and PP stages are
  its own, and the KV is re-sharded onto the decode layout (planner.physics.handoff).

Replicas = max(min_replicas, ⌈peak / (u × rate per replica)⌉); the ``fleet_*``
numbers are the decode batch and ITL at the fleet's load (Little's law on the
batch grid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.handoff import decode_admission_s, kv_handoff_factor
from planner.physics.layout import attention_dp
from planner.physics.link import DEFAULT_KV_LINK_EFFICIENCY, kv_link_bytes_per_s, kv_transfer_exposed_s
from planner.physics.memory import kv_bytes_per_token_per_gpu
from planner.physics.queueing import (
    QueueWait,
    ServiceTimes,
    balance_busy,
    balance_wait_points,
    batch_at_rate,
    colocated_decode,
    pipelined_prefill,
    recv_wait_points,
    ttft_pool,
)
from planner.physics.techniques import kv_transfer_s
from planner.sizing.workload import WorkloadStats
from planner.spec.context import Resolved, kv_transfer_setup_s

__all__ = ["CEIL_TOLERANCE", "MAX_PREFILL_POOL_GROWTH", "ModeLoad", "colocated_load", "disaggregated_load"]

# A ratio that is an integer in exact arithmetic (100 req/s / 10 req/s per replica)
# can land a rounding error above it; ceil(x − tolerance) keeps it at 10, not 11.
CEIL_TOLERANCE = 1e-9
# The prefill pool may grow to this multiple of its utilization sizing to meet
# the p90 TTFT; beyond it the candidate is reported as missing TTFT.
MAX_PREFILL_POOL_GROWTH = 64
Arr = NDArray[np.float64]


@dataclass(frozen=True)
class ModeLoad:
    """One serving mode's numbers per candidate × batch (arrays broadcastable to (C, B))."""

    itl_s: Arr  # mean ITL at the batch
    itl_percentile_s: Arr  # at slo.itl_percentile, chunk stalls included
    itl_worst_s: Arr
    goodput_req_s: Arr  # per (decode) replica
    prefill_req_s: Arr  # per prefill replica (colocated: the goodput)
    replicas: Arr
    prefill_replicas: Arr
    decode_replicas: Arr
    ttft_s: Arr
    ttft_p90_s: Arr
    ttft_wait_s: Arr
    prefill_service_s: Arr
    prefill_utilization: Arr
    prefill_ok: NDArray[np.bool_]
    kv_transfer_s: Arr
    kv_transfer_exposed_s: Arr
    fleet_batch_size: Arr
    fleet_itl_s: Arr
    fleet_itl_percentile_s: Arr
    # The TTFT pool's wait and each request class's own latency (sizing.attainment reads them).
    ttft_wait: QueueWait | None = None
    ttft_own_s: Arr | None = None
    # Colocated: the longest prompt needs more than one iteration's prompt room R = T − B at the batch
    # (raising serving.chunk_tokens would let it in whole); None where prompts never share iterations.
    budget_binds: NDArray[np.bool_] | None = None
    # Of the TTFT's own latency: the decode passes before the scheduler takes a request in (SGLang's
    # serving.scheduler_recv_interval, TensorRT-LLM's serving.attention_dp_balance_iters; None: every
    # iteration takes them).
    recv_wait_s: Arr | None = None
    # The weights of ttft_own_s's last axis where it has more points than the request classes
    # (the receive wait's spread); None: the classes' own (ServiceTimes.weights).
    ttft_weights: Arr | None = None
    # Colocated: the decode pass (iteration) at the fleet's batch, the unit of the receive wait.
    fleet_cycle_s: Arr | None = None
    # Disaggregated: of the TTFT, the decode worker's take-in after the KV arrives (k iterations at the
    # batch: planner.physics.handoff.decode_admission_s); None colocated.
    decode_admission_s: Arr | None = None


def _replicas(peak: float, u: float, rate: Arr, floor: int) -> Arr:
    # a vanishing rate needs unboundedly many replicas: inf, not a warning
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        n = np.ceil(peak / (u * rate) - CEIL_TOLERANCE)
    return np.where(rate > 0, np.maximum(floor, n), np.inf)


def _interp_rows(x: Arr, grid: Arr, values: Arr) -> Arr:
    """values(x) per candidate row, linear on the batch grid (x: (C, B'), values: (C, B))."""
    out = np.empty(x.shape)
    for i in range(x.shape[0]):
        out[i] = np.interp(x[i], grid, values[i])
    return out


def _grow_prefill_pool(peak: float, start: Arr, server: Arr, own: Arr, w: Arr, target: ArrayLike
                       ) -> tuple[Arr, Arr]:
    """Smallest pool ≥ ``start`` whose p90 TTFT meets ``target`` (per candidate, or one for all),
    and that p90; infinite where even a pool MAX_PREFILL_POOL_GROWTH × larger misses."""
    n_out = np.array(start, dtype=float)
    t_out = np.full(start.shape, np.inf)
    targets = np.broadcast_to(np.asarray(target, float), start.shape)
    for i in range(start.shape[0]):
        if not np.isfinite(start[i]):
            continue
        goal = float(targets[i])

        def p90(n: float, i: int = i) -> float:
            return float(ttft_pool(arrival_per_s=peak, servers=n, server_s=server[i], own_s=own[i],
                                   weights=w).quantile_s)

        lo = float(start[i])
        t = p90(lo)
        if t <= goal:
            n_out[i], t_out[i] = lo, t
            continue
        hi = lo
        while True:
            hi = min(2.0 * hi, lo * MAX_PREFILL_POOL_GROWTH)
            th = p90(hi)
            if th <= goal or hi >= lo * MAX_PREFILL_POOL_GROWTH:
                break
        if th > goal:
            n_out[i], t_out[i] = lo, t
            continue
        while hi - lo > 1:
            mid = math.floor((lo + hi) / 2)
            tm = p90(mid)
            if tm <= goal:
                hi, th = mid, tm
            else:
                lo = mid
        n_out[i], t_out[i] = hi, th
    return n_out, t_out


def colocated_load(r: Resolved, sv: ServiceTimes, *, grid: Arr) -> ModeLoad:
    """Colocated replicas: prefill chunks ride in the decode iterations (``sv``)."""
    s = r.scenario
    peak, slo = s.workload.peak_rate, s.slo
    b = grid.reshape(1, -1)
    dec = colocated_decode(sv, batch=b, itl_percentile=slo.itl_percentile)
    goodput = dec.rate_per_s
    reps = _replicas(peak, s.fleet.target_utilization, goodput, s.fleet.min_replicas)
    # The fleet's load: per-replica rate, the batch it holds, its cycle.
    lam = np.where(np.isfinite(reps), peak / reps, 0.0)
    bf = batch_at_rate(lam, batches=grid, rates_per_s=goodput)
    cyc_f = _interp_rows(bf, grid, sv.cycle_s)
    fleet = colocated_decode(replace(sv, cycle_s=cyc_f), batch=bf, itl_percentile=slo.itl_percentile)
    work = sv.prefill_work_s
    share, iters = sv.prompt_share(bf)  # (C, B, S): the prompt room a prompt uses at the fleet's batch
    server = cyc_f[..., None] * share + work[:, None, :] + sv.launch_s * np.asarray(fleet.launch_share)[..., None]
    # Its own latency: the iterations it spans (their launches), and the iteration in progress when it arrives.
    # (its first token no sooner than the hosts' floor after they begin: planner.physics.prefill.host_floor_s)
    floor = np.asarray(sv.host_floor_s, dtype=float)
    floor = floor.reshape(floor.shape + (1,) * (3 - floor.ndim)) if floor.ndim else floor
    own_lat = (np.maximum((cyc_f[..., None] + sv.launch_s) * iters + work[:, None, :], floor)
               + fleet.residual_s[..., None])
    # and, on SGLang with --scheduler-recv-interval k, the decode passes before the scheduler takes it in,
    # or, on TensorRT-LLM with attention-DP balance, the passes until every rank has a prompt or the timeout;
    # the least-loaded router sends an arrival to an idle replica (an idle rank) while there is one, where it
    # is taken at once: it finds its replica busy with probability balance_busy (one rank: SGLang's case)
    k = s.serving.scheduler_recv_interval
    tb = s.serving.attention_dp_balance_iters
    recv = None
    weights = sv.weights
    if k > 1 or tb > 0:
        # the wait's spread: each request class × RECV_WAIT_POINTS equal-probability waits (their mean is
        # recv_wait_cycles (balance_wait_cycles) × busy passes; TTFT's distribution only)
        n = np.where(np.isfinite(reps), reps, 1.0)
        if tb > 0:
            ranks = int(attention_dp(s.parallel.tp, s.parallel.dp_attention))
            pts = balance_wait_points(timeout=tb, arrivals_per_cycle=lam * cyc_f, ranks=ranks,
                                      busy=balance_busy(ranks=ranks, batch=bf, replicas=n)) * cyc_f[..., None]
        else:
            pts = recv_wait_points(interval=k, arrivals_per_cycle=lam * cyc_f,
                                   busy=balance_busy(ranks=1, batch=bf, replicas=n)) * cyc_f[..., None]
        recv = pts.mean(axis=-1)
        n_s, n_p = own_lat.shape[-1], pts.shape[-1]
        own_lat = (own_lat[..., :, None] + pts[..., None, :]).reshape(own_lat.shape[:-1] + (n_s * n_p,))
        server = np.repeat(server, n_p, axis=-1)
        weights = np.repeat(np.asarray(sv.weights, float) / n_p, n_p, axis=-1)
    pool = ttft_pool(arrival_per_s=peak, servers=np.where(np.isfinite(reps), reps, 1.0), server_s=server,
                     own_s=own_lat, weights=weights)
    rho = pool.wait.utilization
    zero = np.zeros_like(goodput)
    room = sv.room_tokens(b)
    budget_binds = np.broadcast_to(np.max(sv.chunk_share * sv.budget_tokens, axis=-1, keepdims=True) > room,
                                   goodput.shape)
    return ModeLoad(
        itl_s=dec.itl_mean_s, itl_percentile_s=dec.itl_quantile_s, itl_worst_s=dec.itl_worst_s,
        goodput_req_s=goodput, prefill_req_s=goodput, replicas=reps, prefill_replicas=np.zeros_like(reps),
        decode_replicas=np.zeros_like(reps), ttft_s=pool.mean_s, ttft_p90_s=pool.quantile_s,
        ttft_wait_s=pool.wait.mean_s, prefill_service_s=pool.service_mean_s, prefill_utilization=rho,
        prefill_ok=(dec.chunk_share < 1.0) & (rho < 1.0), kv_transfer_s=zero, kv_transfer_exposed_s=zero,
        fleet_batch_size=bf, fleet_itl_s=fleet.itl_mean_s, fleet_itl_percentile_s=fleet.itl_quantile_s,
        ttft_wait=pool.wait, ttft_own_s=own_lat, budget_binds=budget_binds, recv_wait_s=recv,
        ttft_weights=None if recv is None else weights, fleet_cycle_s=cyc_f)


def disaggregated_load(r: Resolved, sv: ServiceTimes, st: WorkloadStats, *, grid: Arr, tp: Arr, pp: Arr,
                       prefill_pool: Resolved | None = None) -> ModeLoad:
    """A decode pool (no chunks in its iterations) and a prefill pool running
    ``sv.prefill_work_s`` alone, pipelined over its PP stages, plus the exposed KV transfer.

    ``r``, ``tp``, ``pp``: the decode pool's; ``prefill_pool``: the prefill pool's own GPU and
    layout (planner.sizing.pools; None: the decode candidates' own), the KV re-sharded between
    the two (planner.physics.handoff)."""
    s, gpu = r.scenario, r.gpu
    peak, u, floor = s.workload.peak_rate, s.fleet.target_utilization, s.fleet.min_replicas
    b = grid.reshape(1, -1)
    cycle, tpp, w, work = sv.cycle_s, sv.tokens_per_pass, sv.weights, sv.prefill_work_s
    itl = cycle / tpp
    goodput = b / (st.mean_output * itl)
    dec_reps = _replicas(peak, u, goodput, floor)
    lam = np.where(np.isfinite(dec_reps), peak / dec_reps, 0.0)
    fleet_b = batch_at_rate(lam, batches=grid, rates_per_s=goodput)
    fleet_cycle = _interp_rows(fleet_b, grid, cycle)
    fleet_itl = fleet_cycle / tpp
    # Prefill pool: chunked prefill pipelined over PP stages, plus the exposed KV transfer.
    pre_pp = pp if prefill_pool is None else float(prefill_pool.scenario.parallel.pp)
    srv, lat = pipelined_prefill(prefill_s=work, stages=pre_pp, microbatches=sv.prefill_iterations)
    link = kv_link_bytes_per_s(gpu, link=s.fleet.link, link_bytes_per_s=s.fleet.link_bytes_per_s)
    kv_gpu = np.asarray(kv_bytes_per_token_per_gpu(model=r.model, kv_dtype=s.kv_dtype, tp=tp, pp=pp,
                                                   context_tokens=st.class_prompt))
    t_full = np.asarray(kv_transfer_s(kv_bytes=st.class_prompt * kv_gpu, link_bytes_per_s=link,
                                      efficiency=DEFAULT_KV_LINK_EFFICIENCY))
    if prefill_pool is not None:  # the senders' side of the hand-off (1.0 when they keep up with the receivers)
        pq = prefill_pool.scenario.parallel
        send = kv_link_bytes_per_s(prefill_pool.gpu, link=s.fleet.link, link_bytes_per_s=s.fleet.link_bytes_per_s)
        t_full = t_full * np.asarray(kv_handoff_factor(send_gpus=pq.attention_tp * pq.pp, recv_gpus=tp * pp,
                                                       send_link_bytes_per_s=send, recv_link_bytes_per_s=link))
    t_exp = np.asarray(kv_transfer_exposed_s(transfer_s=t_full, prefill_s=lat, layers=r.model.layers,
                                             setup_s=kv_transfer_setup_s(s)))
    own = lat + t_exp
    shape = goodput.shape
    # the decode worker's take-in: k of its iterations after the KV arrives (physics.handoff), at the batch
    # it runs at the fleet's load (TTFT's load, as the prefill pool's wait)
    admit = np.broadcast_to(np.asarray(decode_admission_s(fleet_cycle), float), shape)
    es = np.sum(w * srv, axis=-1)
    start = _replicas(peak, u, 1.0 / es, floor)
    # the prefill pool is grown for the SLO less the take-in at the smallest batch; a larger batch
    # whose longer take-in then misses the SLO is left to the batch choice (operating.py)
    pre_n, ttft90_c = _grow_prefill_pool(peak, start, srv, own, w, s.slo.ttft_s - admit[:, 0])
    pool = ttft_pool(arrival_per_s=peak, servers=pre_n, server_s=srv, own_s=own, weights=w)

    def per_candidate(a: Arr) -> Arr:
        return np.broadcast_to(np.asarray(a, float)[:, None], shape)

    pre_reps = per_candidate(pre_n)
    wait = QueueWait(mean_s=per_candidate(pool.wait.mean_s), p_wait=per_candidate(pool.wait.p_wait),
                     utilization=per_candidate(pool.wait.utilization))
    return ModeLoad(
        itl_s=itl, itl_percentile_s=itl, itl_worst_s=itl, goodput_req_s=goodput,
        prefill_req_s=per_candidate(1.0 / es), replicas=pre_reps + dec_reps, prefill_replicas=pre_reps,
        decode_replicas=dec_reps, ttft_s=per_candidate(pool.mean_s) + admit,
        ttft_p90_s=per_candidate(ttft90_c) + admit,
        ttft_wait_s=wait.mean_s, prefill_service_s=per_candidate(np.sum(w * lat, axis=-1)),
        prefill_utilization=wait.utilization, prefill_ok=np.ones(shape, dtype=bool),
        kv_transfer_s=per_candidate(np.sum(w * t_full, axis=-1)),
        kv_transfer_exposed_s=per_candidate(np.sum(w * t_exp, axis=-1)),
        fleet_batch_size=fleet_b, fleet_itl_s=fleet_itl, fleet_itl_percentile_s=fleet_itl,
        ttft_wait=wait, ttft_own_s=own[:, None, :] + admit[..., None], decode_admission_s=admit)
