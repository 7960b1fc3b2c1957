"""Page-level bounds: the query params that reached the generic error box, the Tail page's
simulated work past MAX_SIM_TOKEN_STEPS, and the Autoscaling day's intervals and chart rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from pages._charts import MAX_CHART_POINTS
from planner import Scenario
from planner.errors import ScenarioError
from planner.simulate import MAX_SIM_TOKEN_STEPS
from planner.sizing.autoscale import MAX_DAY_INTERVALS, MIN_DAY_INTERVAL_S, compare_policies
from tests.apptest_v2 import new_app_test, use_migrated_sqlite


@pytest.fixture(autouse=True)
def store_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_migrated_sqlite(tmp_path, monkeypatch)


def _run(params: dict[str, str], page: str) -> AppTest:
    at = new_app_test(timeout=300)
    at.query_params.update(params)
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _texts(at: AppTest, kind: str) -> list[str]:
    return [str(e.value) for e in getattr(at, kind)]


def test_autoscale_tiny_rate_is_a_one_line_warning() -> None:
    at = _run({"rps": "0.000001"}, "autoscale")
    # The default day is the scenario's own (flat) load: no "Peak req/s" field to clamp; the
    # diurnal shape has one, and the linked 1e-6 req/s is below its minimum.
    at.radio(key="as_shape").set_value("Diurnal shape").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(w.startswith("Peak req/s: the scenario's 1e-06 is below this field's minimum of 0.001")
               for w in _texts(at, "warning")), _texts(at, "warning")


def test_tail_tiny_rate_and_itl_is_a_one_line_warning() -> None:
    at = _run({"rps": "0.000001", "itl_ms": "0.001"}, "tail")
    assert any(w.startswith("Offered req/s: the scenario's 1e-06 is outside this field's range")
               for w in _texts(at, "warning")), _texts(at, "warning")


def test_tail_page_past_the_token_cap_names_the_fields() -> None:
    # /tail?output=100000&prompt=1000 with 20,000 requests raised MemoryError before.
    at = _run({"output": "100000", "prompt": "1000"}, "tail")
    at.toggle(key="tl_custom").set_value(True).run()
    at.number_input(key="tl_requests").set_value(20_000).run()
    assert not at.exception, [e.value for e in at.exception]
    errors = _texts(at, "error")
    assert any("requests × (workload.output_tokens" in e and f"{MAX_SIM_TOKEN_STEPS:,}" in e
               and "20,000 requests" in e for e in errors), errors


def test_too_many_intervals_is_refused_naming_the_field() -> None:
    s = Scenario(fleet={"scale_interval_s": 10.0})
    with pytest.raises(ScenarioError, match=r"^fleet.scale_interval_s: 10 s cuts the day into 8,640 control "
                                            rf"intervals, over the limit of {MAX_DAY_INTERVALS:,}"):
        compare_policies(s)


def test_autoscale_page_clamps_a_short_interval_and_bins_its_chart() -> None:
    at = new_app_test(timeout=600)
    at.run()
    at.switch_page("pages/autoscale.py").run()
    at.number_input(key="as_int").set_value(MIN_DAY_INTERVAL_S).run()
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("vega_lite_chart")
    rows = [pa.ipc.open_stream(d.data.data).read_all().num_rows for c in charts for d in c.proto.datasets]
    # the traffic series and the replica series (replicas, replicas needed): each binned to MAX_CHART_POINTS
    assert sorted(rows) == [MAX_DAY_INTERVALS // 2, 2 * (MAX_DAY_INTERVALS // 2)], rows
    assert MAX_DAY_INTERVALS // 2 <= MAX_CHART_POINTS
    assert any(f"{MAX_DAY_INTERVALS:,} intervals drawn as" in c for c in _texts(at, "caption")), _texts(at, "caption")
