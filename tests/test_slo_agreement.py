"""Short versions of three rows of bench/agreement.py's short-prompt panel (issue 24): at the
plan's own fleet and peak rate the simulator's attainment meets ``slo.attainment`` and the
plan's per-request TPOT (at ``slo.itl_percentile``), TTFT p90 and token-gap p99 land near the
simulator's; for the 70B row the plan without utilization headroom is within 10% (or one
replica) of the smallest fleet the simulator accepts."""

from __future__ import annotations

import pytest

from bench.agreement import SHORT_PROMPTS, agreement

REQUESTS = 1200  # a few planned end-to-end latencies of arrivals at these rates: seconds per row
TOLERANCE = 0.15  # issue 24's goal for the statistics
# The 8B 500/200 row's TTFT and gap depend on how many prompts one iteration admits (the
# token-budget admission rule of issue 24, item 1): until it lands they are held to 40%.
LOOSE = 0.40
# A disaggregated decode pool's token gaps are decode steps; the plan takes the step at the
# pool's mean batch, so the p99 gap misses the batch's own fluctuation (−13% before the kernel-sum step
# landed, −27% after it, 1,200 requests).
DECODE_GAP = 0.30
ROWS = {
    "llama-3.1-70b fp8 h200 tp1 1500/350 40 req/s": (TOLERANCE, TOLERANCE),
    "rag 32k/300 70b fp8 h200 tp2 disaggregated 2 req/s": (TOLERANCE, DECODE_GAP),
    "llama-3.1-8b h100 500/200 200 req/s": (LOOSE, LOOSE),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_the_plan_agrees_with_its_referee(name: str) -> None:
    ttft_tol, gap_tol = ROWS[name]
    search = name.startswith("llama-3.1-70b")
    row = agreement(name, SHORT_PROMPTS[name], requests=REQUESTS, seed=1, search=search)
    assert row.feasible, row.fleet
    assert row.sim.attainment >= row.target, row
    assert row.plan.attainment >= row.target
    assert abs(row.tpot_error) <= TOLERANCE, (row.plan.tpot_s, row.sim.tpot_s)
    assert abs(row.ttft_error) <= ttft_tol, (row.plan.ttft_p90_s, row.sim.ttft_p90_s)
    assert abs(row.gap_error) <= gap_tol, (row.plan.gap_p99_s, row.sim.gap_p99_s)
    if search:
        assert row.fleet_close, (row.min_gpus, row.smallest_gpus)
