"""CSV plan export (planner/export.py + planner/cli.py plan_row): stable columns
with units in their names, formula injection neutralized, and the file reads
back with pandas to the same numbers."""

from __future__ import annotations

import csv
import io
import math

import pandas as pd
import pytest

from planner import Scenario, plan, plan_row
from planner.cli import main
from planner.io.export import csv_text, neutralize_cell

# The scenario half of every row: the Scenario's dotted keys, in this order.
INPUT_COLUMNS = [
    "scenario.schema_version", "scenario.name", "scenario.gpu", "scenario.model", "scenario.weights_dtype",
    "scenario.kv_dtype", "scenario.parallel.tp", "scenario.parallel.pp", "scenario.parallel.ep",
    "scenario.parallel.dp_attention", "scenario.parallel.redundant_experts", "scenario.workload.prompt_tokens", "scenario.workload.output_tokens", "scenario.workload.requests_per_s",
    "scenario.workload.peak_requests_per_s", "scenario.workload.prefix_tokens", "scenario.workload.prefix_hit_rate",
    "scenario.workload.distribution", "scenario.workload.prompt_sigma", "scenario.workload.output_sigma",
    "scenario.workload.trace", "scenario.workload.profile", "scenario.slo.ttft_s",
    "scenario.slo.itl_s", "scenario.slo.itl_percentile", "scenario.slo.attainment", "scenario.slo.itl_gap_p99_s",
    "scenario.serving.mode", "scenario.serving.batch_size", "scenario.serving.context_tokens",
    "scenario.serving.chunk_tokens", "scenario.serving.block_tokens", "scenario.serving.reserved_bytes",
    "scenario.serving.memory_utilization", "scenario.serving.engine", "scenario.serving.scheduler_recv_interval",
    "scenario.serving.attention_dp_balance_iters",
    "scenario.speculative.draft_tokens",
    "scenario.speculative.method", "scenario.speculative.acceptance", "scenario.speculative.acceptance_per_position",
    "scenario.speculative.draft_cost", "scenario.speculative.draft_model",
    "scenario.speculative.draft_layers", "scenario.speculative.draft_weights_dtype", "scenario.efficiency.bandwidth",
    "scenario.efficiency.compute",
    "scenario.efficiency.step_overhead_s", "scenario.efficiency.layer_overhead_s",
    "scenario.efficiency.collective_latency_s",
    "scenario.efficiency.calibrated_from", "scenario.fleet.target_utilization", "scenario.fleet.min_replicas",
    "scenario.fleet.link", "scenario.fleet.link_bytes_per_s", "scenario.fleet.kv_transfer_setup_s",
    "scenario.fleet.load_bytes_per_s", "scenario.fleet.policy", "scenario.fleet.scale_interval_s",
    "scenario.fleet.scale_up_delay_s", "scenario.fleet.engine_start_s", "scenario.fleet.warm_pool_replicas",
    "scenario.fleet.scale_down_delay_s", "scenario.cost.usd_per_gpu_hour", "scenario.cost.usd_per_kwh",
    "scenario.cost.pue",
]
# Headline outputs, each named with its SI unit (or a unitless ratio/count name).
OUTPUT_COLUMNS_IN_ORDER = [
    "roofline.peak_flops_per_s", "roofline.hbm_bytes_per_s", "roofline.ridge_flop_per_byte",
    "memory.weight_bytes", "memory.kv_bytes_per_token", "memory.kv_budget_bytes", "memory.max_sequences",
    "decode.step_s", "decode.itl_s", "decode.tok_s_per_gpu", "decode.mbu", "prefill.time_s", "ttft_s",
]

