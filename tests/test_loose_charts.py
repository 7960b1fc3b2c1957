"""Layout and chart loose ends: attention named by its heads, no "None" cells in the
catalog, whole sequence counts, one HBM figure, labelled Parallelism points, and (in
a real browser) metric labels, values and multiselect chips that fit at 1024 and 1440 px on
every page."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from planner import Scenario
from planner.spec.catalog import load_catalog
from planner.views import hbm_accounting, memory_breakdown
from tests.apptest_v2 import new_app_test


@pytest.mark.parametrize(("model_id", "kind"), [
    ("llama-2-7b", "MHA"),     # 32 KV heads for 32 query heads
    ("llama-3.1-8b", "GQA"),   # 8 for 32
    ("deepseek-v3", "MLA"),
])
def test_attention_is_named_by_its_heads(model_id: str, kind: str) -> None:
    assert load_catalog().models[model_id].attention_kind == kind


def _page(path: str):
    at = new_app_test(timeout=120)
    at.run()
    at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def test_catalog_tables_have_no_none_cells_and_name_attention() -> None:
    at = _page("pages/catalog.py")
    gpus, models = at.dataframe[0].value, at.dataframe[1].value
    for df in (gpus, models):
        assert not df.isna().any().any(), df.columns[df.isna().any()].tolist()
    row = models.set_index("id").loc["llama-2-7b"]
    assert row["attention"] == "MHA" and row["experts"] == "dense"
    assert {"HBM (GB, datasheet)", "HBM (GB, CUDA-visible)"} <= set(gpus.columns)


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200-sxm"])
@pytest.mark.parametrize("util", [None, 0.9])
def test_one_hbm_figure_is_what_the_split_adds_up_to(gpu: str, util: float | None) -> None:
    s = Scenario(gpu=gpu, model="llama-3.1-8b", serving={"memory_utilization": util})
    hbm = hbm_accounting(s)
    assert sum(r["bytes"] for r in memory_breakdown(s)) == pytest.approx(hbm["bytes"])
    g = load_catalog().gpus[gpu]
    assert hbm["label"] == ("HBM per GPU (CUDA-visible)" if util else "HBM per GPU (datasheet)")
    assert hbm["bytes"] == (g.cuda_visible_hbm_bytes if util else g.hbm_bytes)


def test_memory_page_shows_the_figure_its_bar_sums_to_and_whole_sequences() -> None:
    at = _page("pages/memory.py")
    labels = {m.label: m.value for m in at.metric}
    hbm_label = next(k for k in labels if k.startswith("HBM per GPU ("))
    assert hbm_label == "HBM per GPU (CUDA-visible)"  # the default scenario sets memory utilization
    assert labels["Max sequences"].replace(",", "").isdigit()
    assert any("CUDA-visible" in h.value for h in at.subheader)


def test_parallelism_points_are_labelled_and_sequences_whole() -> None:
    at = _page("pages/parallelism.py")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert "text" in marks and "point" in marks
    seqs = at.dataframe[0].value["max sequences"]
    assert all(v.replace(",", "").isdigit() for v in seqs)


def test_plan_page_whole_sequences() -> None:
    at = _page("pages/plan.py")
    assert next(m.value for m in at.metric if m.label == "Max sequences").replace(",", "").isdigit()


# Every page with metrics or multiselects, by its URL path ("" is Plan), and a label it draws
# once its numbers are in (the page has finished its first run).
LAYOUT_PAGES = {"": "TTFT mean · queueing included", "roofline": "Ridge point", "memory": "Max sequences",
                "latency": "ITL mean · no queueing", "fleet": None, "tail": "Goodput", "autoscale": None,
                "compare": None, "explore": "Candidates meeting the SLO", "scenarios": None, "probe": None}
# Metric labels and values Streamlit cuts with an ellipsis are wider inside than their box.
_CUT_JS = """() => [...document.querySelectorAll(
        "[data-testid='stMetricLabel'] .stMarkdownEllipsis, [data-testid='stMetricValue'] > div")]
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"""
# A multiselect whose chosen chips do not all fit: Streamlit 1.67 scrolls its tags container
# sideways (marking it data-can-scroll-end) and fades the last ones; or a chip's own text cut.
_CHIPS_JS = """() => [...document.querySelectorAll("[data-testid='stMultiSelectTagsContainer']")]
    .filter(c => c.offsetParent !== null)
    .filter(c => c.scrollWidth > c.clientWidth + 1
        || [...c.querySelectorAll('[data-tag] > span')].some(s => s.scrollWidth > s.clientWidth + 1))
    .map(c => [...c.querySelectorAll('[data-tag]')].map(t => t.textContent).join(', '))"""


def test_metric_labels_and_chips_fit_at_1024_and_1440_px_on_every_page() -> None:
    from tests.browser_support import CHROMIUM, LAUNCH_ARGS, chromium_or_skip, migrated_server, settled

    chromium_or_skip()
    from playwright.sync_api import expect, sync_playwright

    problems: list[str] = []
    with tempfile.TemporaryDirectory() as d, migrated_server(Path(d) / "s.db") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            for width in (1024, 1440):
                page = browser.new_page(viewport={"width": width, "height": 900})
                for path, ready in LAYOUT_PAGES.items():
                    page.goto(f"{url}/{path}")
                    settled(page, timeout_ms=120_000)
                    if ready is not None:  # the first plan or sweep on a busy machine
                        label = page.locator("[data-testid='stMetricLabel']", has_text=ready)
                        expect(label.first).to_be_visible(timeout=120_000)
                    settled(page, timeout_ms=120_000)
                    if path == "":
                        assert page.locator("[data-testid='stMetricLabel'] .stMarkdownEllipsis").count() >= 8
                    if path in ("explore", "roofline", "compare"):  # the check sees chips where there are some
                        expect(page.locator("[data-testid='stMultiSelectTagsContainer'] [data-tag]").first).to_be_visible()
                    for kind, js in (("cut", _CUT_JS), ("clipped chips", _CHIPS_JS)):
                        if found := page.evaluate(js):
                            problems.append(f"/{path} at {width} px, {kind}: {found}")
                page.close()
        finally:
            browser.close()
    assert problems == []


def test_report_operating_point_lies_on_its_curve_and_legends_are_never_cut() -> None:
    from planner import plan
    from planner.views.report.charts import _CONFIG, _latency

    s = Scenario()
    spec = _latency(s, plan(s))
    curve = spec["layer"][0]["data"]["values"]
    op = spec["layer"][2]["data"]["values"][0]
    assert any(r["itl_ms"] == pytest.approx(op["itl_ms"]) and r["tok_s"] == pytest.approx(op["tok_s"]) for r in curve)
    assert _CONFIG["legend"]["labelLimit"] == 0
