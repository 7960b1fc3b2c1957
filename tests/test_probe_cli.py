"""``python -m planner probe`` end to end against the pacing server."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from servers.procs import start_script

from planner.cli import main

STAT_KEYS = {"mean", "p50", "p90", "p99"}


@pytest.fixture(scope="module")
def pacer():
    srv = start_script("pacing_server", "--ttft-s", "0.01", "--tpot-s", "0.004")
    yield srv
    srv.stop()


def _run(capsys, *argv: str) -> str:
    assert main(["probe", *argv]) == 0
    return capsys.readouterr().out


def test_json_levels_carry_the_contract_keys(pacer, capsys):
    out = json.loads(_run(capsys, "--url", pacer.url + "/v1/completions", "--model", "p", "--concurrency", "1,4",
                          "--requests", "8", "--prompt-tokens", "16", "--output-tokens", "8", "--format", "json"))
    assert [lv["concurrency"] for lv in out["levels"]] == [1, 4]
    for lv in out["levels"]:
        for key in ("requests", "failures", "output_tokens_total", "output_tok_s", "req_s", "goodput_req_s",
                    "token_count_source"):
            assert key in lv
        for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
            assert STAT_KEYS <= set(lv[key])
        assert lv["requests"] == 8 and lv["failures"] == 0 and lv["output_tokens_total"] == 64
        assert lv["token_count_source"] == "usage"
        assert "samples" not in lv
    assert out["metrics"]["engine"] == "vllm" and out["metrics"]["samples"]
    assert out["url"] == pacer.url + "/v1/completions"


def test_scenario_adds_prediction_mbu_mfu_and_calibration(pacer, capsys):
    out = json.loads(_run(capsys, "--url", pacer.url, "--model", "p", "--concurrency", "1,2,4", "--requests", "4",
                          "--output-tokens", "6", "--set", "gpu=h100-sxm", "--set", "model=llama-3.1-8b",
                          "--calibrate"))
    for lv in out["levels"]:
        assert lv["predicted"]["tpot_s"] > 0 and lv["predicted"]["ttft_s"] > 0
        assert lv["mbu"] > 0 and lv["mfu"] > 0
    cal = out["calibration"]
    assert cal["scenario"]["efficiency"]["calibrated_from"] == out["run_id"]
    assert len(cal["residuals"]) == 6


def test_rate_csv_and_table(pacer, capsys):
    text = _run(capsys, "--url", pacer.url, "--model", "p", "--rate", "50", "--arrival", "gamma", "--burstiness",
                "0.5", "--requests", "10", "--output-tokens", "4", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 1 and rows[0]["rate_req_s"] == "50.0" and rows[0]["arrival"] == "gamma"
    assert rows[0]["requests"] == "10" and "ttft_s.p99" in rows[0]
    table = _run(capsys, "--url", pacer.url, "--model", "p", "--concurrency", "2", "--requests", "2",
                 "--output-tokens", "4", "--format", "table")
    assert "tpot_s.p50" in table and "goodput_req_s" in table


@pytest.mark.parametrize(("argv", "needle"), [
    (["--requests", "0"], "requests"),
    (["--concurrency", "5000"], "concurrency"),
    (["--calibrate"], "--calibrate needs a scenario"),
    (["--api-key-env", "RIDGELINE_NO_SUCH_VAR"], "RIDGELINE_NO_SUCH_VAR"),
    (["--set", "parallel.tp=3"], "parallel.tp"),
])
def test_bad_input_is_one_line(pacer, argv, needle):
    proc = subprocess.run([sys.executable, "-m", "planner", "probe", "--url", pacer.url, "--model", "p", *argv],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
