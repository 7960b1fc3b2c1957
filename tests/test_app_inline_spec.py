"""Inline GPU and model specs through the app (AppTest): a share link or a saved scenario
with its own GPU (a 2 GB one) or model keeps it (the sidebar says "inline GPU: ..."),
plans with it as the CLI does ("does not fit"), and "Update" after changing only the
description saves version 2 equal to version 1 but for the description."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from planner import Scenario, get_gpu, get_model, share_token
from planner.store import get_revision, get_scenario, make_engine, save_scenario
from tests.apptest_v2 import new_app_test, use_migrated_sqlite

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def store_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_migrated_sqlite(tmp_path, monkeypatch)


def _tiny_gpu(gpu_id: str = "tiny-2gb") -> dict[str, Any]:
    g = get_gpu("h100-sxm").model_dump(mode="json")
    g.update(id=gpu_id, name="Tiny 2 GB", hbm_bytes=2e9, cuda_visible_hbm_bytes=None)
    return g


def _own_model(model_id: str = "my-8b") -> dict[str, Any]:
    m = get_model("llama-3.1-8b").model_dump(mode="json")
    m.update(id=model_id, name="My 8B (24 layers)", layers=24)
    m.pop("params", None)
    m.pop("active_params", None)
    return m


def _open(params: dict[str, str], page: str = "plan") -> AppTest:
    at = new_app_test()
    at.query_params.update(params)
    at.run()
    if page != "plan":
        at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _texts(at: AppTest, *kinds: str) -> list[str]:
    return [str(e.value) for kind in kinds for e in getattr(at, kind)]


def test_share_link_with_an_inline_gpu_plans_on_it_like_the_cli(tmp_path: Path) -> None:
    scenario = Scenario(name="tiny", gpu=_tiny_gpu())
    at = _open({"s": share_token(scenario)})
    assert at.selectbox(key="gpu").value == "tiny-2gb"  # not h100-sxm
    assert any("inline GPU: Tiny 2 GB, 2.00 GB" in c for c in _texts(at, "caption"))
    assert not any("h100-sxm" in c for c in _texts(at, "caption")[:1])
    page_says = " ".join(_texts(at, "error", "warning"))
    file = tmp_path / "tiny.json"
    file.write_text(scenario.model_dump_json())
    cli = subprocess.run([sys.executable, "-m", "planner", "plan", str(file)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert "does not fit" in cli.stdout + cli.stderr
    assert "does not fit" in page_says and "tiny-2gb (2 GB)" in page_says
    assert at.metric[0].label == "GPUs" and at.metric[0].value == "—"  # no fleet of H100s


def _update_only_the_description(slug: str) -> AppTest:
    at = _open({"scenario": slug}, "scenarios")
    assert not at.error, _texts(at, "error")
    at.text_input(key="sc_desc").set_value("only this changed").run()
    at.button(key="sc_update").click().run()
    assert not at.exception and not at.error, _texts(at, "error")
    return at


@pytest.mark.parametrize("gpu_id, model_id", [("tiny-2gb", "my-8b"), ("h100-sxm", "llama-3.1-8b")],
                         ids=["own-ids", "catalog-ids"])
def test_update_keeps_inline_gpu_and_model_specs(store_db: Path, gpu_id: str, model_id: str) -> None:
    """Own ids, and ids the catalog also has (the spec differs: the catalog's must not win)."""
    engine = make_engine(f"sqlite:///{store_db}")
    scenario = Scenario(name="inline both", gpu=_tiny_gpu(gpu_id), model=_own_model(model_id), parallel={"tp": 2})
    v1 = save_scenario(engine=engine, scenario=scenario, name="inline both", description="first")
    assert isinstance(v1.scenario.gpu, type(scenario.gpu)) and not isinstance(v1.scenario.gpu, str)
    at = _update_only_the_description(v1.slug)
    assert any("inline GPU: Tiny 2 GB" in c for c in _texts(at, "caption"))
    assert any("inline model: My 8B (24 layers)" in c for c in _texts(at, "caption"))
    v2 = get_scenario(engine=engine, ref=v1.slug)
    assert v2.version == 2 and v2.description == "only this changed"
    assert v2.payload == v1.payload  # gpu and model still the inline specs, every other input as saved
    assert v2.payload["gpu"]["hbm_bytes"] == 2e9 and v2.payload["model"]["layers"] == 24
    assert get_revision(engine=engine, ref=v1.slug, version=2).frozen_catalog == v1.frozen_catalog
    engine.dispose()


def test_a_value_no_widget_offers_is_kept(store_db: Path) -> None:
    """TP 3 is not among the sidebar's TP choices (1, 2, 4, 8, 16): it stays TP 3, it is not reset."""
    engine = make_engine(f"sqlite:///{store_db}")
    model = _own_model("odd-heads")
    model.update(heads=24, kv_heads=6, hidden=3072)
    v1 = save_scenario(engine=engine, scenario=Scenario(name="tp three", model=model, parallel={"tp": 3}),
                       name="tp three")
    at = _update_only_the_description(v1.slug)
    assert at.selectbox(key="tp").value == 3
    v2 = get_scenario(engine=engine, ref=v1.slug)
    assert v2.version == 2 and v2.payload == v1.payload
    engine.dispose()


def test_a_fresh_save_offers_no_update(store_db: Path) -> None:
    at = _open({}, "scenarios")
    at.text_input(key="sc_name").set_value("fresh one")
    at.text_input(key="sc_desc").set_value("a description")
    at.text_input(key="sc_tags").set_value("a, b").run()
    at.button(key="sc_save").click().run()
    assert not at.exception and not at.error, _texts(at, "error")
    assert any("version 1" in s for s in _texts(at, "success"))
    labels = [b.label for b in at.button]
    assert not any(label.startswith("Update ") for label in labels), labels
    assert any("unchanged since it was loaded: nothing to save" in c for c in _texts(at, "caption"))
    at.text_input(key="sc_desc").set_value("a new description").run()  # a real change offers the update
    assert any(b.label == "Update fresh-one to version 2" for b in at.button)
    stored = json.loads(get_scenario(engine=make_engine(f"sqlite:///{store_db}"), ref="fresh-one")
                        .model_dump_json())
    assert stored["version"] == 1 and stored["tags"] == ["a", "b"]
