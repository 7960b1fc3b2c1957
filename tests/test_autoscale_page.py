"""AppTest of the Autoscaling page: the three policies side by side, as the core computes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_v2 import new_app_test, use_migrated_sqlite


@pytest.fixture(autouse=True)
def store_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_migrated_sqlite(tmp_path, monkeypatch)


def _page(shape: str | None = None) -> AppTest:
    at = new_app_test(timeout=180)
    at.run()
    at.switch_page("pages/autoscale.py").run()
    assert not at.exception, at.exception
    if shape is not None:
        at.radio(key="as_shape").set_value(shape).run()
        assert not at.exception, at.exception
    return at


def _gpu_hours(at: AppTest) -> dict[str, float]:
    df = at.table[0].value
    return {p: float(str(df.loc["GPU-hours / day", p]).replace(",", "")) for p in ("static", "reactive", "predictive")}


def test_page_shows_policies_and_elasticity_saves() -> None:
    at = _page("Diurnal shape")
    assert at.title[0].value == "Autoscaling"
    assert not at.error, [e.value for e in at.error]
    # A day whose peak needs several replicas of the default plan (at the page's default 10 req/s the
    # minimum of 2 replicas serves every hour since issue 24's batches grew, and nothing is saved).
    at.number_input(key="as_peak").set_value(200.0).run()
    at.number_input(key="as_trough").set_value(20.0).run()
    assert not at.error, [e.value for e in at.error]
    hours = _gpu_hours(at)
    assert hours["reactive"] < hours["static"] and hours["predictive"] < hours["static"]
    assert at.expander  # derivations shown
    # a flat day (trough = peak): nothing to save
    at.number_input(key="as_trough").set_value(at.number_input(key="as_peak").value).run()
    assert not at.exception, at.exception
    flat = _gpu_hours(at)
    assert flat["reactive"] == pytest.approx(flat["static"]) == pytest.approx(flat["predictive"])


def test_bad_shape_is_a_message_not_a_traceback() -> None:
    at = _page("Diurnal shape")
    at.number_input(key="as_trough").set_value(at.number_input(key="as_peak").value * 2).run()
    assert not at.exception
    assert any("trough" in e.value for e in at.error)


def test_simulate_button_fills_attainment_with_progress() -> None:
    at = _page()
    at.number_input(key="as_int").set_value(21600.0).run()
    at.number_input(key="as_reqs").set_value(50).run()
    assert _table_cell(at, "Simulated attainment (day)", "reactive") == "—"
    next(b for b in at.button if "Simulate" in b.label).click().run()
    assert not at.exception, at.exception
    for pol in ("static", "reactive", "predictive"):
        value = _table_cell(at, "Simulated attainment (day)", pol)
        assert value != "—" and 0 < float(value.rstrip("%")) <= 100


def _table_cell(at: AppTest, row: str, col: str) -> str:
    return str(at.table[0].value.loc[row, col])
