"""AppTest: each page runs for the default scenario and reacts to its widgets.

Expected ratios come from the catalog's datasheet numbers or from the physics'
structure (KV bytes halve with fp8, weights split over TP), never from the
function under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planner import get_gpu
from planner.defaults import DEFAULT_STEP_OVERHEAD_S
from tests.apptest_v2 import new_app_test

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["plan", "roofline", "memory", "latency", "parallelism", "catalog"]


@pytest.fixture()
def app() -> AppTest:
    at = new_app_test()
    at.run()
    assert not at.exception, at.exception
    return at


def _goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _num(text: str) -> float:
    return float(text.replace(",", "").split()[0])


def _gb(text: str) -> float:
    value, unit = text.replace(",", "").split()
    return float(value) * {"GB": 1e9, "MB": 1e6, "KB": 1e3}[unit]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_for_the_default_scenario(app: AppTest, page: str) -> None:
    _goto(app, page)
    assert not app.error, [e.value for e in app.error]
    assert app.title[0].value


def test_plan_page_h100_to_h200_raises_batch1_decode_by_bandwidth_ratio(app: AppTest) -> None:
    app.number_input(key="batch").set_value(1).run()
    before = _num(_metric(app, "tok/s per sequence"))
    app.selectbox(key="gpu").set_value("h200-sxm").run()
    assert not app.exception
    after = _num(_metric(app, "tok/s per sequence"))
    ratio = get_gpu("h200-sxm").hbm_bytes_per_s / get_gpu("h100-sxm").hbm_bytes_per_s  # 4.8 / 3.35
    # Memory-bound batch-1 decode: the bytes term scales by the bandwidth ratio; the
    # fixed per-step overhead does not.
    assert after > before
    assert (1 / before - DEFAULT_STEP_OVERHEAD_S) / (1 / after - DEFAULT_STEP_OVERHEAD_S) == pytest.approx(ratio, rel=0.01)


def test_plan_page_model_change_moves_the_headline(app: AppTest) -> None:
    app.number_input(key="batch").set_value(1).run()
    before = _num(_metric(app, "tok/s per sequence"))
    app.selectbox(key="model").set_value("llama-3.1-70b").run()
    app.selectbox(key="wd").set_value("fp8").run()
    app.selectbox(key="tp").set_value(2).run()
    assert not app.exception
    # 70 GB of fp8 weights over 2 GPUs (35 GB each) vs 16 GB of bf16 on one: ~2.2× the bytes per step.
    assert _num(_metric(app, "tok/s per sequence")) < before / 1.5


def test_plan_page_shows_tp_over_pcie_warning(app: AppTest) -> None:
    app.selectbox(key="model").set_value("llama-2-7b").run()
    app.selectbox(key="tp").set_value(8).run()
    app.selectbox(key="gpu").set_value("l40s").run()
    assert not app.exception
    assert any("TP over PCIe" in w.value for w in app.warning)


def test_memory_page_fp8_kv_doubles_max_sequences(app: AppTest) -> None:
    _goto(app, "memory")
    before = _num(_metric(app, "Max sequences"))
    app.selectbox(key="kd").set_value("fp8").run()
    assert not app.exception
    assert _num(_metric(app, "Max sequences")) == pytest.approx(2 * before, rel=2e-3)  # 1-byte vs 2-byte elements


def test_memory_page_tp2_halves_weights_per_gpu(app: AppTest) -> None:
    _goto(app, "memory")
    before = _gb(_metric(app, "Weights per GPU"))
    app.selectbox(key="tp").set_value(2).run()
    assert not app.exception
    assert _gb(_metric(app, "Weights per GPU")) == pytest.approx(before / 2, rel=2e-3)


def test_roofline_page_ridge_follows_the_gpu_and_compares_several(app: AppTest) -> None:
    _goto(app, "roofline")
    h100 = get_gpu("h100-sxm")
    assert _num(_metric(app, "Ridge point")) == pytest.approx(h100.flops_per_s.bf16 / h100.hbm_bytes_per_s, abs=1)
    app.multiselect(key="roof_gpus").set_value(["h100-sxm", "h200-sxm"]).run()
    assert not app.exception
    chart = app.get("vega_lite_chart")[0].proto
    text = chart.spec + "".join(str(d) for d in chart.datasets)
    assert "h200-sxm bf16" in text and "h100-sxm bf16" in text
    app.selectbox(key="gpu").set_value("h200-sxm").run()
    h200 = get_gpu("h200-sxm")
    assert _num(_metric(app, "Ridge point")) == pytest.approx(h200.flops_per_s.bf16 / h200.hbm_bytes_per_s, abs=1)


def test_latency_page_ttft_grows_faster_than_prompt(app: AppTest) -> None:
    _goto(app, "latency")
    before = _num(_metric(app, "Prefill time"))
    app.number_input(key="prompt").set_value(8000).run()
    assert not app.exception
    # Compute-bound prefill: linear in tokens plus the causal-attention n² term.
    assert _num(_metric(app, "Prefill time")) > 3.9 * before


def test_parallelism_page_lists_layouts_and_marks_current(app: AppTest) -> None:
    _goto(app, "parallelism")
    df = app.dataframe[0].value
    assert {"TP1·PP1·EP1", "TP2·PP1·EP1"} <= set(df["layout"])
    assert df.loc[df["current"], "layout"].tolist() == ["TP1·PP1·EP1"]
    assert not (df["layout"].str.contains("EP2")).any()  # EP needs an MoE model


@pytest.mark.parametrize(("key", "value", "field"), [
    ("price", 0.0, "cost.usd_per_gpu_hour"),
    ("prefix", 5000, "prefix_tokens"),
    ("tp", 16, "parallel.tp"),
])
def test_invalid_input_shows_a_message_next_to_the_widget(app: AppTest, key: str, value: object, field: str) -> None:
    widget = app.selectbox(key=key) if key == "tp" else app.number_input(key=key)
    widget.set_value(value).run()
    assert not app.exception
    assert any(field in e.value for e in app.sidebar.error), [e.value for e in app.sidebar.error]
    assert any("not valid" in e.value for e in app.main.error)


def test_query_params_reproduce_the_view() -> None:
    at = new_app_test()
    at.query_params.update({"gpu": "h200-sxm", "model": "llama-3.1-70b", "wd": "fp8", "tp": "2"})
    at.run()
    assert not at.exception
    assert at.selectbox(key="gpu").value == "h200-sxm"
    assert at.selectbox(key="tp").value == 2
    assert "llama-3.1-70b on h200-sxm" in at.caption[0].value


LLAMA_1B = {  # Llama-3.2-1B's config.json shapes
    "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_hidden_layers": 16, "vocab_size": 128256, "tie_word_embeddings": True,
    "max_position_embeddings": 131072, "head_dim": 64,
}


def test_catalog_import_makes_the_model_current(app: AppTest) -> None:
    _goto(app, "catalog")
    app.text_area(key="hf_text").set_value(json.dumps(LLAMA_1B))
    app.text_input(key="hf_id").set_value("my-llama-1b")
    app.button(key="hf_import").click().run()
    assert not app.exception
    assert not app.error, [e.value for e in app.error]
    assert app.selectbox(key="model").value == "my-llama-1b"
    app.run()
    assert app.caption[0].value.startswith("Sidebar scenario: my-llama-1b on h100-sxm")
    _goto(app, "memory")
    # 2 × 16 layers × 8 KV heads × 64 head dim × 2 bytes = 32,768 bytes per token
    assert _metric(app, "KV per token") == "32.8 KB"
    _goto(app, "catalog")
    models = app.dataframe[1].value  # the Models tab lists it with its counted parameters
    row = models[models["id"] == "my-llama-1b"].iloc[0]
    assert row["source"] == "imported" and row["KV heads"] == 8


def test_catalog_import_bad_config_is_a_message(app: AppTest) -> None:
    _goto(app, "catalog")
    app.text_area(key="hf_text").set_value(json.dumps({**LLAMA_1B, "num_key_value_heads": 5}))
    app.button(key="hf_import").click().run()
    assert not app.exception
    assert any("num_key_value_heads" in e.value or "num_attention_heads" in e.value for e in app.error)
    app.text_area(key="hf_text").set_value("{not json")
    app.button(key="hf_import").click().run()
    assert any("not valid JSON" in e.value for e in app.error)
