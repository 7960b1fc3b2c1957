"""The plan's fleet, simulated: what the Tail page runs by default, and the short
check Plan and Fleet & cost show beside the analytic answer.

* The fleet is the plan's: its colocated replicas, or its prefill and decode pools,
  each replica capped at the plan's operating batch, offered the peak rate the fleet
  was sized for.
* Steady state: arrivals span at least ``STEADY_STATE_E2E_MULTIPLE`` planned
  end-to-end latencies (TTFT + output tokens × ITL), so the ramp-up (an empty fleet
  filling its batches) is a minority of the requests.
* A fleet too large to simulate whole is simulated as a slice: fewer replicas of
  each pool, offered the same load per replica (the busier pool keeps its load; the
  slice has less statistical multiplexing, so its tail is, if anything, worse).
* The router is the one the plan assumes: least loaded (its TTFT is an M/G/c pool of
  prefill servers behind a router that sends each request to a free one).
* The check passes when at least ``slo.attainment`` (default ``PLAN_ATTAINMENT_TARGET``)
  of the requests meet both targets (TTFT and the request's TPOT, its mean inter-token
  time): the criterion the plan is feasible by (``planner.sizing.attainment``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.io.formatting import human
from planner.simulate.engine import simulate
from planner.simulate.options import MAX_SIM_TOKEN_STEPS, SimOptions, sim_options
from planner.simulate.report import summarize
from planner.sizing.operating import workload_stats
from planner.sizing.plan import Plan
from planner.spec.context import resolve
from planner.spec.scenario import Scenario

__all__ = [
    "CHECK_MAX_REPLICAS",
    "CHECK_MAX_REQUESTS",
    "FleetCheck",
    "FleetSim",
    "KNEE_GRID_FRACTIONS",
    "MIN_REQUESTS",
    "PLAN_ATTAINMENT_TARGET",
    "PLAN_ROUTER",
    "REFEREE_MAX_REQUESTS",
    "STEADY_STATE_E2E_MULTIPLE",
    "TAIL_MAX_REPLICAS",
    "TAIL_MAX_REQUESTS",
    "describe_knee",
    "fleet_check",
    "fleet_sim",
    "knee_rates",
]

# Arrivals span 3 planned end-to-end latencies: the first one fills the empty fleet's
# batches (ramp-up), the other two are at steady state.
STEADY_STATE_E2E_MULTIPLE = 3.0
MIN_REQUESTS = 200  # fewer gives percentiles of a handful of requests
# The Tail page: the whole fleet up to 64 replicas and 4,000 requests (about 2 s on one core).
TAIL_MAX_REPLICAS = 64
TAIL_MAX_REQUESTS = 4000
# The check beside Plan and Fleet & cost: a slice of at most 8 replicas and 1,500 requests
# (well under a second), so every widget change can afford it.
CHECK_MAX_REPLICAS = 8
CHECK_MAX_REQUESTS = 1500
# slo.attainment's default: the share of requests meeting both targets a plan promises.
PLAN_ATTAINMENT_TARGET = 0.90
# The router the plan's queueing assumes (an M/G/c pool: each request goes to a free server).
PLAN_ROUTER = "least_loaded"
# The referee's short runs (planner.views.referee): a slice of at most CHECK_MAX_REPLICAS
# replicas and this many requests, so several candidates simulate in a few seconds.
REFEREE_MAX_REQUESTS = 800


@dataclass(frozen=True)
class FleetSim:
    """How to simulate the plan's fleet, and what that is in words."""

    options: SimOptions
    rate_req_s: float
    replicas: int  # colocated replicas simulated (0 when disaggregated)
    prefill_replicas: int  # disaggregated pools simulated (0 when colocated)
    decode_replicas: int
    fleet_replicas: int  # replicas in the plan (all pools)
    sliced: bool
    steady: bool  # arrivals span the steady-state multiple of the planned end-to-end latency
    planned_e2e_s: float

    @property
    def pools(self) -> str:
        if self.replicas:
            return f"{self.replicas:,} replica{'s' if self.replicas != 1 else ''}"
        return f"{self.prefill_replicas:,} prefill + {self.decode_replicas:,} decode"

    def describe(self) -> str:
        whole = (f"a slice of the plan's {self.fleet_replicas:,} replicas with the same load per replica: "
                 if self.sliced else "the plan's fleet: ")
        span = self.options.requests / self.rate_req_s
        steady = (f", {span:,.0f} s of arrivals ≈ {span / self.planned_e2e_s:.1f}× the planned end-to-end latency"
                  if self.planned_e2e_s > 0 else "")
        return (f"{whole}{self.pools} at {human(self.rate_req_s, 'req/s')}, {self.options.requests:,} requests{steady}"
                + ("" if self.steady else " (too short for steady state: raise the requests)"))


