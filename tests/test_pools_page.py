"""The Fleet page with disaggregated pools on their own GPU and TP (issue 25, part 5): the
sidebar's pool block sets them, the page shows the xPyD ratio and each pool's GPU, layout,
GPUs and price, and the numbers are the plan's."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planner import plan
from tests.apptest_v2 import new_app_test, use_migrated_sqlite
from tests.test_app_review import visible_text

BASE = {"model": "llama-3.1-70b", "gpu": "h200-sxm", "wd": "fp8", "tp": "2", "mode": "disaggregated", "rps": "20"}


@pytest.fixture(autouse=True)
def store_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_migrated_sqlite(tmp_path, monkeypatch)


def _fleet(params: dict[str, str]) -> AppTest:
    at = new_app_test()
    at.query_params.update(params)
    at.run()
    at.switch_page("pages/fleet.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_the_pool_block_sets_each_pools_gpu_and_tp_and_the_fleet_page_shows_them() -> None:
    at = _fleet(BASE)
    before = _metric(at, "GPUs total")
    at.selectbox(key="pool_prefill_gpu").set_value("h100-sxm").run()
    at.selectbox(key="pool_prefill_tp").set_value(4).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    sc = at.session_state["_scenario"]
    assert sc.prefill is not None and sc.prefill.gpu == "h100-sxm" and sc.prefill.parallel.tp == 4
    assert sc.decode is None
    p = plan(sc)
    text = visible_text(at)
    assert f"h100-sxm TP4 × PP1 × EP1 (4 GPUs per replica), {p.pools.prefill.gpus:,.0f} GPUs, $3.00/GPU-hour" in text
    assert f"h200-sxm TP2 × PP1 × EP1 (2 GPUs per replica), {p.pools.decode.gpus:,.0f} GPUs, $2.75/GPU-hour" in text
    assert p.pools.xpyd and p.pools.xpyd in text
    gpus = [m.value for m in at.metric if m.label == "GPUs total"]
    assert f"{p.fleet.gpus_total:,.0f}" in gpus  # the disaggregated column is the pools' plan
    assert before != "" and math.isfinite(p.fleet.gpus_total)
    # Back to "same": the pool is unset again.
    at.selectbox(key="pool_prefill_gpu").set_value("same").run()
    at.selectbox(key="pool_prefill_tp").set_value("same").run()
    assert at.session_state["_scenario"].prefill is None


def test_the_pool_block_is_not_drawn_when_colocated() -> None:
    at = _fleet({**BASE, "mode": "colocated"})
    assert not [s for s in at.selectbox if s.key == "pool_prefill_gpu"]


def test_a_link_with_pools_reopens_them() -> None:
    at = _fleet(BASE)
    at.selectbox(key="pool_decode_gpu").set_value("h100-sxm").run()
    at.selectbox(key="pool_decode_tp").set_value(4).run()
    link = dict(at.query_params)
    assert "s" in link  # the pools ride in the stateless token
    fresh = _fleet(link)
    assert fresh.session_state["_scenario"] == at.session_state["_scenario"]
    assert fresh.selectbox(key="pool_decode_gpu").value == "h100-sxm" and fresh.selectbox(key="pool_decode_tp").value == 4
