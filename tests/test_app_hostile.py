"""AppTest with a stranger's links and a broken store: hostile query parameters
are one message naming the parameter, the database password is never on the
page, and an infeasible plan shows "—" (never "nan"/"inf") on every page."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from streamlit.testing.v1 import AppTest

from planner import Scenario
from planner.store import make_engine, save_scenario
from planner.store.limits import ID_MAX, REF_MAX_CHARS
from tests.apptest_v2 import new_app_test, use_migrated_sqlite

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["plan", "roofline", "memory", "latency", "parallelism", "fleet", "tail", "explore", "scenarios", "catalog"]
PASSWORD = "Tr0ub4dor-s3cret"
# Targets no layout meets: 1 ms TTFT and ITL (the default model's decode step alone is several ms).
INFEASIBLE = {"ttft_ms": "1", "itl_ms": "1"}
NOT_A_NUMBER = re.compile(r"(?i)\b(nan|-?inf(inity)?)\b")


@pytest.fixture(autouse=True)
def store_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_migrated_sqlite(tmp_path, monkeypatch)


def rendered_text(at: AppTest) -> str:
    """Everything a visitor can read: each element's text fields (markdown, metric
    values and help, labels, messages) and each table's cells (charts excluded)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        children = getattr(node, "children", None)
        if children:
            for child in children.values():
                walk(child)
            return
        kind, proto = getattr(node, "type", ""), getattr(node, "proto", None)
        if proto is None or "vega" in kind:
            return
        if kind in ("arrow_data_frame", "arrow_table", "dataframe", "table"):
            out.append(node.value.to_csv(na_rep=""))
        else:
            out.append(text_format.MessageToString(proto, as_utf8=True))

    walk(at._tree)
    return "\n".join(out)


def _run(params: dict[str, str], page: str | None = None) -> AppTest:
    at = new_app_test()
    at.query_params.update(params)
    at.run()
    if page is not None and page != "plan":
        at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("prompt", "1e400", "is not a finite number"),  # an int widget: OverflowError inside Streamlit before
    ("prompt", "nan", "is not a finite number"),
    ("prompt", "9" * 5000, "5,000 characters is not a number"),
    ("prompt", "2000.5", "is not a whole number"),
    ("output", "-1e400", "is not a finite number"),
    ("rps", "inf", "is not a finite number"),
    ("hit", "1e400", "is not a finite number"),
    ("batch", "-5", "is below the minimum 0"),
    ("price", "NaN", "is not a finite number"),
    ("tp", "3", "is not one of the choices"),
    ("gpu", "[click](https://evil.example)", "is not one of the choices"),
])
def test_a_hostile_number_or_choice_in_the_link_is_one_warning_naming_it(key: str, value: str, needle: str) -> None:
    at = _run({key: value})
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and warnings[0].startswith(f"Link parameter `{key}`:") and needle in warnings[0]
    assert "the default is used instead" in warnings[0]
    default = Scenario()
    widget = at.selectbox(key=key) if key in ("tp", "gpu") else at.number_input(key=key)
    expected = {"prompt": default.workload.prompt_tokens, "output": default.workload.output_tokens,
                "rps": default.workload.requests_per_s, "hit": 0.0, "batch": 0, "price": None, "tp": 1,
                "gpu": default.gpu}[key]
    assert widget.value == expected
    assert not at.error, [e.value for e in at.error]  # the page still plans the default
    if key == "gpu":  # the echoed value is a code span: no link is drawn
        assert f"`{value}`" in warnings[0]


def test_valid_link_numbers_still_apply() -> None:
    at = _run({"prompt": "4000", "rps": "2.5", "tp": "2"})
    assert not at.warning
    assert (at.number_input(key="prompt").value, at.number_input(key="rps").value) == (4000, 2.5)
    assert at.selectbox(key="tp").value == 2


@pytest.mark.parametrize(("value", "needle"), [
    ("²", "'²' is neither an id (digits 0-9) nor a slug"),
    ("9" * 30, f"scenario id: {'9' * 30} is out of range (1 to {ID_MAX:,})"),
    (str(2**63), "is out of range"),
    ("abc\n", "neither an id"),
    ("x" * 100_000, f"100,000 characters; a slug or id is at most {REF_MAX_CHARS}"),
    ("[Log in again](https://evil.example)", "'\\[Log in again\\](https\u2060://evil.example)' is neither"),
])
def test_a_hostile_scenario_link_is_one_error_naming_the_parameter(value: str, needle: str) -> None:
    at = _run({"scenario": value})
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("Share link `?scenario=`:") and needle in errors[0], errors
    assert "Traceback" not in rendered_text(at)
    assert "[Log in again](" not in errors[0]  # a stranger's text is never drawn as a link


def test_a_saved_slug_link_still_loads(store_db: Path) -> None:
    save_scenario(engine=make_engine(f"sqlite:///{store_db}"), scenario=Scenario(gpu="b200"), name="Team B200")
    at = _run({"scenario": "team-b200"})
    assert not at.error and at.selectbox(key="gpu").value == "b200"


@pytest.mark.parametrize("page_name", ["scenarios", None])
def test_an_unreachable_database_never_shows_its_password(monkeypatch: pytest.MonkeyPatch,
                                                          page_name: str | None) -> None:
    monkeypatch.setenv("DATABASE_URL", f"postgresql+psycopg://ridgeline:{PASSWORD}@127.0.0.1:{_closed_port()}/test")
    at = _run({"scenario": "team-review"} if page_name is None else {}, page_name)
    text = rendered_text(at)
    assert PASSWORD not in text
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "cannot be reached" in errors[0] and "ridgeline:***@127.0.0.1" in errors[0], errors
    assert "SELECT" not in text and "Traceback" not in text