def _planned_e2e_s(plan: Plan, scenario: Scenario) -> float:
    """TTFT + mean output tokens × ITL at the operating point."""
    op = plan.operating_point
    mean_output = workload_stats(resolve(scenario)).mean_output
    e2e = op.ttft_s + max(mean_output, 1.0) * op.itl_s
    return e2e if math.isfinite(e2e) and e2e > 0 else 0.0


def _fit_requests(scenario: Scenario) -> int:
    """The most requests of the scenario's mean lengths that stay within MAX_SIM_TOKEN_STEPS
    (with a 20% margin for the spread of drawn lengths)."""
    ws = workload_stats(resolve(scenario))
    chunk = scenario.serving.chunk_tokens
    per_request = max(ws.mean_output, 1.0) + math.ceil(max(ws.mean_prompt, 1.0) / chunk)
    return max(1, int(0.8 * MAX_SIM_TOKEN_STEPS / per_request))


def fleet_sim(plan: Plan, scenario: Scenario, *, max_replicas: int = TAIL_MAX_REPLICAS,
              max_requests: int = TAIL_MAX_REQUESTS, seed: int = 0, **overrides: Any) -> FleetSim | None:
    """The plan's fleet as SimOptions (None when the plan has no fleet: no operating
    point meets the SLO).  ``overrides`` go to SimOptions (router, requests ...)."""
    f, op = plan.fleet, plan.operating_point
    if not op.feasible or not math.isfinite(f.gpus_total):
        return None
    rate = scenario.workload.peak_rate
    e2e = _planned_e2e_s(plan, scenario)
    disagg = f.mode == "disaggregated"
    big_p = int(f.prefill_replicas if disagg else f.replicas)
    big_d = int(f.decode_replicas) if disagg else 0
    total = big_p + big_d
    wanted_full = rate * STEADY_STATE_E2E_MULTIPLE * e2e
    max_requests = min(max_requests, _fit_requests(scenario))
    scale = min(1.0, max_replicas / total, max_requests / wanted_full if wanted_full > 0 else 1.0)
    p = max(1, math.floor(big_p * scale + 1e-9))
    d = max(1, math.floor(big_d * scale + 1e-9)) if disagg else 0
    sim_rate = rate * (min(p / big_p, d / big_d) if disagg else p / big_p)
    sliced = (p, d) != (big_p, big_d)
    pools: dict[str, int] = {"prefill_replicas": p, "decode_replicas": d} if disagg else {"replicas": p}
    wanted = math.ceil(sim_rate * STEADY_STATE_E2E_MULTIPLE * e2e)
    requests = int(overrides.pop("requests", None) or min(max(wanted, MIN_REQUESTS), max_requests))
    overrides.setdefault("router", PLAN_ROUTER)
    options = sim_options(requests=requests, rate_req_s=sim_rate, max_batch=max(op.batch_size, 1), seed=seed,
                          slo_attainment=scenario.slo.attainment, **pools, **overrides)
    return FleetSim(options=options, rate_req_s=sim_rate, replicas=0 if disagg else p,
                    prefill_replicas=p if disagg else 0, decode_replicas=d, fleet_replicas=total, sliced=sliced,
                    steady=requests >= wanted, planned_e2e_s=e2e)


