"""Every input has a named limit; numbers that do not exist are never printed as numbers.

Each cap is checked at its bound (accepted) and one past it (one ScenarioError
naming the option and the limit), and, where the work is large, that nothing
was computed before the refusal (counted calls, not timings).
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import io
import json
import math
from pathlib import Path

import pytest

import planner.simulate.report as sim_report
from planner import Scenario, plan
from planner.cli import main
from planner.errors import ScenarioError
from planner.io.export import REASON_COLUMN, csv_text, finite_row
from planner.io.formatting import NOT_A_NUMBER, format_value, human
from planner.io.jsonfile import MAX_JSON_FILE_BYTES
from planner.physics.lengths import parse_trace_csv as parse_length_trace
from planner.simulate import Request, parse_request_trace_csv, rate_sweep, sim_options, simulate
from planner.simulate.options import MAX_KV_CAPACITY_TOKENS, MAX_SIM_BATCH, MAX_SIM_REQUESTS
from planner.simulate.report import MAX_RATES
from planner.spec.derivation import fmt_num
from planner.spec.scenario import MAX_SEQUENCE_TOKENS, MAX_TRACE_ROWS, scenario_from_dict
from planner.validate import parse_measurements
from planner.validate.rows import MAX_MEASUREMENT_ROWS
from planner.views.sweep import MAX_SWEEP_CANDIDATES, sweep

# The module, not the function re-exported under the same name by planner.views.
sweep_module = importlib.import_module("planner.views.sweep")


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


# Sweep -----------------------------------------------------------------------------------------

def test_sweep_drops_repeated_axis_values() -> None:
    rows = sweep(Scenario(), gpus=["h100-sxm", "h100-sxm"], dtypes=["fp8", "fp8"], tps=[1, 1, 2, 1], pps=[1, 1],
                 chunks=[2048, 2048], modes=["colocated", "colocated"])["rows"]
    assert [(r["tp"], r["pp"]) for r in rows] == [(1, 1), (2, 1)]
    rc, out, err = run_main(["sweep", "--gpus", "h100-sxm", "--dtypes", "fp8", "--tp", "1,1,2,2,1", "--pp", "1,1",
                             "--chunks", "2048,2048", "--modes", "colocated", "--format", "csv"])
    assert rc == 0, err
    assert len(out.splitlines()) == 1 + 2


def test_sweep_over_the_candidate_cap_is_refused_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = sweep_module.operating_arrays
    monkeypatch.setattr(sweep_module, "operating_arrays", lambda *a, **k: calls.append(1) or real(*a, **k))
    tps = list(range(1, 65))
    with pytest.raises(ScenarioError) as exc:
        sweep(Scenario(), tps=tps, pps=tps)
    assert f"{MAX_SWEEP_CANDIDATES:,}" in str(exc.value) and "--tp" in str(exc.value)
    assert calls == []
    with pytest.raises(ScenarioError, match="--tp: every value must be an integer from 1 to 64"):
        sweep(Scenario(), tps=[65])


# Simulator ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("field", "limit"), [
    ("requests", MAX_SIM_REQUESTS), ("kv_capacity_tokens", MAX_KV_CAPACITY_TOKENS), ("max_batch", MAX_SIM_BATCH),
    ("concurrency", MAX_SIM_REQUESTS),
])
def test_sim_options_caps(field: str, limit: int) -> None:
    assert getattr(sim_options(**{field: limit}), field) == limit
    with pytest.raises(ScenarioError, match=rf"^{field}: .*{limit}"):
        sim_options(**{field: limit + 1})


@pytest.mark.parametrize(("argv", "needles"), [
    (["--requests", "10000000"], ["--requests", "100000"]),
    (["--kv-capacity-tokens", "1000000000000"], ["--kv-capacity-tokens", "1000000000"]),
    (["--length-sigma", "1e308"], ["--length-sigma", "3"]),
    (["--rates", ",".join(str(r) for r in range(1, MAX_RATES + 2))], ["--rates", str(MAX_RATES)]),
    (["--rates", "1,1e300"], ["--rates", "1e+06"]),
    (["--max-batch", "70000"], ["--max-batch", "65536"]),
])
def test_cli_limits_name_the_option_and_the_limit(argv: list[str], needles: list[str]) -> None:
    rc, _, err = run_main(["simulate", *argv])
    assert rc == 2 and err.count("\n") == 1
    assert all(n in err for n in needles), err


def test_rate_sweep_caps_and_deduplicates_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[float] = []
    real = sim_report.simulate
    monkeypatch.setattr(sim_report, "simulate",
                        lambda s, o, *a: runs.append(o.rate_req_s) or real(s, o, *a))
    with pytest.raises(ScenarioError, match=f"over the limit of {MAX_RATES}"):
        rate_sweep(Scenario(), sim_options(requests=20), [float(r) for r in range(1, MAX_RATES + 2)])
    assert runs == []
    result = rate_sweep(Scenario(), sim_options(requests=20), [2.0, 1.0, 2.0, 1.0])
    assert runs == [1.0, 2.0] and len(result.levels) == 2


def test_simulate_refuses_too_many_given_requests() -> None:
    reqs = tuple(Request(float(i), 10, 2) for i in range(MAX_SIM_REQUESTS + 1))
    with pytest.raises(ScenarioError, match=f"over the limit of {MAX_SIM_REQUESTS:,}"):
        simulate(Scenario(), sim_options(), reqs)


# Traces, scenarios and measurement files -------------------------------------------------------------

def test_trace_row_caps() -> None:
    sim = "arrival_s,prompt_tokens,output_tokens\n" + "0,10,1\n" * (MAX_SIM_REQUESTS + 1)
    with pytest.raises(ScenarioError, match=f"more than {MAX_SIM_REQUESTS:,} rows"):
        parse_request_trace_csv(sim)
    lengths = "prompt_tokens,output_tokens\n" + "10,1\n" * (MAX_TRACE_ROWS + 1)
    with pytest.raises(ScenarioError, match=f"more than {MAX_TRACE_ROWS:,} rows"):
        parse_length_trace(lengths)
    assert len(parse_length_trace("prompt_tokens,output_tokens\n" + "10,1\n" * MAX_TRACE_ROWS)) == MAX_TRACE_ROWS
    with pytest.raises(ScenarioError, match="workload.trace"):
        scenario_from_dict({"workload": {"distribution": "trace", "trace": [[1, 1]] * (MAX_TRACE_ROWS + 1)}})
    with pytest.raises(ScenarioError, match="workload.trace"):
        scenario_from_dict({"workload": {"distribution": "trace", "trace": [[MAX_SEQUENCE_TOKENS + 1, 1]]}})


def test_a_string_is_trace_text_never_a_path() -> None:
    with pytest.raises(ScenarioError, match="missing column"):
        parse_length_trace("/etc/passwd.csv")  # used to be read as a file


def test_measurement_row_cap() -> None:
    row = {"id": "a", "engine": "vllm", "model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100-sxm",
           "n_gpus": 1, "metric": "ttft_ms", "value": 1.0}
    with pytest.raises(ScenarioError, match=f"over the limit of {MAX_MEASUREMENT_ROWS:,}"):
        parse_measurements([dict(row, id=str(i)) for i in range(MAX_MEASUREMENT_ROWS + 1)])


def test_validate_data_file_size_cap(tmp_path: Path) -> None:
    big = tmp_path / "m.json"
    with big.open("wb") as fh:
        fh.truncate(MAX_JSON_FILE_BYTES + 1)
    rc, _, err = run_main(["validate", "--data", str(big)])
    assert rc == 2 and f"over the limit of {MAX_JSON_FILE_BYTES:,} bytes" in err and str(big) in err


# NaN / inf are not numbers -----------------------------------------------------------------------

def test_formatting_never_prints_nan_or_inf() -> None:
    for v in (math.nan, math.inf, -math.inf):
        assert format_value("cost.usd_per_hour", v) == NOT_A_NUMBER
        assert human(v, "s") == NOT_A_NUMBER
        assert fmt_num(v) == NOT_A_NUMBER
    assert format_value("cost.usd_per_hour", 3.0) == "$3.00"
    assert finite_row({"a": math.nan, "b": 1.0}, "why") == {"a": None, "b": 1.0, REASON_COLUMN: "why"}
    assert finite_row({"b": 1.0}, "why") == {"b": 1.0}
    assert csv_text([{"a": math.inf, "b": -math.nan}]) == "a,b\n,\n"


INFEASIBLE = ["--set", "slo.itl_s=0.0001"]


def test_infeasible_plan_json_has_nulls() -> None:
    rc, out, _ = run_main(["plan", *INFEASIBLE])
    data = json.loads(out)
    assert rc == 0 and data["fleet"]["replicas"] is None and data["cost"]["usd_per_hour"] is None
    assert data["operating_point"]["feasible"] is False


def test_infeasible_plan_csv_has_empty_cells_and_a_reason() -> None:
    rc, out, _ = run_main(["plan", *INFEASIBLE, "--format", "csv"])
    header, row = list(csv.reader(io.StringIO(out)))
    cells = dict(zip(header, row, strict=True))
    assert rc == 0
    assert cells["fleet.replicas"] == "" and cells["cost.usd_per_hour"] == ""
    assert "meets the SLO" in cells[REASON_COLUMN]
    assert not {"nan", "inf", "-inf"} & set(row)
    _, ok, _ = run_main(["plan", "--format", "csv"])
    header, row = list(csv.reader(io.StringIO(ok)))
    assert header[-1] == REASON_COLUMN and row[-1] == ""  # the same columns whether feasible or not


def test_infeasible_plan_table_shows_a_dash_and_the_reason_first() -> None:
    rc, out, _ = run_main(["plan", *INFEASIBLE, "--format", "table"])
    lines = out.splitlines()
    assert rc == 0 and lines[0].startswith(REASON_COLUMN) and "meets the SLO" in lines[0]
    words = set(out.split())
    assert not {"nan", "inf", "-inf"} & words
    replicas = next(line for line in lines if line.startswith("fleet.replicas"))
    assert replicas.split()[-1] == NOT_A_NUMBER


def test_plan_values_behind_the_dashes_are_really_non_finite() -> None:
    # The check above could pass by hiding real numbers; the core says they do not exist.
    p = plan(Scenario(slo={"itl_s": 0.0001}))
    assert not math.isfinite(p.fleet.replicas) and not math.isfinite(p.cost.usd_per_hour)