def test_an_uncaught_error_shows_visitors_no_details(monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    import planner

    def boom(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError(f"SELECT secret FROM users WHERE password = '{PASSWORD}'")

    monkeypatch.setattr(planner, "mode_scenarios", boom)  # the Fleet page calls it (public API)
    at = new_app_test()
    at.run()
    at.switch_page("pages/fleet.py").run()
    assert len(at.exception) == 1
    shown = text_format.MessageToString(at.exception[0].proto, as_utf8=True)
    assert "redacted" in shown and PASSWORD not in shown and "SELECT" not in shown and "RuntimeError" not in shown
    assert PASSWORD not in rendered_text(at)
    with (ROOT / ".streamlit" / "config.toml").open("rb") as fh:  # `streamlit run` from the repository root
        assert tomllib.load(fh)["client"]["showErrorDetails"] == "none"


@pytest.mark.parametrize("page_name", PAGES)
def test_an_infeasible_plan_shows_no_nan_on_any_page(page_name: str) -> None:
    at = _run(INFEASIBLE, page_name)
    text = rendered_text(at)
    assert "Traceback" not in text
    assert not NOT_A_NUMBER.search(text), NOT_A_NUMBER.findall(text)[:5]


def test_the_fleet_page_shows_a_dash_and_the_reason_for_an_infeasible_plan() -> None:
    at = _run(INFEASIBLE, "fleet")
    gpus = [m for m in at.metric if m.label == "GPUs total"]
    assert [m.value for m in gpus] == ["—", "—"]  # colocated and disaggregated
    assert all("no operating point meets the SLO: misses ITL" in m.proto.help for m in gpus)
    assert any("No operating point meets the SLO: misses ITL" in e.value for e in at.error)
    side = at.table[0].value
    assert set(side.loc["GPUs total"]) == {"—"}


def test_the_compare_table_shows_a_dash_and_why(store_db: Path) -> None:
    engine = make_engine(f"sqlite:///{store_db}")
    save_scenario(engine=engine, scenario=Scenario(), name="ok")
    save_scenario(engine=engine, scenario=Scenario(slo={"ttft_s": 0.001, "itl_s": 0.001}), name="impossible")
    at = _run({}, "scenarios")
    at.multiselect(key="sc_compare").set_value(["ok", "impossible"]).run()
    assert not at.exception
    diff = at.dataframe[-1].value.set_index("input")
    assert diff.loc["→ GPUs total", "impossible"] == "—" and diff.loc["→ GPUs total", "ok"] != "—"
    assert diff.loc["→ why —", "impossible"].startswith("misses ITL")
    assert not NOT_A_NUMBER.search(rendered_text(at))


@pytest.mark.parametrize(("base", "extra", "needle"), [
    ("qwen3-30b-a3b.json", {"mlp_only_layers": 5}, "mlp_only_layers"),
    ("deepseek-v3.json", {"n_shared_experts": [1]}, "n_shared_experts"),
])
def test_a_malformed_hf_config_is_one_error_line_on_the_catalog_page(base: str, extra: dict[str, object],
                                                                     needle: str) -> None:
    import json

    cfg = {**json.loads((ROOT / "tests" / "data" / "hf" / base).read_text()), **extra}
    at = _run({}, "catalog")
    at.text_area(key="hf_text").set_value(json.dumps(cfg))
    at.button(key="hf_import").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("config.json"), errors
    assert needle in errors[0] or "not a config this importer understands" in errors[0]


@pytest.mark.parametrize(("text", "needle"), [
    ("[" * 100_000, "nested deeper than"),
    ('{"hidden_size": ' + "9" * 5000 + "}", "an integer has too many digits"),
    (" " * 1_048_577, "over the 1,048,576-byte limit"),
])
def test_a_hostile_pasted_config_is_one_error_line(text: str, needle: str) -> None:
    at = _run({}, "catalog")
    at.text_area(key="hf_text").set_value(text)
    at.button(key="hf_import").click().run()
    assert not at.exception
    assert [e.value for e in at.error] == [e.value for e in at.error if e.value.startswith("config.json")]
    assert len(at.error) == 1 and needle in at.error[0].value


def test_a_scenario_link_to_a_stored_path_model_opens_no_file(store_db: Path, tmp_path: Path) -> None:
    """A stored payload naming a file (written by hand, or before the check): the
    link gives the same one error whether a file is at that path or not."""
    from datetime import UTC, datetime

    import sqlalchemy as sa

    from planner.store.models import ScenarioRow

    real = tmp_path / "config.json"
    real.write_text((ROOT / "tests" / "data" / "hf" / "llama-3.1-8b.json").read_text())
    engine = make_engine(f"sqlite:///{store_db}")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with engine.begin() as conn:
        for slug, path in (("has-file", str(real)), ("no-file", str(tmp_path / "missing.json"))):
            conn.execute(sa.insert(ScenarioRow).values(
                slug=slug, name=slug, description="", tags=[], payload={"model": path}, schema_version=1,
                frozen_catalog=None, created_at=now, updated_at=now, version=1))
    errors = []
    for slug in ("has-file", "no-file"):
        at = _run({"scenario": slug})
        assert len(at.error) == 1
        errors.append(at.error[0].value.replace(slug, "SLUG"))
    assert errors[0] == errors[1] and "import the config.json first" in errors[0]
