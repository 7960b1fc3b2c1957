"""``python -m planner deploy``: stdout with separators, --out DIR (atomic, no silent overwrite),
one line and exit status 2 for a plan the target cannot express."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from deploy_support import LLAMA_DISAGG, LLAMA_FP8_TP2, parse_command

from planner.cli.main import main


def _scenario_file(tmp_path: Path, data: dict[str, object]) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_stdout_has_one_separated_file_per_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy", _scenario_file(tmp_path, LLAMA_DISAGG), "--target", "vllm"]) == 0
    out = capsys.readouterr().out
    assert out.count("# ===== ") == 2
    assert "# ===== vllm-prefill.sh =====" in out and "# ===== vllm-decode.sh =====" in out
    assert "# scenario: llama-70b-disagg · revision: unsaved" in out
    body = out.split("# ===== vllm-decode.sh =====\n")[1]
    line = " ".join(x.rstrip("\\").strip() for x in body.splitlines() if not x.startswith("#"))
    ns = parse_command("vllm", shlex.split(line))
    assert ns.tensor_parallel_size == "4" and json.loads(ns.kv_transfer_config)["kv_role"] == "kv_consumer"


def test_out_dir_writes_files_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _scenario_file(tmp_path, LLAMA_FP8_TP2)
    out = tmp_path / "deploy"
    assert main(["deploy", src, "--target", "sglang", "--out", str(out), "--revision", "7"]) == 0
    text = (out / "sglang-colocated.sh").read_text()
    assert "revision: 7" in text and "--tp 2" in text
    assert capsys.readouterr().out.strip() == str(out / "sglang-colocated.sh")
    assert main(["deploy", src, "--target", "sglang", "--out", str(out), "--set", "parallel.tp=4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force" in err
    assert (out / "sglang-colocated.sh").read_text() == text  # untouched
    assert main(["deploy", src, "--target", "sglang", "--out", str(out), "--set", "parallel.tp=4", "--force"]) == 0
    assert "--tp 4" in (out / "sglang-colocated.sh").read_text()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_inexpressible_plan_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _scenario_file(tmp_path, LLAMA_FP8_TP2)
    assert main(["deploy", src, "--target", "trtllm"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and "pre-quantized checkpoint" in cap.err
    with pytest.raises(SystemExit) as exc:
        main(["deploy", src, "--target", "nope"])
    assert exc.value.code == 2
