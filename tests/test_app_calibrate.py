"""AppTest of the Calibrate page: upload a user's benchmark files, see them beside the
prediction (a chart per metric and load), fit, use and save; bad files are one message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.store import list_probe_runs
from planner.store.db import make_engine
from tests.apptest_v2 import new_app_test, use_migrated_sqlite

DATA = Path(__file__).parent / "data" / "bench"


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = use_migrated_sqlite(tmp_path, monkeypatch)
    at = new_app_test()
    at.run()
    at.switch_page("pages/calibrate.py").run()
    assert not at.exception
    return at, db


def chart_data(chart) -> list[dict]:
    """The rows a Vega-Lite chart element carries (inline, or as an Arrow dataset)."""
    import pyarrow as pa

    spec = json.loads(chart.proto.spec)
    if isinstance(spec.get("data"), dict) and "values" in spec["data"]:
        return list(spec["data"]["values"])
    rows: list[dict] = []
    for ds in chart.proto.datasets:
        rows += pa.ipc.open_stream(ds.data.data).read_all().to_pylist()
    return rows


def upload(at, *names: str):
    files = [(n, (DATA / n).read_bytes(), "application/json") for n in names]
    at.file_uploader(key="cb_files").set_value(files).run()
    assert not at.exception, at.exception
    return at


def test_a_users_files_beside_the_prediction_then_fit_use_and_save(page) -> None:
    at, db = page
    # the sidebar default is an H100 (the vLLM file's Llama 8B taken as the served model via its catalog name)
    upload(at, "vllm_serve_llama8b_c16.json", "sglang_bench_serving.jsonl")
    errors = [e.value for e in at.error]
    if errors:  # the sidebar's default model is not the files' model: that is the one-line mismatch
        assert len(errors) == 2 and all("model" in e and "the file says" in e for e in errors)
        at.sidebar.selectbox(key="model").set_value("llama-3.1-8b").run()
        assert not at.error, [e.value for e in at.error]
    charts = at.get("vega_lite_chart")
    assert charts, "no chart of measured beside predicted"
    data = chart_data(charts[0])
    assert {d["source"] for d in data} == {"measured", "predicted"}
    assert {d["metric"] for d in data} >= {"TTFT (ms)", "TPOT (ms)"}
    assert {d["load"] for d in data} == {1, 8, 16, 32}
    table = at.dataframe[0].value
    assert set(table["run"]) == {"vllm:vllm_serve_llama8b_c16.json", "sglang:sglang_bench_serving.jsonl"}
    at.button(key="cb_fit").click().run()
    assert not at.exception
    cal, calibrated = at.session_state["cb_cal"]
    assert cal.cross_validation == "leave-one-run-out"
    assert calibrated.efficiency.calibrated_from == "vllm:vllm_serve_llama8b_c16.json, sglang:sglang_bench_serving.jsonl"
    assert any("leave-one-run-out" in m.value for m in at.markdown)
    assert len(at.get("vega_lite_chart")) == 2
    at.button(key="cb_save_runs").click().run()
    assert any("Saved as store runs" in s.value for s in at.success)
    assert len(list_probe_runs(engine=make_engine(f"sqlite:///{db}"))) == 2
    at.button(key="cb_save").click().run()
    assert any(s.value.startswith("Saved as calibrated") for s in at.success)
    at.button(key="cb_use").click().run()
    assert not at.exception


def test_a_hostile_file_is_one_message_and_nothing_else(page, tmp_path: Path) -> None:
    at, _ = page
    bad = json.loads((DATA / "vllm_serve_llama8b_c16.json").read_text()) | {"median_ttft_ms": float("nan")}
    at.file_uploader(key="cb_files").set_value([("bad.json", json.dumps(bad).encode(), "application/json")]).run()
    assert not at.exception
    assert [e.value for e in at.error] == ["bad.json.median_ttft_ms: NaN is not a measurement"]
    assert not at.get("vega_lite_chart")
