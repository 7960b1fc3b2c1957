"""The simulator referees every recommendation (issue 24): one decision,
``planner.views.referee.referee_pick``, behind the sweep's ``cheapest``, Compare's pick
and verdicts, the Plan's mode verdict and the report's answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner import Scenario, compare_columns, layout_variants, mode_verdict, referee_pick, sweep
from planner.views.referee import slo_status

ROOT = Path(__file__).resolve().parents[1]
SC = [Scenario(name=f"c{i}") for i in range(5)]


def test_the_pick_walks_cheapest_first_and_stops_at_the_first_pass() -> None:
    calls: list[int] = []
    attain = {0: 0.5, 1: 0.95, 2: 0.2, 3: 0.99, 4: 0.99}

    def sim(sc: Scenario) -> float:
        i = int(sc.name[1:])
        calls.append(i)
        return attain[i]

    costs = [3.0, 2.0, 1.0, float("inf"), 4.0]  # candidate 3 is not feasible analytically: never simulated
    pick = referee_pick(lambda i: SC[i], costs, target=0.9, simulate=sim)
    assert calls == [2, 1] and pick.pick == 1  # 2 (cheapest) fails, 1 passes: 0 and 4 are never run
    assert pick.failed(2) and not pick.failed(1) and pick.attainment_of(0) is None
    assert pick.offered == 4 and pick.refereed
    # The cap: with at most one simulation and the cheapest failing, there is no pick.
    calls.clear()
    capped = referee_pick(lambda i: SC[i], costs, target=0.9, simulate=sim, cap=1)
    assert calls == [2] and capped.pick is None and "none reached 90%" in capped.note()
    # Without a simulator: the analytic cheapest, said to be so.
    plain = referee_pick(lambda i: SC[i], costs, target=0.9, simulate=None)
    assert plain.pick == 2 and not plain.refereed and "not simulated" in plain.note()


def test_a_candidate_the_simulation_fails_is_never_labelled_as_meeting() -> None:
    assert slo_status(feasible=True, attainment=0.26, target=0.9).startswith("misses in simulation")
    options = layout_variants(Scenario(), [(1, "colocated"), (2, "colocated")])

    def fail_tp1(sc: Scenario) -> float:
        return 0.26 if sc.parallel.tp == 1 else 0.97

    cols = compare_columns(options, referee=fail_tp1)
    by_tp = {c.scenario.parallel.tp: c for c in cols}
    assert not by_tp[1].meets_slo and by_tp[1].verdict.startswith("misses the SLO in simulation")
    assert by_tp[2].meets_slo and by_tp[2].verdict.startswith("cheapest that meets the SLO (simulated: 97%")
    assert by_tp[1].simulated_attainment == 0.26 and by_tp[2].slo_status.startswith("meets (simulated")


def test_the_sweep_json_carries_the_candidates_simulated() -> None:
    from planner.simulate.referee import simulator

    sim = simulator(requests=300)
    result = sweep(Scenario(), gpus=["h100-sxm"], dtypes=["fp8"], tps=[1, 2], pps=[1], modes=["colocated"],
                   chunks=[2048], referee=sim, referee_cap=3)
    assert result["referee"]["refereed"] and result["simulated"]
    cheapest = result["cheapest"]
    assert cheapest is not None and cheapest["simulated_attainment"] >= 0.9
    assert cheapest["slo_status"].startswith("meets (simulated")
    simulated_rows = [s["row"] for s in result["simulated"]]
    for i, row in enumerate(result["rows"]):
        assert (row["simulated_attainment"] is not None) == (i in simulated_rows)
    # The analytic cheapest feasible row is the first simulated (cheapest first).
    costs = [(r["usd_per_mtok_output"], i) for i, r in enumerate(result["rows"]) if r["feasible"]]
    assert simulated_rows[0] == min(costs)[1]


def test_the_mode_verdict_is_refereed() -> None:
    text, pick = mode_verdict(Scenario(), referee=lambda sc: 0.5 if sc.serving.mode == "colocated" else 0.95)
    if pick.offered == 2 and pick.pick is not None:
        assert "disaggregated is the recommendation" in text and "colocated" in text
    text2, pick2 = mode_verdict(Scenario(), referee=lambda sc: 0.1)
    assert pick2.pick is None and ("neither mode passed its simulation" in text2 or pick2.offered == 0)


@pytest.mark.parametrize("flags", [[], ["--replicas", "1", "--router", "round_robin"]])
def test_simulate_without_fleet_flags_runs_the_plans_fleet(flags: list[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "planner", "simulate", "--requests", "200", "--format", "json",
                          *flags], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    fleet = json.loads(out.stdout)["fleet"]
    if flags:
        assert fleet["source"] == "flags"
    else:
        assert fleet["source"] == "plan" and fleet["router"] == "least_loaded"
        assert "the plan's fleet" in fleet["note"] and fleet["replicas"] >= 1
