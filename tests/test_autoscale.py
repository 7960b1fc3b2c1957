"""Autoscaling over a day (planner.sizing.autoscale): policies, identities and the profile inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from planner.errors import ScenarioError
from planner.sizing.autoscale import Sizer, autoscale, compare_policies
from planner.sizing.plan import plan
from planner.spec.context import resolve
from planner.spec.profile import (
    DAY_S,
    MAX_PROFILE_CSV_BYTES,
    MAX_PROFILE_POINTS,
    diurnal_profile,
    parse_profile_csv,
    parse_shape,
    profile_integral,
    profile_max,
    profile_rate,
)
from planner.spec.scenario import Scenario, scenario_from_dict

HOUR = 3600.0


def _scenario(profile: list[tuple[float, float]] | None, **fleet: object) -> Scenario:
    data: dict[str, object] = {"workload": {"requests_per_s": 1.0}, "fleet": {"scale_interval_s": HOUR, **fleet}}
    if profile is not None:
        data["workload"] = {"requests_per_s": 1.0, "profile": [{"t_s": t, "requests_per_s": r} for t, r in profile]}
    return scenario_from_dict(data)


# A step from 1 to 40 req/s at 10:30 (held until 20:00): 2 h100 replicas of the 8B model, then 9.
STEP = [(0.0, 1.0), (10.5 * HOUR - 1, 1.0), (10.5 * HOUR, 40.0), (20 * HOUR, 40.0), (20 * HOUR + 1, 1.0)]
# A peak several replicas of the default 8B plan serve (its batch grew once the SLO was scored per request,
# issue 24), so the trough needs fewer and elasticity pays.
DIURNAL = [(p.t_s, p.requests_per_s) for p in diurnal_profile(peak=60.0, trough=5.0, peak_hour=14)]


def test_static_equals_todays_peak_sizing() -> None:
    s = _scenario(DIURNAL)
    res = autoscale(s, "static")
    peak = profile_max(s.workload.profile or ())
    today = plan(scenario_from_dict({"workload": {"requests_per_s": 1.0, "peak_requests_per_s": peak}}))
    assert {st_.replicas for st_ in res.steps} == {int(today.fleet.replicas)}
    assert res.summary.gpu_hours == pytest.approx(today.fleet.gpus_total * 24)
    assert res.summary.usd_per_day == pytest.approx(today.cost.usd_per_hour * 24)
    assert res.summary.savings_fraction == pytest.approx(0.0, abs=1e-12)


def test_zero_delay_reactive_equals_predictive() -> None:
    s = _scenario(DIURNAL, scale_up_delay_s=0.0)
    res = compare_policies(s)
    rx, pr = res["reactive"], res["predictive"]
    assert [x.replicas for x in rx.steps] == [x.replicas for x in pr.steps]
    assert [x.gpus for x in rx.steps] == pytest.approx([x.gpus for x in pr.steps])
    assert rx.summary.gpu_hours == pytest.approx(pr.summary.gpu_hours)
    # and elasticity pays on a diurnal day
    assert rx.summary.gpu_hours < res["static"].summary.gpu_hours


def test_step_increase_predictive_beats_reactive_when_the_delay_exceeds_the_interval() -> None:
    s = _scenario(STEP, scale_up_delay_s=1.5 * HOUR)
    res = compare_policies(s)
    rx, pr = res["reactive"], res["predictive"]
    assert pr.summary.steps_meeting_slo >= rx.summary.steps_meeting_slo
    assert all(x.meets_slo for x in pr.steps)
    ramp = [x for x in rx.steps if x.t_s == 10 * HOUR][0]
    assert ramp.replicas < ramp.needed_replicas
    assert not ramp.meets_slo and ramp.ttft_p90_s is None
    assert ramp.covered_fraction == 0.0
    # the interval after it: the replicas ordered at 10:00 (when 10:00-11:00's load showed) serve from 11:30
    nxt = [x for x in rx.steps if x.t_s == 11 * HOUR][0]
    assert nxt.covered_fraction == pytest.approx(0.5)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rates=st.lists(st.floats(min_value=0.0, max_value=15.0), min_size=2, max_size=6),
       delay_h=st.floats(min_value=0.0, max_value=3.0))
def test_predictive_capacity_covers_every_interval(rates: list[float], delay_h: float) -> None:
    rates[0] = max(rates[0], 0.5)
    pts = [(i * DAY_S / len(rates), r) for i, r in enumerate(rates)]
    s = _scenario(pts, scale_up_delay_s=delay_h * HOUR)
    sz = Sizer(resolve(s))
    res = autoscale(s, "predictive", sizer=sz)
    for x in res.steps:
        assert x.replicas >= sz.need(x.requests_per_s).replicas
        assert x.covered_fraction == 1.0
        assert x.requests_per_s >= profile_rate(s.workload.profile or (), x.t_s) - 1e-9


@pytest.mark.parametrize("policy", ["static", "reactive", "predictive"])
def test_gpu_hour_and_dollar_identities(policy: str) -> None:
    s = _scenario(DIURNAL, warm_pool_replicas=1)
    res = autoscale(s, policy)
    sm = res.summary
    g = s.parallel.tp * s.parallel.pp  # GPUs per replica: EP lays experts over them (issue 25)
    assert sm.gpu_hours == pytest.approx(sum(x.gpus * x.duration_s for x in res.steps) / HOUR)
    assert sm.usd_per_day == pytest.approx(sm.gpu_hours * sm.usd_per_gpu_hour)
    assert sm.requests_per_day == pytest.approx(sum(x.mean_requests_per_s * x.duration_s for x in res.steps))
    mean_out = s.workload.output_tokens
    assert sm.usd_per_mtok_output == pytest.approx(sm.usd_per_day / (sm.requests_per_day * mean_out / 1e6))
    assert sm.savings_fraction == pytest.approx(1 - sm.gpu_hours / sm.static_gpu_hours)
    assert sum(x.duration_s for x in res.steps) == pytest.approx(DAY_S)
    # a replica is billed whenever it serves: billed GPUs never fall below the serving ones
    assert all(x.gpus >= x.replicas * g - 1e-9 for x in res.steps)


@pytest.mark.parametrize("profile", [None, [(0.0, 7.0)], [(0.0, 7.0), (13 * HOUR, 7.0)]])
def test_savings_are_zero_for_a_flat_profile(profile: list[tuple[float, float]] | None) -> None:
    res = compare_policies(_scenario(profile))
    for r in res.values():
        assert r.summary.savings_fraction == pytest.approx(0.0, abs=1e-12)
        assert len({x.replicas for x in r.steps}) == 1


def test_scale_up_delay_default_is_engine_start_plus_weight_load() -> None:
    s = _scenario(DIURNAL)
    res = autoscale(s, "reactive")
    p = plan(s)
    assert res.summary.scale_up_delay_s == pytest.approx(s.fleet.engine_start_s + p.fleet.cold_start_s)
    assert "engine start" in res.derivations["scale_up_delay_s"].formula
    assert res.derivations["interval_gpus"].value == max(x.needed_replicas for x in res.steps) * 1


def test_profile_arithmetic() -> None:
    pts = scenario_from_dict({"workload": {"profile": [{"t_s": 0, "requests_per_s": 2},
                                                       {"t_s": 43200, "requests_per_s": 10}]}}).workload.profile
    assert pts is not None
    assert profile_rate(pts, 21600) == pytest.approx(6.0)
    assert profile_rate(pts, 64800) == pytest.approx(6.0)  # back down to 2 at midnight
    assert profile_integral(pts) == pytest.approx(6.0 * DAY_S)
    assert profile_max(pts, 0, 3600) == pytest.approx(2 + 8 / 12)
    d = diurnal_profile(peak=100, trough=10, peak_hour=14)
    assert profile_max(d) == pytest.approx(100) and min(p.requests_per_s for p in d) == pytest.approx(10)
    assert profile_rate(d, 14 * HOUR) == pytest.approx(100)
    assert parse_shape("diurnal:peak=100,trough=10,peak_hour=14") == d


@pytest.mark.parametrize(("profile", "needle"), [
    ([], "workload.profile: the profile is empty"),
    ([{"t_s": 10, "requests_per_s": 1}, {"t_s": 5, "requests_per_s": 1}], "t_s must increase"),
    ([{"t_s": 0, "requests_per_s": -1}], "requests_per_s: Input should be greater than or equal to 0"),
    ([{"t_s": 90000, "requests_per_s": 1}], "t_s: Input should be less than 86400"),
    ([{"t_s": i, "requests_per_s": 1} for i in range(MAX_PROFILE_POINTS + 1)], f"at most {MAX_PROFILE_POINTS}"),
    ([{"t_s": 0, "requests_per_s": 0}], "every rate is 0"),
])
def test_bad_profiles_get_one_line_naming_the_field(profile: list[dict[str, float]], needle: str) -> None:
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict({"workload": {"profile": profile}})
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("text", "needle"), [
    ("t_s,requests_per_s\n", "profile: the profile is empty"),
    ("t,rate\n0,1\n", "missing column(s) t_s, requests_per_s"),
    ("t_s,requests_per_s\n0,1\n0,2\n", "t_s must increase"),
    ("t_s,requests_per_s\n0,-3\n", "profile.requests_per_s: must be from 0"),
    ("t_s,requests_per_s\n0,abc\n", "profile.requests_per_s: not a number at line 2"),
    ("t_s,requests_per_s\n0,nan\n", "not finite"),
    ("t_s,requests_per_s\n" + "".join(f"{i},1\n" for i in range(MAX_PROFILE_POINTS + 1)), "more than 10,000 rows"),
    ("x" * (MAX_PROFILE_CSV_BYTES + 1), "over the limit"),
])
def test_bad_profile_csv(text: str, needle: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_profile_csv(text)
    assert needle in str(info.value)


@pytest.mark.parametrize(("text", "needle"), [
    ("weekly:peak=1", "unknown shape"),
    ("diurnal:peak=1,trough=2,peak_hour=3", "trough ≤ peak"),
    ("diurnal:peak=10,trough=2", "missing peak_hour"),
    ("diurnal:peak=10,trough=2,peak_hour=25", "peak_hour must be from 0 to 24"),
    ("diurnal:peak=x,trough=2,peak_hour=3", "peak is not a number"),
])
def test_bad_shapes(text: str, needle: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_shape(text)
    assert needle in str(info.value)


def test_csv_round_trip_and_old_scenarios_unchanged() -> None:
    pts = parse_profile_csv("t_s,requests_per_s\n0,1.5\n3600,4\n")
    assert [(p.t_s, p.requests_per_s) for p in pts] == [(0.0, 1.5), (3600.0, 4.0)]
    old = Scenario().model_dump(mode="json")
    for key in ("policy", "scale_interval_s", "scale_up_delay_s", "engine_start_s", "warm_pool_replicas",
                "scale_down_delay_s"):
        old["fleet"].pop(key)
    old["workload"].pop("profile")
    again = scenario_from_dict(old)
    assert again == Scenario()
    assert again.fleet.policy == "static" and again.workload.profile is None
    assert math.isclose(plan(again).fleet.gpus_total, plan(Scenario()).fleet.gpus_total)


@settings(max_examples=60, deadline=None)
@given(pts=st.lists(st.tuples(st.floats(min_value=0, max_value=DAY_S - 1), st.floats(min_value=0, max_value=100)),
                    min_size=1, max_size=8, unique_by=lambda p: round(p[0])),
       a=st.floats(min_value=0, max_value=DAY_S), b=st.floats(min_value=0, max_value=DAY_S))
@example(pts=[(0.0, 0.0), (1.0, 1.0), (2.0, 0.0)], a=0.0, b=3117.0)  # a 2 s spike in a long window
def test_profile_integral_and_max_agree_with_sampling(pts: list[tuple[float, float]], a: float, b: float) -> None:
    from planner.spec.profile import ProfilePoint

    pts = sorted((round(t), r) for t, r in pts)
    prof = tuple(ProfilePoint(t_s=t, requests_per_s=r) for t, r in pts)
    lo, hi = min(a, b), max(a, b)
    # the profile's knots (each day's) inside [lo, hi] are on the grid: the trapezoid rule is then
    # exact for a piecewise-linear rate, however narrow a spike between two knots
    knots = [t + k * DAY_S for t, _ in pts for k in range(-1, 2) if lo < t + k * DAY_S < hi]
    grid = np.unique(np.concatenate([np.linspace(lo, hi, 2001), knots]))
    sampled = np.array([profile_rate(prof, t) for t in grid])
    assert profile_max(prof, lo, hi) >= sampled.max() - 1e-9
    assert profile_integral(prof, lo, hi) == pytest.approx(float(np.trapezoid(sampled, grid)), rel=1e-6,
                                                           abs=1e-9 * (1 + hi - lo) * 100)
    # the daily wrap-around is continuous
    assert profile_rate(prof, 0.0) == pytest.approx(profile_rate(prof, DAY_S - 1e-6), abs=1e-6 * 100)
