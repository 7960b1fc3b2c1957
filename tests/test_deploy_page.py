"""AppTest: the Plan page's Deploy section (issue 27) shows the chosen target's files, says in one
line when a target cannot express the plan, names the saved scenario's revision, and the review
report it offers lists the chosen target's command."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from deploy_support import parse_command
from streamlit.testing.v1 import AppTest

from planner import Scenario, plan
from planner.store import make_engine, save_scenario
from tests.apptest_v2 import new_app_test, use_migrated_sqlite

PARAMS = {"model": "llama-3.1-70b", "gpu": "h200-sxm", "wd": "fp8", "tp": "2"}


@pytest.fixture(autouse=True)
def store_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_migrated_sqlite(tmp_path, monkeypatch)


def _open(params: dict[str, str]) -> AppTest:
    at = new_app_test()
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _command(code: str) -> list[str]:
    lines = [x.rstrip("\\").strip() for x in code.splitlines() if not x.startswith("#")]
    return shlex.split(" ".join(lines))


def _codes(at: AppTest) -> list[str]:
    return [str(c.value) for c in at.code]


def test_deploy_section_shows_each_target(store_db: Path) -> None:
    at = _open(PARAMS)
    assert "Deploy" in [s.value for s in at.subheader]
    target = at.selectbox(key="deploy_target")
    assert target.value == "vllm"
    (code,) = [c for c in _codes(at) if "vllm serve" in c]
    assert "# scenario: untitled · revision: unsaved" in code
    p = plan(Scenario(model="llama-3.1-70b", gpu="h200-sxm", weights_dtype="fp8", parallel={"tp": 2}))
    ns = parse_command("vllm", _command(code))
    assert int(ns.tensor_parallel_size) == 2 and int(ns.max_num_seqs) == p.operating_point.batch_size
    assert any("vllm-colocated.sh" in str(x.proto) for x in at.get("download_button"))

    target.set_value("sglang").run()
    assert not at.exception
    (code,) = [c for c in _codes(at) if "sglang.launch_server" in c]
    assert parse_command("sglang", _command(code)).tp == "2"

    at.selectbox(key="deploy_target").set_value("trtllm").run()
    assert any("pre-quantized checkpoint" in e.value for e in at.error)
    assert not [c for c in _codes(at) if "trtllm-serve" in c]  # nothing silently different
    at.text_input(key="deploy_weights").set_value("nvidia/Llama-3.1-70B-Instruct-FP8").run()
    assert any("trtllm-serve nvidia/Llama-3.1-70B-Instruct-FP8" in c for c in _codes(at))
    assert any("tensor_parallel_size: 2" in c for c in _codes(at))

    at.selectbox(key="deploy_target").set_value("kserve").run()
    assert any("kind: InferenceService" in c and "nvidia.com/gpu: '2'" in c for c in _codes(at))


def test_deploy_files_name_the_saved_revision(store_db: Path) -> None:
    engine = make_engine(f"sqlite:///{store_db}")
    stored = save_scenario(engine=engine, scenario=Scenario(gpu="h200-sxm", model="llama-3.1-70b",
                                                            weights_dtype="fp8", parallel={"tp": 2}),
                           name="70B review")
    at = _open({"scenario": stored.slug})
    (code,) = [c for c in _codes(at) if "vllm serve" in c]
    assert f"revision: {stored.slug} version 1" in code


def test_the_report_lists_the_chosen_targets_command() -> None:
    from planner.views.report import review_report

    s = Scenario(model="llama-3.1-70b", gpu="h200-sxm", weights_dtype="fp8", parallel={"tp": 2})
    rows = review_report(s, deploy_target="sglang").deployment
    (row,) = rows
    assert row.label == "sglang: colocated" and row.value.startswith("python -m sglang.launch_server")
    assert review_report(s).deployment == ()
    (row,) = review_report(s, deploy_target="trtllm").deployment
    assert row.value == "not expressible" and "pre-quantized" in row.note


