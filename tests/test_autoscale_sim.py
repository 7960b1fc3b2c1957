"""The simulated day (planner.simulate.day) against the analytic autoscaling answer, and replicas joining mid-run."""

from __future__ import annotations

import numpy as np
import pytest

from planner.simulate import sim_options, simulate
from planner.simulate.day import meets, simulate_day
from planner.sizing.autoscale import compare_policies
from planner.spec.profile import diurnal_profile
from planner.spec.scenario import Scenario, scenario_from_dict

HOUR = 3600.0
STEP = [(0.0, 1.0), (10.5 * HOUR - 1, 1.0), (10.5 * HOUR, 40.0), (20 * HOUR, 40.0), (20 * HOUR + 1, 1.0)]


def _scenario(profile: list[tuple[float, float]], **fleet: object) -> Scenario:
    return scenario_from_dict({"workload": {"profile": [{"t_s": t, "requests_per_s": r} for t, r in profile]},
                               "fleet": {"scale_interval_s": HOUR, **fleet}})


def test_step_increase_simulated_reactive_misses_and_predictive_holds() -> None:
    s = _scenario(STEP, scale_up_delay_s=1.5 * HOUR)
    res = compare_policies(s)
    ramp = [9, 10, 11, 12]  # the hours around the step at 10:30 (replicas ordered at 10:00 serve from 11:30)
    rx = simulate_day(s, res["reactive"], requests_per_step=300, workers=1, only=ramp)
    pr = simulate_day(s, res["predictive"], requests_per_step=300, workers=1, only=ramp)
    assert rx.summary.worst_step_slo_attainment is not None and pr.summary.slo_attainment is not None
    assert rx.summary.worst_step_slo_attainment < 0.9
    assert pr.summary.slo_attainment >= rx.summary.slo_attainment
    assert pr.summary.worst_step_slo_attainment >= 0.9
    for st in (*rx.steps, *pr.steps):
        if st.slo_attainment is not None:  # the simulated verdict is the analytic one
            assert meets(st.slo_attainment) == st.meets_slo, st


def test_simulated_verdict_matches_analytic_on_the_flat_parts_of_a_diurnal_day() -> None:
    pts = [(p.t_s, p.requests_per_s) for p in diurnal_profile(peak=30.0, trough=2.0, peak_hour=14)]
    s = _scenario(pts)
    res = compare_policies(s)
    flat = [2, 13, 14]  # around the trough (02:00) and the peak (14:00)
    for policy in ("static", "reactive"):
        out = simulate_day(s, res[policy], requests_per_step=300, workers=1, only=flat)
        sims = [st for st in out.steps if st.slo_attainment is not None]
        assert len(sims) == len(flat)
        assert all(meets(st.slo_attainment) == st.meets_slo for st in sims)


def test_progress_is_reported_and_workers_agree_with_one_process() -> None:
    s = _scenario(STEP, scale_up_delay_s=1.5 * HOUR)
    res = compare_policies(s)["reactive"]
    seen: list[tuple[int, int]] = []
    one = simulate_day(s, res, requests_per_step=100, workers=1, only=[10, 11], progress=lambda d, n: seen.append((d, n)))
    two = simulate_day(s, res, requests_per_step=100, workers=2, only=[10, 11])
    assert seen == [(1, 2), (2, 2)]
    assert [x.slo_attainment for x in one.steps] == [x.slo_attainment for x in two.steps]


def test_replicas_join_late_and_take_no_requests_before() -> None:
    s = Scenario()
    base = dict(requests=300, rate_req_s=8.0, replicas=3, seed=3, router="least_loaded")
    run = simulate(s, sim_options(**base, join_s=(0.0, 0.0, 20.0)))
    late = run.timeline[2]
    assert late["t_s"] and min(late["t_s"]) >= 20.0
    # no joins, or every replica joining at 0: the same run, bit for bit
    a = simulate(s, sim_options(**base))
    b = simulate(s, sim_options(**base, join_s=(0.0, 0.0, 0.0)))
    assert np.array_equal(a.first_token_s, b.first_token_s) and np.array_equal(a.finish_s, b.finish_s)
    # a replica joining late leaves the others busier: TTFT p90 no better than with all three from the start
    assert np.percentile(run.ttft_s, 90) >= np.percentile(a.ttft_s, 90) - 1e-12


def test_bad_join_times_name_the_field() -> None:
    from planner.errors import ScenarioError

    with pytest.raises(ScenarioError, match="join_s"):
        sim_options(join_s=(-1.0,))


def test_round_robin_fleet_is_its_replicas_run_alone() -> None:
    """Round robin ignores load, so a k-replica run is k one-replica runs of every k-th request (exactly)."""
    from planner.simulate import generate_requests

    s, k = Scenario(), 4
    opts = sim_options(requests=400, rate_req_s=5.0 * k, replicas=k, seed=11, router="round_robin")
    reqs = generate_requests(s, opts)
    fleet = simulate(s, opts, reqs)
    for j in range(k):
        sub = reqs[j::k]
        alone = simulate(s, opts.model_copy(update={"replicas": 1, "requests": len(sub)}), sub)
        assert np.array_equal(alone.first_token_s, fleet.first_token_s[j::k])
        assert np.array_equal(alone.finish_s, fleet.finish_s[j::k])
