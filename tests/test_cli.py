"""The command line: scenario files round-trip, bad input is one clear line."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner import Scenario, plan
from planner.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_plan_roundtrips_a_scenario_file(tmp_path: Path) -> None:
    scenario = Scenario(name="review-1", gpu="h200-sxm", model="llama-3.1-70b", weights_dtype="fp8",
                        parallel={"tp": 2}, workload={"prompt_tokens": 1500, "output_tokens": 300})
    path = tmp_path / "s.json"
    path.write_text(scenario.model_dump_json())
    assert Scenario.model_validate_json(path.read_text()) == scenario
    out = run_cli("plan", str(path))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = plan(scenario).to_json_dict()
    assert got["decode"]["tok_s_per_replica"] == pytest.approx(want["decode"]["tok_s_per_replica"])
    assert got["memory"]["max_sequences"] == pytest.approx(want["memory"]["max_sequences"])
    assert got["scenario_name"] == "review-1"


def test_set_overrides_a_file(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.json"
    path.write_text(Scenario(parallel={"tp": 1}).model_dump_json())
    assert main(["plan", str(path), "--set", "parallel.tp=2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["memory"]["gpus_per_replica"] == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--set", "parallel.tpp=2"], "parallel.tpp: unknown key"),
        (["--set", "colour=red"], "colour: unknown key"),
        (["--set", "parallel.tp=0"], "parallel.tp"),
        (["--set", "workload.prefix_hit_rate=1.5"], "workload.prefix_hit_rate"),
        (["--set", "weights_dtype=fp7"], "weights_dtype"),
        (["--set", "gpu=h900"], "unknown gpu 'h900'"),
        (["--set", "parallel.tp=3"], "parallel.tp"),  # 3 does not divide 32 heads (TP16 spans nodes since issue 25)
        (["--set", "parallel.ep=8"], "parallel.ep now lays experts over the tp×pp GPUs"),  # the old meaning
        (["--set", "slo.itl_s=-1"], "slo.itl_s"),
        (["--set", "cost.usd_per_gpu_hour=0"], "cost.usd_per_gpu_hour"),
        (["--set", "model=/nonexistent/config.json"], "model"),
        (["--set", "noequals"], "KEY=VALUE"),
    ],
)
def test_bad_input_is_one_line_naming_the_key(args: list[str], needle: str) -> None:
    out = run_cli("plan", *args)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_bad_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"parallel": {"tp": "two"}}')
    out = run_cli("plan", str(path))
    assert out.returncode == 2 and "parallel.tp" in out.stderr and "Traceback" not in out.stderr
    path.write_text("{not json")
    out = run_cli("plan", str(path))
    assert out.returncode == 2 and "not valid JSON" in out.stderr


def test_model_from_hf_config_path(capsys) -> None:
    cfg = ROOT / "tests" / "data" / "hf" / "qwen3-30b-a3b.json"
    assert main(["plan", "--set", f"model={cfg}"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["memory"]["kv_bytes_per_token"] == 2 * 48 * 4 * 128 * 2  # 98,304


def test_csv_is_one_row_of_the_plan(capsys) -> None:
    assert main(["plan", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    want = plan(Scenario())
    assert len(rows) == 1
    # 8,030,261,248 bf16 parameters (test_curves works them out from the config) = 16,060,522,496 B.
    assert float(rows[0]["memory.weight_bytes_per_gpu"]) == 16_060_522_496
    assert float(rows[0]["decode.step_s"]) == want.decode.step_s  # written at full precision
    assert rows[0]["scenario.gpu"] == "h100-sxm" and rows[0]["scenario.model"] == "llama-3.1-8b"


def test_table_shows_units_and_derivations(capsys) -> None:
    assert main(["plan", "--format", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    want = plan(Scenario())
    row = next(line for line in lines if line.startswith("decode.step_s "))
    assert row.split()[1:] == [f"{want.decode.step_s * 1e3:.3g}", "ms"]  # three significant figures
    assert next(line for line in lines if line.startswith("memory.weight_bytes_per_gpu ")).split()[1:] == [
        "16.1", "GB"]  # 16,060,522,496 B to three significant figures
    # each number's working follows, ending in the value it states
    assert any(line.strip().startswith("decode.step_s = ") and f"= {want.decode.step_s * 1e3:.3g} ms" in line
               for line in lines)


def test_sweep_cli_json_and_bad_flags() -> None:
    out = run_cli("sweep", "--gpus", "h100-sxm", "--dtypes", "fp8", "--tp", "1,2", "--pp", "1",
                  "--set", "model=llama-3.1-8b", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # TP 1, 2 × the two modes × the three chunk sizes the sweep searches (512, 2048, 8192)
    assert len(data["rows"]) == 2 * 2 * 3 and data["cheapest"]["feasible"]
    bad = run_cli("sweep", "--tp", "1,x")
    assert bad.returncode == 2 and "--tp" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli("sweep", "--gpus", "h900")
    assert bad.returncode == 2 and "h900" in bad.stderr