@dataclass(frozen=True)
class FleetCheck:
    """The short simulated check of the plan's fleet (latencies in seconds)."""

    sim: FleetSim
    attainment: float  # share of requests meeting both targets
    ttft_p90_s: float
    itl_mean_s: float
    target: float = PLAN_ATTAINMENT_TARGET
    ttft_p99_s: float = math.nan
    tpot_percentile: float = 0.9
    tpot_percentile_s: float = math.nan  # per-request TPOT at slo.itl_percentile
    gap_p99_s: float = math.nan  # p99 of all token gaps

    @property
    def passed(self) -> bool:
        return self.attainment + 1e-12 >= self.target

    def sentence(self) -> str:
        verdict = "meets" if self.passed else "MISSES"
        q = f"p{self.tpot_percentile * 100:g}"
        return (f"Simulated check ({self.sim.describe()}, {self.sim.options.router.replace('_', ' ')} router): "
                f"{self.attainment:.1%} of requests meet both targets, {verdict} the {self.target:.0%} the SLO asks "
                f"(TTFT p90 · queueing included {_ms(self.ttft_p90_s)}, TPOT {q} {_ms(self.tpot_percentile_s)}, "
                f"ITL mean {_ms(self.itl_mean_s)}, token-gap p99 {_ms(self.gap_p99_s)}).")


def _ms(x: float) -> str:
    return human(x, "s")


def fleet_check(plan: Plan, scenario: Scenario, *, seed: int = 0, max_requests: int = CHECK_MAX_REQUESTS
                ) -> FleetCheck | None:
    """Simulate a slice of the plan's fleet at the peak rate (None: no fleet to check)."""
    fs = fleet_sim(plan, scenario, max_replicas=CHECK_MAX_REPLICAS, max_requests=max_requests, seed=seed)
    if fs is None:
        return None
    run = simulate(scenario, fs.options)
    s = summarize(run, slo_ttft_s=scenario.slo.ttft_s, slo_itl_s=scenario.slo.itl_s)
    q = scenario.slo.itl_percentile
    tpot = run.tpot_s[run.output_tokens > 1]
    return FleetCheck(sim=fs, attainment=s.slo_attainment, ttft_p90_s=s.ttft_s.p90, itl_mean_s=s.itl_s.mean,
                      target=scenario.slo.attainment, ttft_p99_s=s.ttft_s.p99, tpot_percentile=q,
                      tpot_percentile_s=float(np.quantile(tpot, q)) if tpot.size else 0.0, gap_p99_s=s.itl_s.p99)


# The knee sweep: offered rates as fractions of the simulated slice's analytic capacity
# (the plan sizes for 70% of it by default), far enough past 1 that a knee inside is found.
KNEE_GRID_FRACTIONS: tuple[float, ...] = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def knee_rates(plan: Plan, fs: FleetSim) -> tuple[float, ...]:
    """Offered rates for the knee sweep of the simulated pools: fractions of their
    analytic capacity (colocated: replicas × goodput per replica; disaggregated: the
    smaller of the two pools' capacities)."""
    f = plan.fleet
    if fs.replicas:
        cap = fs.replicas * f.decode_req_s_per_replica
    else:
        cap = min(fs.prefill_replicas * f.prefill_req_s_per_replica, fs.decode_replicas * f.decode_req_s_per_replica)
    if not (math.isfinite(cap) and cap > 0):
        cap = fs.rate_req_s
    return tuple(round(cap * x, 3) for x in KNEE_GRID_FRACTIONS)


def describe_knee(*, rates: tuple[float, ...] | list[float], knee: float | None, target: float) -> str:
    """The knee in words, never silently the edge of the grid."""
    low, high = min(rates), max(rates)
    if knee is None:
        return (f"below {human(low, 'req/s')}: even the lowest simulated rate has under {target:.0%} of requests "
                "meeting both targets")
    if knee >= high:
        return (f"above {human(high, 'req/s')}: every simulated rate up to the top of the grid (2× the analytic "
                f"capacity) kept {target:.0%} of requests within both targets; the knee lies beyond it")
    return f"{human(knee, 'req/s')}: the highest simulated rate with at least {target:.0%} of requests meeting both targets"
