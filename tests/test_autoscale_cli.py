"""``python -m planner autoscale``: the public keys, the profile inputs and one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from planner.cli import main

STEP_KEYS = {"t_s", "requests_per_s", "prefill_replicas", "decode_replicas", "replicas", "gpus", "ttft_p90_s",
             "itl_p90_s", "slo_attainment"}
SUMMARY_KEYS = {"gpu_hours", "usd_per_day", "usd_per_mtok_output", "slo_attainment", "worst_step_slo_attainment",
                "static_gpu_hours", "savings_fraction", "scale_up_delay_s"}
SHAPE = "diurnal:peak=20,trough=2,peak_hour=14"


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["autoscale", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_the_public_keys_and_static_is_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "--shape", SHAPE, "--set", "fleet.scale_interval_s=3600")
    assert len(d["steps"]) == 24
    assert STEP_KEYS <= set(d["steps"][0]) and SUMMARY_KEYS <= set(d["summary"])
    assert all(st["slo_attainment"] is None for st in d["steps"])  # not simulated
    assert d["summary"]["slo_attainment"] is None and d["summary"]["savings_fraction"] == pytest.approx(0)
    r = _json(capsys, "--shape", SHAPE, "--set", "fleet.scale_interval_s=3600", "--policy", "reactive")
    assert r["summary"]["gpu_hours"] < d["summary"]["gpu_hours"]
    assert r["summary"]["static_gpu_hours"] == pytest.approx(d["summary"]["gpu_hours"])


def test_profile_file_and_csv_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "day.csv"
    f.write_text("t_s,requests_per_s\n0,2\n43200,12\n")
    assert main(["autoscale", "--profile", str(f), "--policy", "predictive", "--set", "fleet.scale_interval_s=7200",
                 "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 12 and STEP_KEYS <= set(rows[0])
    rates = [float(r["requests_per_s"]) for r in rows]
    assert max(rates) == pytest.approx(12) and rates[0] == pytest.approx(2 + 10 / 6)


def test_simulate_fills_attainment(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "--shape", SHAPE, "--set", "fleet.scale_interval_s=21600", "--simulate",
              "--requests-per-step", "100", "--workers", "1")
    assert all(st["slo_attainment"] is not None for st in d["steps"])
    assert d["summary"]["worst_step_slo_attainment"] <= d["summary"]["slo_attainment"] <= 1.0


@pytest.mark.parametrize(("args", "needle"), [
    (["--shape", "diurnal:peak=20"], "--shape: missing trough, peak_hour"),
    (["--profile", "/nonexistent/day.csv"], "--profile: cannot read"),
    (["--set", "fleet.scale_interval_s=1"], "fleet.scale_interval_s"),
    (["--set", "fleet.warm_pool_replicas=-1"], "fleet.warm_pool_replicas"),
    (["--set", 'workload.profile=[]'], "workload.profile: the profile is empty"),
])
def test_bad_input_is_one_line(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["autoscale", *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
