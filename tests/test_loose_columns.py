"""Readable headers for result tables (issue 23, loose ends): a reader sees
"TTFT p50 (ms)" with the value in ms, never ``ttft_s.p50`` or a "None" cell."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest
from servers.procs import start_script

from planner.views.columns import MISSING, display_column, display_rows, residual_rows
from tests.apptest_v2 import new_app_test, use_migrated_sqlite


@pytest.mark.parametrize(("key", "header", "factor"), [
    ("ttft_s.p50", "TTFT p50 (ms)", 1e3),
    ("ttft_sent_s.p99", "TTFT from send p99 (ms)", 1e3),
    ("tpot_s.mean", "TPOT mean (ms)", 1e3),
    ("itl_s.p90", "ITL p90 (ms)", 1e3),
    ("itl_s.count", "ITL samples", 1.0),
    ("duration_s", "Duration (s)", 1.0),
    ("rate_req_s", "Offered rate (req/s)", 1.0),
    ("goodput_req_s", "Goodput (req/s)", 1.0),
    ("output_tok_s", "Output (tok/s)", 1.0),
    ("predicted.ttft_s", "Predicted TTFT (ms)", 1e3),
    ("predicted.output_tok_s", "Predicted output (tok/s)", 1.0),
    ("client.loop_lag_p99_s", "Client loop lag p99 (ms)", 1e3),
    ("client.cpu_share", "Client CPU (cores)", 1.0),
    ("engine.kv_usage_max", "Engine KV usage max", 1.0),
    ("failures.http_404", "Failures: http_404", 1.0),
    ("memory.kv_budget_bytes", "KV budget per GPU (GB)", 1e-9),
    ("mbu", "MBU", 1.0),
])
def test_a_key_reads_as_its_metric_statistic_and_unit(key: str, header: str, factor: float) -> None:
    assert display_column(key) == (header, factor)


def test_rows_are_converted_to_their_headers_units_and_missing_values_are_a_dash() -> None:
    rows = display_rows([{"ttft_s.p50": 0.0123, "tpot_s.p99": None, "engine.preemptions": math.nan,
                          "predicted.saturated": True, "requests": 8}])
    assert rows == [{"TTFT p50 (ms)": 12.3, "TPOT p99 (ms)": MISSING, "Engine preemptions": MISSING,
                     "Predicted saturated": "yes", "Requests": 8}]


def test_residuals_name_the_statistic_they_compare() -> None:
    (row,) = residual_rows([{"concurrency": 2, "rate_req_s": None, "metric": "itl_p50_s", "measured": 0.005,
                             "predicted": 0.006, "rel_error": 0.2}])
    assert row == {"Concurrency": 2, "Offered rate (req/s)": MISSING, "Metric": "ITL p50", "Measured (ms)": 5.0,
                   "Predicted (ms)": 6.0, "Error (%)": 20.0}


RAW_KEY = re.compile(r"(^[a-z_]+$)|(_s\b)|(\w\.\w)")  # a lower-case key, a unit suffix or a dotted path


def test_probe_page_tables_have_readable_headers_and_no_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = start_script("pacing_server", "--ttft-s", "0.02", "--tpot-s", "0.005")
    try:
        use_migrated_sqlite(tmp_path, monkeypatch)
        at = new_app_test()
        at.run()
        at.switch_page("pages/probe.py").run()
        at.text_input(key="pr_url").set_value(srv.url)
        at.text_input(key="pr_levels").set_value("1,2")
        at.number_input(key="pr_requests").set_value(2)
        at.number_input(key="pr_output").set_value(4)
        at.button(key="pr_run").click().run()
        for _ in range(300):  # the probe runs in the background: poll until the page took the result
            if "probe_job" not in at.session_state:
                break
            time.sleep(0.2)
            at.run()
        assert not at.exception, at.exception
        run = at.session_state["probe_run"]
        tables = dict(zip(("pr_table", "pr_client"), (df.value for df in at.dataframe), strict=True))
        for key, df in tables.items():
            raw = [c for c in df.columns if RAW_KEY.search(str(c))]
            assert raw == [], f"{key}: {raw}"
            assert not df.isna().any().any(), f"{key}: {df.columns[df.isna().any()].tolist()}"
        levels = tables["pr_table"]
        assert levels["TTFT p50 (ms)"].tolist() == [round(lv.ttft_s.p50 * 1e3, 3) for lv in run.levels]
        assert min(levels["TTFT p50 (ms)"]) >= 19  # the pacing server's 20 ms first token, now in ms
        client = tables["pr_client"]
        assert {"Loop lag p99 (ms)", "CPU (cores)", "Held concurrency"} <= set(client.columns)
    finally:
        srv.stop()