SCENARIOS = [
    Scenario(),
    Scenario(gpu="h200-sxm", model="llama-3.1-70b", weights_dtype="fp8", parallel={"tp": 4},
             speculative={"draft_tokens": 3, "acceptance": 0.7}, serving={"batch_size": 64}),
    Scenario(model="llama-3.1-8b", kv_dtype="fp8", workload={"prompt_tokens": 8000, "prefix_tokens": 4000,
                                                             "prefix_hit_rate": 0.5},
             efficiency={"bandwidth": 0.7}, cost={"usd_per_gpu_hour": 2.5}),
]


def _row(scenario: Scenario) -> dict[str, object]:
    return plan_row(scenario, plan(scenario).to_json_dict())


def test_columns_stable_across_scenarios_and_runs() -> None:
    columns = [list(_row(s)) for s in SCENARIOS]
    assert columns[0][: len(INPUT_COLUMNS)] == INPUT_COLUMNS
    assert all(c == columns[0] for c in columns), "column set/order changed between scenarios"
    assert list(_row(SCENARIOS[0])) == columns[0]
    positions = [columns[0].index(c) for c in OUTPUT_COLUMNS_IN_ORDER]
    assert positions == sorted(positions)
    header = next(csv.reader(io.StringIO(csv_text([_row(s) for s in SCENARIOS]))))
    assert header == columns[0]


def test_cli_csv_uses_the_same_writer(capsys: pytest.CaptureFixture[str]) -> None:
    s = SCENARIOS[1]
    argv = ["plan", "--set", "gpu=h200-sxm", "--set", "model=llama-3.1-70b", "--set", "weights_dtype=fp8",
            "--set", "parallel.tp=4", "--set", "speculative.draft_tokens=3", "--set", "speculative.acceptance=0.7",
            "--set", "serving.batch_size=64",
            "--format", "csv"]
    assert main(argv) == 0
    assert capsys.readouterr().out == csv_text([_row(s)])


@pytest.mark.parametrize("name", ['=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1:A9)",
                                  "\t=1", "\r=1"])
def test_formula_injection_neutralized(name: str) -> None:
    text = csv_text([_row(Scenario(name=name))])
    (row,) = list(csv.DictReader(io.StringIO(text, newline="")))  # one row: nothing split it
    for col in ("scenario.name", "scenario_name"):
        cell = row[col]
        assert cell == "'" + name.replace("\r", "\n")  # a bare CR would split the row; it becomes a quoted LF
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))


def test_numbers_are_not_neutralized() -> None:
    assert neutralize_cell(-1.5) == -1.5 and neutralize_cell(0) == 0 and neutralize_cell("plain") == "plain"


def test_reads_back_with_pandas_to_the_same_numbers() -> None:
    rows = [_row(s) for s in SCENARIOS]
    df = pd.read_csv(io.StringIO(csv_text(rows)))
    assert list(df.columns) == list(rows[0]) and len(df) == len(rows)
    checked = 0
    for i, row in enumerate(rows):
        for col, value in row.items():
            got = df[col][i]
            if value is None:
                assert pd.isna(got), col
            elif isinstance(value, bool):
                assert bool(got) is value, col
            elif isinstance(value, (int, float)):
                assert float(got) == float(value) or (math.isnan(value) and math.isnan(got)), (col, got, value)
                checked += 1
    assert checked >= 50 * len(rows)
    # Spot values the reviewer's spreadsheet will use, against the plan itself.
    p = plan(SCENARIOS[1]).to_json_dict()
    assert df["ttft_s"][1] == p["ttft_s"]
    assert df["decode.itl_s"][1] == p["decode"]["itl_s"]
    assert df["scenario.parallel.tp"][1] == 4


def test_carriage_return_cannot_start_a_new_row() -> None:
    # Before the fix: the csv module leaves a bare CR unquoted when rows end in LF,
    # and "=SUM(1)" became the first cell of a new row, not neutralized.
    text = csv_text([{"name": "ok\r=SUM(1)", "n": 1}])
    assert list(csv.DictReader(io.StringIO(text, newline=""))) == [{"name": "ok\n=SUM(1)", "n": "1"}]
