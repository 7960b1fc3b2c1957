"""Plausibility warnings: inputs far outside anything the catalog could serve are
accepted (a what-if is allowed) but never silently.

Each limit is a named constant with its reason.
"""

from __future__ import annotations

import math

from planner.io.formatting import human, sig3
from planner.sizing.plan import Plan
from planner.spec.catalog import load_catalog
from planner.spec.scenario import Scenario

__all__ = [
    "LARGEST_CLUSTER_GPUS",
    "LOW_UTILIZATION",
    "PEAK_TO_MEAN_MAX",
    "PRICE_RANGE_FACTOR",
    "plausibility_warnings",
]

# The largest GPU cluster reported publicly: xAI's Colossus, about 200,000 GPUs (2025).
# A plan needing more is not a deployment anyone has built.
LARGEST_CLUSTER_GPUS = 200_000
# A $/GPU-hour more than 5× away from every catalog quote is almost surely a typo
# (a monthly price, cents for dollars).
PRICE_RANGE_FACTOR = 5.0
# Sizing for 20% utilization or less provisions 5× the capacity the traffic needs.
LOW_UTILIZATION = 0.2
# Public traffic traces (Azure LLM inference 2023/2024) peak at a few times their mean;
# 20× is a spike the mean no longer describes.
PEAK_TO_MEAN_MAX = 20.0


def plausibility_warnings(scenario: Scenario, plan: Plan) -> list[str]:
    """Sentences naming each input that is far outside what the catalog could serve."""
    out: list[str] = []
    w = scenario.workload
    gpus = plan.fleet.gpus_total
    if math.isfinite(gpus) and gpus > LARGEST_CLUSTER_GPUS:
        out.append(
            f"The plan needs {gpus:,.0f} GPUs for {human(w.peak_rate, 'req/s')}: more than the largest GPU cluster "
            f"ever reported (about {LARGEST_CLUSTER_GPUS:,}, xAI Colossus 2025). Check Requests/s and Peak req/s "
            "(per second, not per day).")
    price = scenario.cost.usd_per_gpu_hour
    if price is not None:
        quotes = [q.usd_per_gpu_hour for q in load_catalog().prices] + [g.usd_per_gpu_hour for g in load_catalog().gpus.values()]
        low, high = min(quotes), max(quotes)
        if price < low / PRICE_RANGE_FACTOR or price > high * PRICE_RANGE_FACTOR:
            out.append(f"$/GPU-hour {human(price, 'USD')} is more than {PRICE_RANGE_FACTOR:g}× outside every catalog price "
                       f"(${low:,.2f} to ${high:,.2f}): is it per hour and in dollars?")
    if scenario.fleet.target_utilization <= LOW_UTILIZATION:
        out.append(f"Target utilization {scenario.fleet.target_utilization:.0%} provisions "
                   f"{sig3(1 / scenario.fleet.target_utilization)}× the capacity the peak needs.")
    if w.peak_requests_per_s is not None and w.peak_requests_per_s > PEAK_TO_MEAN_MAX * w.requests_per_s:
        out.append(f"Peak req/s is {sig3(w.peak_requests_per_s / w.requests_per_s)}× the mean: the fleet is sized "
                   "for the peak and charged around the clock, so $/Mtok is mostly idle time.")
    return out
