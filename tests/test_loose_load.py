"""A peak typed alone carries the mean with it (a flat load), in the spec and in the
sidebar; the Autoscaling page starts from the scenario's own load, not a curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner import plan
from planner.spec.scenario import Scenario, scenario_from_dict
from tests.apptest_v2 import new_app_test, use_migrated_sqlite


@pytest.fixture(autouse=True)
def store_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_migrated_sqlite(tmp_path, monkeypatch)


def test_a_peak_without_a_mean_is_a_flat_load() -> None:
    s = scenario_from_dict({"workload": {"peak_requests_per_s": 40.0}})
    assert s.workload.requests_per_s == 40.0 and s.workload.peak_rate == 40.0
    # below the default mean is fine too: it was refused ("cannot be below requests_per_s") before
    assert scenario_from_dict({"workload": {"peak_requests_per_s": 2.0}}).workload.requests_per_s == 2.0
    # a mean given stays the mean
    both = scenario_from_dict({"workload": {"requests_per_s": 10.0, "peak_requests_per_s": 40.0}})
    assert both.workload.requests_per_s == 10.0


def _plan_page():
    at = new_app_test(timeout=120)
    at.run()
    at.switch_page("pages/plan.py").run()
    assert not at.exception, at.exception
    return at


def test_sidebar_mean_follows_a_typed_peak_until_a_mean_is_typed() -> None:
    at = _plan_page()
    at.number_input(key="peak").set_value(40.0).run()
    assert not at.exception
    assert at.number_input(key="rps").value == 40.0
    assert any("mean follows the peak" in c.value for c in at.caption)
    assert at.session_state["_scenario"].workload.requests_per_s == 40.0
    # a typed mean is kept from then on
    at.number_input(key="rps").set_value(12.0).run()
    at.number_input(key="peak").set_value(50.0).run()
    assert at.number_input(key="rps").value == 12.0


def test_autoscale_defaults_to_the_plan_pages_flat_load() -> None:
    at = new_app_test(timeout=180)
    at.run()
    at.switch_page("pages/autoscale.py").run()
    assert not at.exception, at.exception
    assert at.radio(key="as_shape").value.startswith("The scenario's load")
    df = at.table[0].value
    hours = {p: float(str(df.loc["GPU-hours / day", p]).replace(",", "")) for p in ("static", "reactive",
                                                                                    "predictive")}
    # flat: no policy saves anything, and the static fleet is the Plan page's fleet around the clock
    assert hours["reactive"] == pytest.approx(hours["static"]) == pytest.approx(hours["predictive"])
    p = plan(Scenario())
    assert hours["static"] == pytest.approx(p.fleet.gpus_total * 24)
