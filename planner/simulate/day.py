"""The day, simulated: each control interval of an autoscaling answer run through the simulator.

* Arrivals: a non-homogeneous Poisson process following the profile, by thinning:
  candidates at the interval's highest rate λ_max, each kept with probability
  λ(t) / λ_max.  Lengths and shared prefixes as the scenario's workload.
* Replicas: those serving at the interval's start, plus the ones joining during it
  (after their scale-up delay), each with an empty prefix cache and no requests
  before it joins; the router spreads requests over the replicas that have joined.
* Each interval is simulated for ``requests_per_step`` requests, at least two
  planned end-to-end latencies (or the whole interval, if shorter), from its
  earliest highest rate (moved back to fit inside the interval): the analytic
  verdict sizes the interval at that rate too.  Arrivals start one planned
  end-to-end latency earlier on the same replicas, so the batches are full when
  the counted requests arrive (the fleet check's steady state).  Intervals are independent (each starts with empty
  queues), so they run in separate processes where cores exist.
* A fleet over ``MAX_DAY_SIM_REPLICAS`` is simulated as a slice with the same load
  per replica (as the plan's fleet check).
* Attainment: share of requests meeting both targets (TTFT ≤ slo.ttft_s and mean
  ITL ≤ slo.itl_s); the day's is weighted by each interval's requests; an interval
  meets the SLO when it reaches ``PLAN_ATTAINMENT_TARGET`` (what the plan promises).
* Bounds: at most ``MAX_DAY_SIM_REQUESTS`` requests per day (intervals × requests per
  interval), refused before anything runs; the worker processes are killed at once
  when the caller's ``progress`` or ``heartbeat`` raises (a page whose visitor left:
  pages/autoscale.py raises once its session is disconnected), so no interval runs on
  for nobody.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

import numpy as np

from planner.errors import ScenarioError
from planner.simulate.arrivals import generate_requests
from planner.simulate.engine import simulate
from planner.simulate.fleetcheck import PLAN_ATTAINMENT_TARGET, STEADY_STATE_E2E_MULTIPLE
from planner.simulate.options import MAX_SIM_REQUESTS, sim_options
from planner.sizing.autoscale import AutoscaleResult, AutoscaleStep, Sizer, day_profile
from planner.spec.context import resolve
from planner.spec.profile import ProfilePoint, profile_argmax, profile_max, profile_rates
from planner.spec.scenario import Scenario

__all__ = ["DAY_POLL_S", "DEFAULT_STEP_REQUESTS", "MAX_DAY_SIM_REPLICAS", "MAX_DAY_SIM_REQUESTS", "MAX_DAY_WORKERS",
           "StepSim", "check_day_size", "meets", "run_step", "simulate_day"]

# Requests simulated per interval: 2,000 give an attainment within ±1% (binomial
# σ = √(0.9 × 0.1 / 2000) ≈ 0.7%) in about a second on one core.
DEFAULT_STEP_REQUESTS = 2000
# The widest fleet simulated whole (the Tail page's bound); wider ones are sliced.
MAX_DAY_SIM_REPLICAS = 64
# Worker processes for the intervals: at most this many.
MAX_DAY_WORKERS = 64
# Requests simulated for one policy's day (intervals × requests per interval): the default
# 600 s interval at DEFAULT_STEP_REQUESTS is 144 × 2,000 = 288,000, about 15 s on two cores;
# 10 s intervals (8,640 × 2,000, three policies) were about 22 minutes of work per click.
MAX_DAY_SIM_REQUESTS = 600_000
# While intervals run in worker processes, the caller's heartbeat is called this often.
DAY_POLL_S = 0.25

# Thinning draws candidates at the interval's highest rate: at most this many per request kept.
_CANDIDATES_PER_REQUEST = 20

Progress = Callable[[int, int], None]


def check_day_size(*, intervals: int, requests_per_step: int) -> None:
    """Raise ScenarioError naming the fields when a day would simulate over MAX_DAY_SIM_REQUESTS."""
    total = intervals * requests_per_step
    if total > MAX_DAY_SIM_REQUESTS:
        raise ScenarioError(
            f"requests_per_step × intervals: {requests_per_step:,} requests per interval × {intervals:,} intervals = "
            f"{total:,} simulated requests, over the limit of {MAX_DAY_SIM_REQUESTS:,} per day (MAX_DAY_SIM_REQUESTS); "
            f"lower the requests per interval to {max(MAX_DAY_SIM_REQUESTS // max(intervals, 1), 1):,} or raise "
            "fleet.scale_interval_s")


@dataclass(frozen=True)
class StepSim:
    """One interval's simulation job (picklable)."""

    index: int
    scenario: Scenario
    profile: tuple[ProfilePoint, ...]
    start_s: float
    window_s: float
    warmup_s: float  # arrivals before the window (same replicas), not counted: the batches fill up
    rate_max: float
    thin: float  # slice: the share of arrivals kept
    replicas: int  # colocated, or the prefill pool
    decode_replicas: int
    joins: tuple[float, ...]
    decode_joins: tuple[float, ...]
    max_batch: int
    requests_cap: int
    seed: int
    router: str


