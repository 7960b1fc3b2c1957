"""Summaries of simulated runs: percentiles, goodput, and the knee of a rate sweep.

* goodput = attainment × the offered rate the run saw ((n − 1) / arrival span): the
  requests/s that meet both SLOs (TTFT ≤ slo.ttft_s and mean ITL ≤ slo.itl_s).  Dividing
  the good requests by the whole run (which includes the final drain) would understate
  it for short runs; ``throughput_req_s`` is the completions over the whole run.
* attainment = share of requests meeting both SLOs
* knee = the highest offered rate whose attainment still reaches the target (default 99%)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.errors import ScenarioError
from planner.simulate.engine import SimRun, simulate
from planner.simulate.options import MAX_RATE_REQ_S, SimOptions
from planner.spec.scenario import Scenario

__all__ = ["MAX_RATES", "LatencyStats", "RateSweep", "ReplicaTimeline", "SimReport", "find_knee", "latency_stats",
           "rate_sweep", "summarize"]

# Rates one sweep simulates (each a full run of ``requests``): the Tail page's
# grid has 7; 32 resolve a knee finely and keep a sweep under a few minutes at
# the largest run size.
MAX_RATES = 32


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LatencyStats(_Frozen):
    """Mean and percentiles of one latency (seconds)."""

    mean: float
    p50: float
    p90: float
    p99: float


class ReplicaTimeline(_Frozen):
    """One replica's batch size and KV occupancy over time (downsampled)."""

    role: str  # colocated, prefill or decode
    t_s: tuple[float, ...]
    batch_size: tuple[int, ...]
    kv_utilization: tuple[float, ...]


class SimReport(_Frozen):
    """The summary of one simulated run (SI units); ``to_json_dict`` is the CLI's JSON.

    ``offered_rate_req_s`` (first) and ``timeline`` (last) appear in the JSON only when set."""

    offered_rate_req_s: float | None = None
    requests: int
    duration_s: float
    throughput_req_s: float
    output_tok_s: float
    mean_in_flight: float
    ttft_s: LatencyStats
    itl_s: LatencyStats
    tpot_s: LatencyStats
    e2e_s: LatencyStats
    goodput_req_s: float
    slo_attainment: float
    preemptions: int
    prefix_hit_rate: float
    iterations: int
    kv_capacity_tokens: int
    peak_kv_utilization: float
    timeline: tuple[ReplicaTimeline, ...] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        unset = {k for k in ("offered_rate_req_s", "timeline") if getattr(self, k) is None}
        return self.model_dump(mode="json", exclude=unset)


class RateSweep(_Frozen):
    """One run per offered rate and the knee (None: no rate reaches the target)."""

    levels: tuple[SimReport, ...]
    knee_rate_req_s: float | None
    slo_attainment_target: float

    def to_json_dict(self) -> dict[str, Any]:
        return {"levels": [lv.to_json_dict() for lv in self.levels], "knee_rate_req_s": self.knee_rate_req_s,
                "slo_attainment_target": self.slo_attainment_target}


def latency_stats(values: np.ndarray) -> LatencyStats:
    """Mean, p50, p90, p99 of a sample (zeros when empty)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return LatencyStats(mean=0.0, p50=0.0, p90=0.0, p99=0.0)
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    return LatencyStats(mean=float(v.mean()), p50=float(p50), p90=float(p90), p99=float(p99))


def _arrival_rate(run: SimRun) -> float:
    """Requests/s the run offered: (n − 1) / (last arrival − first arrival); for a
    single request or simultaneous arrivals, completions over the run."""
    n = run.requests
    span = float(run.arrival_s.max() - run.arrival_s.min()) if n else 0.0
    if n > 1 and span > 0:
        return (n - 1) / span
    return n / run.duration_s if run.duration_s > 0 else 0.0


def summarize(run: SimRun, *, slo_ttft_s: float, slo_itl_s: float, offered_rate_req_s: float | None = None,
              timeline: bool = False) -> SimReport:
    """The summary of one run (SI units)."""
    ok = (run.ttft_s <= slo_ttft_s) & (run.tpot_s <= slo_itl_s)
    n = run.requests
    d = run.duration_s
    prompt = float(run.prompt_tokens.sum())
    return SimReport(
        offered_rate_req_s=offered_rate_req_s,
        requests=n,
        duration_s=d,
        throughput_req_s=n / d if d > 0 else 0.0,
        output_tok_s=float(run.output_tokens.sum()) / d if d > 0 else 0.0,
        mean_in_flight=run.mean_in_flight,
        ttft_s=latency_stats(run.ttft_s),
        itl_s=latency_stats(run.itl_s),
        tpot_s=latency_stats(run.tpot_s),
        e2e_s=latency_stats(run.e2e_s),
        goodput_req_s=float(ok.mean()) * _arrival_rate(run),
        slo_attainment=float(ok.mean()),
        preemptions=run.preemptions,
        prefix_hit_rate=float(run.hit_tokens.sum()) / prompt if prompt > 0 else 0.0,
        iterations=run.iterations,
        kv_capacity_tokens=run.kv_capacity_tokens,
        peak_kv_utilization=max((max(tl["kv_utilization"], default=0.0) for tl in run.timeline), default=0.0),
        timeline=tuple(ReplicaTimeline(**tl) for tl in run.timeline) if timeline else None,
    )


def find_knee(*, rates: Sequence[float], attainments: Sequence[float], target: float) -> float | None:
    """Highest rate whose attainment ≥ target with every lower rate also meeting it (None: none does)."""
    knee = None
    for rate, att in sorted(zip(rates, attainments, strict=True)):
        if att + 1e-12 < target:
            break
        knee = rate
    return knee


def rate_sweep(scenario: Scenario, options: SimOptions, rates: Sequence[float]) -> RateSweep:
    """One run per offered rate (same seed), their summaries as ``levels`` and the knee."""
    if not rates:
        raise ScenarioError("rates: give at least one rate")
    for r in rates:
        if not 0 < r <= MAX_RATE_REQ_S:
            raise ScenarioError(f"rates: every rate must be > 0 and at most {MAX_RATE_REQ_S:g} req/s, got {r}")
    unique = sorted({float(r) for r in rates})
    if len(unique) > MAX_RATES:
        raise ScenarioError(f"rates: {len(unique)} rates is over the limit of {MAX_RATES}")
    levels = []
    for r in unique:
        run = simulate(scenario, options.model_copy(update={"rate_req_s": r}))
        levels.append(summarize(run, slo_ttft_s=scenario.slo.ttft_s, slo_itl_s=scenario.slo.itl_s,
                                offered_rate_req_s=r))
    knee = find_knee(rates=unique, attainments=[lv.slo_attainment for lv in levels], target=options.slo_attainment)
    return RateSweep(levels=tuple(levels), knee_rate_req_s=knee, slo_attainment_target=options.slo_attainment)
