"""A lone surrogate (``"\\ud800"`` in JSON) is refused where text enters, naming the
field (issue 23, item 6): it used to reach the store (UnicodeEncodeError), a share
token (PydanticSerializationError: the Plan page unusable) and ``report`` (exit 1,
"internal error")."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from planner import Scenario, ScenarioError, scenario_from_dict, scenario_from_token
from planner.io.jsonfile import lone_surrogate_path, parse_json
from planner.spec.catalog import get_model
from planner.store import import_scenario, make_engine, parse_import_bytes, save_scenario
from planner.store.migrate import upgrade
from tests.apptest_v2 import new_app_test, use_migrated_sqlite

ROOT = Path(__file__).resolve().parents[1]


def _inline_model(name: str) -> dict[str, object]:
    spec = get_model("llama-3.1-8b").model_dump(mode="json")
    return {**spec, "id": "mine", "name": name}


def _token(data: dict[str, object]) -> str:
    """A share token built by hand, as a stranger would (share_token refuses to make one)."""
    raw = json.dumps(data, sort_keys=True).encode()  # ensure_ascii: the surrogate travels as \\ud800
    blob = b"R1" + hashlib.sha256(raw).digest()[:8] + zlib.compress(raw)
    return base64.urlsafe_b64encode(blob).rstrip(b"=").decode()


def test_the_path_of_the_first_lone_surrogate() -> None:
    assert lone_surrogate_path({"a": [1, {"b": "ok"}, {"c": "x\ud800"}]}) == "a.2.c"
    assert lone_surrogate_path({"ok": "😀 ünïcode"}) is None
    assert lone_surrogate_path({"k\udfff": 1}) == "k\\udfff"


def test_json_with_a_lone_surrogate_is_one_error_naming_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"^doc: model\.name holds a lone surrogate"):
        parse_json('{"model": {"name": "a\\ud800b"}}', source="doc")


@pytest.mark.parametrize("data", [{"name": "x\ud800"}, {"model": _inline_model("x\udc00y")}])
def test_a_scenario_refuses_a_lone_surrogate_naming_the_field(data: dict[str, object]) -> None:
    field = "name" if "name" in data else "model.name"
    with pytest.raises(ScenarioError, match=rf"^{field}: holds a lone surrogate"):
        scenario_from_dict(data)


def test_a_share_token_with_a_surrogate_model_name_is_a_one_line_refusal() -> None:
    with pytest.raises(ScenarioError, match=r"^share link: model\.name holds a lone surrogate"):
        scenario_from_token(_token({"model": _inline_model("bad\ud800")}))


def test_the_plan_page_says_why_and_stays_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_migrated_sqlite(tmp_path, monkeypatch)
    at = new_app_test()
    at.query_params.update({"s": _token({"model": _inline_model("bad\ud800")})})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any("model.name holds a lone surrogate" in e for e in errors), errors
    assert at.number_input(key="rps").value == Scenario().workload.requests_per_s  # the default plans


def test_an_import_with_a_surrogate_is_refused_and_nothing_is_saved(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    engine = make_engine(url)
    doc = b'{"name": "ok", "description": "a\\ud800", "scenario": {"name": "ok"}}'
    with pytest.raises(ScenarioError, match=r"description holds a lone surrogate"):
        import_scenario(engine=engine, document=parse_import_bytes(doc, source="'up.json'"))
    with pytest.raises(ScenarioError, match=r"^description: holds a lone surrogate"):
        save_scenario(engine=engine, scenario=Scenario(), name="n", description="d\ud800", tags=[])
    with pytest.raises(ScenarioError, match=r"^tags: holds a lone surrogate"):
        save_scenario(engine=engine, scenario=Scenario(), name="n", description="", tags=["t\udfff"])
    from planner.store import list_scenarios

    assert list_scenarios(engine=engine) == []


def test_report_with_such_a_name_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"model": _inline_model("bad\ud800")}))
    proc = subprocess.run([sys.executable, "-m", "planner", "report", str(path), "--out", str(tmp_path / "r.html")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"error: {path}: model.name holds a lone surrogate (\\ud800-\\udfff), which is not " \
                                  "text; remove that character"
    assert not (tmp_path / "r.html").exists()