def _slice(n: int, joins: tuple[float, ...], window: float, scale: float) -> tuple[int, tuple[float, ...]]:
    inside = [j for j in joins if j < window]
    total = n + len(inside)
    keep = max(1, math.floor(total * scale + 1e-9))
    now = min(n, keep) if n else 0
    return max(now, 1 if n else 0), tuple(inside[:max(keep - now, 0)])


def _jobs(scenario: Scenario, result: AutoscaleResult, *, requests_per_step: int, seed: int,
          router: str) -> list[StepSim]:
    prof = day_profile(scenario)
    disagg = scenario.serving.mode == "disaggregated"
    sz = Sizer(resolve(scenario))
    op = sz.need(profile_max(prof)).op
    batch = max(int(op.batch_size[0]), 1)
    e2e = float(op.ttft_s[0]) + max(sz.stats.mean_output, 1.0) * float(op.itl_s[0])
    e2e = e2e if math.isfinite(e2e) and e2e > 0 else 0.0
    jobs = []
    for k, st in enumerate(result.steps):
        mean = max(st.mean_requests_per_s, 1e-9)
        window = min(st.duration_s, max(requests_per_step / mean, (STEADY_STATE_E2E_MULTIPLE - 1) * e2e))
        # the interval's busiest window: from its earliest highest rate (inside the interval)
        offset = min(profile_argmax(prof, st.t_s, st.t_s + st.duration_s) - st.t_s, st.duration_s - window)
        pre = (st.prefill_replicas if disagg else st.replicas) + sum(j <= offset for j in st.join_offsets_s)
        dec = (st.decode_replicas + sum(j <= offset for j in st.decode_join_offsets_s)) if disagg else 0
        joins = tuple(j - offset for j in st.join_offsets_s if j > offset)
        djoins = tuple(j - offset for j in st.decode_join_offsets_s if j > offset)
        total = pre + dec + len(joins) + len(djoins)
        scale = min(1.0, MAX_DAY_SIM_REPLICAS / max(total, 1))
        p, pj = _slice(pre, joins, window, scale)
        d, dj = _slice(dec, djoins, window, scale) if disagg else (0, ())
        thin = min(p / max(pre, 1), d / max(dec, 1)) if disagg else p / max(pre, 1)
        jobs.append(StepSim(index=k, scenario=scenario, profile=prof, start_s=st.t_s + offset, window_s=window,
                            warmup_s=e2e,
                            rate_max=st.requests_per_s, thin=min(thin, 1.0), replicas=p, decode_replicas=d, joins=pj,
                            decode_joins=dj, max_batch=batch, requests_cap=MAX_SIM_REQUESTS, seed=seed + k,
                            router=router))
    return jobs


def run_step(job: StepSim) -> tuple[int, float | None, int]:
    """(index, attainment or None without requests, requests simulated)."""
    rng = np.random.default_rng(job.seed)
    lam = job.rate_max * job.thin
    if lam <= 0:
        return job.index, None, 0
    window = job.window_s + job.warmup_s
    n_cand = int(rng.poisson(lam * window))
    if n_cand > _CANDIDATES_PER_REQUEST * job.requests_cap:  # a spike over a quiet interval: a shorter window
        window *= _CANDIDATES_PER_REQUEST * job.requests_cap / n_cand
        n_cand = _CANDIDATES_PER_REQUEST * job.requests_cap
    cand = np.sort(rng.uniform(0.0, window, size=n_cand))  # from warmup_s before the window's start
    keep = rng.random(cand.size) * job.rate_max <= profile_rates(job.profile, job.start_s - job.warmup_s + cand)
    times = cand[keep][:job.requests_cap]
    if times.size == 0:
        return job.index, None, 0
    disagg = job.scenario.serving.mode == "disaggregated"
    joins = tuple(j + job.warmup_s for j in job.joins)
    pools = ({"prefill_replicas": job.replicas, "decode_replicas": job.decode_replicas, "join_s": joins,
              "decode_join_s": tuple(j + job.warmup_s for j in job.decode_joins)} if disagg
             else {"replicas": job.replicas, "join_s": joins})
    opts = sim_options(requests=int(times.size), seed=job.seed, max_batch=job.max_batch, router=job.router, **pools)
    reqs = tuple(replace(q, arrival_s=float(t)) for q, t in zip(generate_requests(job.scenario, opts), times,
                                                                  strict=True))
    run = simulate(job.scenario, opts, reqs)
    slo = job.scenario.slo
    counted = run.arrival_s >= job.warmup_s
    if not counted.any():
        return job.index, None, 0
    ok = (run.ttft_s <= slo.ttft_s) & (run.tpot_s <= slo.itl_s)
    return job.index, float(ok[counted].mean()), int(counted.sum())


