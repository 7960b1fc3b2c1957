"""AppTest: each page runs for the default scenario and reacts to its widgets."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def app() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_plan_page_h100_to_h200_raises_batch1_decode_by_bandwidth_ratio(app: AppTest) -> None:
    app.number_input(key="batch").set_value(1).run()
    before = float(_metric(app, "tok/s per sequence").replace(",", ""))
    app.selectbox(key="gpu").set_value("h200-sxm").run()
    assert not app.exception
    after = float(_metric(app, "tok/s per sequence").replace(",", ""))
    # Memory-bound batch-1 decode scales by ~4.8 / 3.35 (less the fixed per-step overhead).
    assert 1.3 < after / before <= 4.8 / 3.35 + 1e-6


def test_plan_page_shows_invalid_tp_as_message(app: AppTest) -> None:
    app.selectbox(key="model").set_value("llama-2-7b").run()
    app.selectbox(key="tp").set_value(8).run()
    assert not app.exception
    app.selectbox(key="gpu").set_value("l40s").run()
    assert not app.exception
    assert any("TP over PCIe" in w.value for w in app.warning)
