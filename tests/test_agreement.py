"""The simulator is the referee: at the plan's own fleet and rate, short runs of
``bench/agreement.py``'s scenarios land within 25% of the plan's p90 TTFT and
p90 ITL, and the simulated SLO attainment meets the plan's target."""

from __future__ import annotations

import pytest

from bench.agreement import SCENARIOS, agreement

# Short runs: 800 requests keep a p90 estimate's sampling error to a few percent
# (≈ 80 requests above it) and the whole table to seconds.
REQUESTS = 800
TOLERANCE = 0.25


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_plan_agrees_with_the_simulator(name: str) -> None:
    row = agreement(name, SCENARIOS[name], requests=REQUESTS, seed=1)
    assert row.feasible, row.fleet
    assert abs(row.ttft_error) <= TOLERANCE, (row.plan_ttft_p90_s, row.sim_ttft_p90_s)
    assert abs(row.itl_error) <= TOLERANCE, (row.plan_itl_p90_s, row.sim_itl_p90_s)
    assert row.attainment >= row.target
