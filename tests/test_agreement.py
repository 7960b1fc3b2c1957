"""The simulator is the referee: at the plan's own fleet and rate, short runs of
``bench/agreement.py``'s existing scenarios land within 25% of the plan's p90 TTFT and
per-request TPOT, and the simulated SLO attainment meets ``slo.attainment``."""

from __future__ import annotations

import pytest

from bench.agreement import EXISTING, agreement

# Short runs: 800 requests keep a p90 estimate's sampling error to a few percent
# (≈ 80 requests above it) and the whole table to seconds.
REQUESTS = 800
TOLERANCE = 0.25


@pytest.mark.parametrize("name", list(EXISTING))
def test_plan_agrees_with_the_simulator(name: str) -> None:
    row = agreement(name, EXISTING[name], requests=REQUESTS, seed=1, search=False)
    assert row.feasible, row.fleet
    assert abs(row.ttft_error) <= TOLERANCE, (row.plan.ttft_p90_s, row.sim.ttft_p90_s)
    assert abs(row.tpot_error) <= TOLERANCE, (row.plan.tpot_s, row.sim.tpot_s)
    assert row.sim.attainment >= row.target