def simulate_day(scenario: Scenario, result: AutoscaleResult, *, requests_per_step: int = DEFAULT_STEP_REQUESTS,
                 seed: int = 0, workers: int | None = None, router: str = "round_robin",
                 progress: Progress | None = None, only: Collection[int] | None = None,
                 heartbeat: Callable[[], None] | None = None) -> AutoscaleResult:
    """``result`` with each step's simulated attainment and the day's (request-weighted) and worst
    (``only``: simulate just these step indices).  ``heartbeat`` is called every DAY_POLL_S while
    worker processes run; whatever ``progress`` or ``heartbeat`` raises stops every worker at once
    and is re-raised."""
    per_step = min(max(requests_per_step, 1), MAX_SIM_REQUESTS)
    jobs = _jobs(scenario, result, requests_per_step=per_step, seed=seed, router=router)
    if only is not None:
        jobs = [j for j in jobs if j.index in set(only)]
    check_day_size(intervals=len(jobs), requests_per_step=per_step)
    n_workers = max(1, min(workers if workers is not None else (os.cpu_count() or 1), MAX_DAY_WORKERS, len(jobs)))
    att: dict[int, float | None] = {}
    done = 0
    if n_workers == 1:
        for job in jobs:
            i, a, _ = run_step(job)
            att[i] = a
            done += 1
            if progress:
                progress(done, len(jobs))
    else:
        # the platform's default start method (fork on Linux): spawn would re-run the caller's main
        # script in every worker (a Streamlit page's app.py)
        pool = multiprocessing.Pool(processes=n_workers)
        try:
            results = pool.imap_unordered(run_step, jobs)
            while done < len(jobs):
                try:
                    i, a, _ = results.next(timeout=DAY_POLL_S)
                except multiprocessing.TimeoutError:
                    if heartbeat:
                        heartbeat()
                    continue
                if heartbeat:  # also between results: intervals that each finish within DAY_POLL_S
                    heartbeat()  # would otherwise never ask whether the visitor is still there
                att[i] = a
                done += 1
                if progress:
                    progress(done, len(jobs))
            pool.close()
        except BaseException:
            # The intervals still running or waiting are dropped: the workers are killed first (a
            # worker blocked on the task queue holds its lock, on which terminate() alone waited
            # forever in the app server), then the pool's threads are ended.
            for proc in list(getattr(pool, "_pool", ())):
                proc.kill()
            # A worker killed while it waited for a task held the task queue's read lock, which
            # terminate() takes before it reaps the workers: with that lock gone with its holder,
            # terminate() (and the caller, and a test run) waited forever.  A fresh lock lets it on.
            inqueue = getattr(pool, "_inqueue", None)
            if inqueue is not None and hasattr(inqueue, "_rlock"):
                inqueue._rlock = multiprocessing.Lock()
            # A worker killed while it wrote a result held the result queue's write lock, which the
            # pool's task thread and terminate() both wait on to post their sentinels; nothing alive
            # can release it but us (a plain Lock may be released by any process).
            wlock = getattr(getattr(pool, "_outqueue", None), "_wlock", None)
            if wlock is not None and not wlock.acquire(False):
                with contextlib.suppress(ValueError):
                    wlock.release()
            elif wlock is not None:
                wlock.release()
            pool.terminate()
            raise
        finally:
            pool.join()
    steps: list[AutoscaleStep] = [st.model_copy(update={"slo_attainment": att.get(k)})
                                  for k, st in enumerate(result.steps)]
    weighted = [(st.slo_attainment, st.mean_requests_per_s * st.duration_s) for st in steps
                if st.slo_attainment is not None]
    total_w = sum(w for _, w in weighted)
    day = sum(a * w for a, w in weighted) / total_w if total_w > 0 else None
    worst = min((a for a, _ in weighted), default=None)
    summary = result.summary.model_copy(update={"slo_attainment": day, "worst_step_slo_attainment": worst})
    return result.model_copy(update={"steps": tuple(steps), "summary": summary})


def meets(attainment: float | None) -> bool | None:
    """The simulated verdict of one interval (None: not simulated)."""
    return None if attainment is None else attainment + 1e-12 >= PLAN_ATTAINMENT_TARGET
