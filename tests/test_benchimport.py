"""Importing benchmark result files (issue 26): each reader on its fixture, format detection,
``python -m planner import-bench`` end to end, and the store round trip.

Fixtures (tests/data/bench/README.md): GuideLLM and AIPerf files written by the real
tools against the tests' llama-server; vLLM, SGLang, MLPerf and llm-d files built from
the fields their sources write."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from planner.benchimport import (
    bench_run_from_summary,
    bench_setup,
    detect_tool,
    read_bench_file,
    run_rows,
    save_bench_run,
    to_probe_run,
)
from planner.cli import main
from planner.errors import ScenarioError
from planner.store import list_probe_runs
from planner.store.db import make_engine
from planner.store.migrate import upgrade
from tests.store_support import db_url, engine  # noqa: F401  (fixtures)

DATA = Path(__file__).parent / "data" / "bench"
VLLM = DATA / "vllm_serve_llama8b_c16.json"
SGLANG = DATA / "sglang_bench_serving.jsonl"
GUIDELLM = DATA / "guidellm_0.8.1_concurrent4.json"
AIPERF = DATA / "profile_export_aiperf.json"
MLPERF = DATA / "mlperf_log_summary.txt"
LLMD = DATA / "llmd_benchmark_report_v0_2.yaml"
H100_8B = ["gpu=h100-sxm", "model=llama-3.1-8b"]


def cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("path", "tool"), [(VLLM, "vllm"), (SGLANG, "sglang"), (GUIDELLM, "guidellm"),
                                             (AIPERF, "aiperf"), (MLPERF, "mlperf"), (LLMD, "llmd")])
def test_format_is_detected(path: Path, tool: str) -> None:
    assert detect_tool(path.read_text(), path.name) == tool
    assert read_bench_file(path).tool == tool


def test_vllm_reader_reads_the_fields_its_source_writes() -> None:
    run = read_bench_file(VLLM)
    assert run.model == "meta-llama/Llama-3.1-8B-Instruct" and run.source_file == VLLM.name
    (lv,) = run.levels
    assert lv.concurrency == 16 and lv.request_rate is None  # "inf" rate with a cap: closed loop at the cap
    assert lv.prompt_tokens == 1024 and lv.output_tokens == 128 and lv.completed == 320
    assert lv.ttft_s.p50 == pytest.approx(0.0796) and lv.ttft_s.mean == pytest.approx(0.0843)
    assert lv.tpot_s.p99 == pytest.approx(0.0139) and lv.e2e_s.p50 == pytest.approx(1.607)
    assert lv.output_tok_s == pytest.approx(994.2)


def test_sglang_reader_has_one_level_per_line() -> None:
    run = read_bench_file(SGLANG)
    assert [lv.concurrency for lv in run.levels] == [1, 8, 32]
    assert [lv.ttft_s.mean for lv in run.levels] == pytest.approx([0.038, 0.052, 0.095])
    assert run.levels[2].e2e_s.mean == pytest.approx((95 + 127 * 10.4) / 1e3)


def test_guidellm_reader_on_the_real_tools_file() -> None:
    run = read_bench_file(GUIDELLM)
    assert run.tool_version == "0.8.1" and run.model == "tiny-llama"
    (lv,) = run.levels
    raw = json.loads(GUIDELLM.read_text())["benchmarks"][0]["metrics"]
    assert lv.concurrency == 4 and lv.completed == 16
    assert lv.ttft_s.p50 == pytest.approx(raw["time_to_first_token_ms"]["successful"]["median"] / 1e3)
    # GuideLLM's "ITL" is vLLM's TPOT (first token excluded): read as the decode step
    assert lv.tpot_s.mean == pytest.approx(raw["inter_token_latency_ms"]["successful"]["mean"] / 1e3)
    assert lv.output_tokens == 32


def test_aiperf_reader_on_the_real_tools_file() -> None:
    run = read_bench_file(AIPERF)
    raw = json.loads(AIPERF.read_text())
    assert run.tool_version == "0.13.0" and run.model == "tiny-llama"
    (lv,) = run.levels
    assert lv.concurrency == 4 and lv.completed == 16 and lv.output_tokens == 32
    assert lv.ttft_s.p50 == pytest.approx(raw["time_to_first_token"]["p50"] / 1e3)
    assert lv.tpot_s.p50 == pytest.approx(raw["inter_token_latency"]["p50"] / 1e3)


def test_mlperf_reader_reads_the_server_scenario() -> None:
    (lv,) = read_bench_file(MLPERF).levels
    assert lv.request_rate == 10 and lv.concurrency is None
    assert lv.ttft_s.p50 == pytest.approx(0.151) and lv.ttft_s.p99 == pytest.approx(0.612)
    assert lv.tpot_s.mean == pytest.approx(0.0116) and lv.output_tok_s == pytest.approx(2542.3)


def test_llmd_reader_reads_units_and_load() -> None:
    run = read_bench_file(LLMD)
    (lv,) = run.levels
    assert run.tool_version == "inference-perf 0.3.0" and run.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert lv.request_rate == 4 and lv.concurrency is None  # concurrency .inf: no cap
    assert lv.tpot_s.p50 == pytest.approx(0.0078)  # ms/token converted
    assert lv.ttft_s.p99 == pytest.approx(0.121)


def test_rows_keep_file_tool_version_and_the_setup() -> None:
    run = read_bench_file(GUIDELLM)
    setup = bench_setup([*H100_8B, "served_model=tiny-llama", "engine=llama.cpp", "precision=fp8"])
    rows = run_rows(run, setup)
    assert {r.metric for r in rows} >= {"ttft_ms", "tpot_ms", "e2e_s", "output_tok_s_total"}
    for r in rows:
        assert r.source == "guidellm:guidellm_0.8.1_concurrent4.json (guidellm 0.8.1)"
        assert (r.gpu, r.model, r.engine, r.precision, r.concurrency) == (
            "h100-sxm", "llama-3.1-8b", "llama.cpp", "fp8", 4)
    assert setup.scenario.weights_dtype == "fp8" and setup.scenario.kv_dtype == "bf16"  # vLLM-family KV stays 16-bit


def test_model_comes_from_the_file_when_the_user_gives_none() -> None:
    run = read_bench_file(VLLM)
    setup = bench_setup(["gpu=h100-sxm"], file_model=run.model)
    assert setup.scenario.model == "llama-3.1-8b"


def test_import_bench_prints_measured_beside_predicted() -> None:
    code, out, _ = cli(["import-bench", str(VLLM), "--set", "gpu=h100-sxm"])
    assert code == 0
    payload = json.loads(out)
    (run,) = payload["runs"]
    assert run["tool"] == "vllm" and run["setup"]["model"] == "llama-3.1-8b"
    rows = {r["metric"]: r for r in run["rows"]}
    ttft = rows["ttft_ms"]
    assert ttft["measured"] == pytest.approx(79.6) and ttft["predicted"] > 0
    assert ttft["error_pct"] == pytest.approx((ttft["predicted"] - 79.6) / 79.6 * 100)
    assert ttft["scenario"]["gpu"] == "h100-sxm" and ttft["operating_point"]["load"] == "concurrency"
    assert payload["saved"] == []


@pytest.mark.parametrize("fmt", ["csv", "table"])
def test_import_bench_csv_and_table(fmt: str) -> None:
    code, out, _ = cli(["import-bench", str(SGLANG), *sum((["--set", s] for s in H100_8B), []), "--format", fmt])
    assert code == 0
    assert "sglang:sglang_bench_serving.jsonl" in out and "concurrency 32" in out


def test_a_mismatched_concurrency_names_both_values() -> None:
    code, _, err = cli(["import-bench", str(VLLM), "--set", "gpu=h100-sxm", "--set", "concurrency=8"])
    assert code == 2 and err.count("\n") == 1
    assert "the file says 16" in err and "concurrency=8" in err


def test_a_mismatched_length_names_both_values() -> None:
    code, _, err = cli(["import-bench", str(VLLM), "--set", "gpu=h100-sxm", "--set", "workload.prompt_tokens=4000"])
    assert code == 2 and "1024.0 tokens" in err and "4000" in err


def test_wrong_tool_is_one_line() -> None:
    code, _, err = cli(["import-bench", str(MLPERF), "--tool", "vllm", "--set", "gpu=h100-sxm"])
    assert code == 2 and err.count("\n") == 1 and "mlperf_log_summary.txt" in err


def test_saved_import_is_a_probe_run_record_and_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    monkeypatch.setenv("DATABASE_URL", url)
    code, _, err = cli(["import-bench", str(AIPERF), str(VLLM), "--set", "gpu=h100-sxm", "--set",
                        "model=llama-3.1-8b", "--set", "served_model=tiny-llama", "--save"])
    # the vLLM file names Llama 3.1 8B, not tiny-llama: refused before anything is saved
    assert code == 2 and "served_model" in err
    store = make_engine(url)
    assert list_probe_runs(engine=store) == []
    code, out, err = cli(["import-bench", str(AIPERF), "--set", "gpu=h100-sxm", "--set", "model=llama-3.1-8b",
                          "--set", "served_model=tiny-llama", "--save"])
    assert code == 0, err
    (stored_id,) = json.loads(out)["saved"]
    (stored,) = list_probe_runs(engine=store)
    assert stored.id == stored_id and stored.endpoint_url == "import:aiperf:profile_export_aiperf.json"
    assert stored.settings["source"] == "import" and stored.settings["tool_version"] == "0.13.0"
    assert "/" not in stored.settings["source_file"]
    back = bench_run_from_summary(stored.summary, stored.settings, store_id=stored.id)
    assert back.levels == read_bench_file(AIPERF).levels


def test_probe_record_of_an_import_has_probe_levels() -> None:
    run = read_bench_file(SGLANG)
    probe = to_probe_run(run)
    assert [lv.concurrency for lv in probe.levels] == [1, 8, 32]
    assert probe.levels[0].ttft_s.mean == pytest.approx(0.038)
    assert probe.settings["not_measured"]["0"] == ["goodput_req_s"]


def test_a_stored_probe_summary_reads_as_a_run() -> None:
    run = read_bench_file(SGLANG)
    summary = to_probe_run(run).to_json_dict()
    back = bench_run_from_summary(summary, {"source": "probe"})
    assert back.tool == "probe" and [lv.concurrency for lv in back.levels] == [1, 8, 32]
    assert back.levels[1].ttft_s.p50 == pytest.approx(run.levels[1].ttft_s.p50)


def test_setup_rejects_bad_set_values() -> None:
    with pytest.raises(ScenarioError, match="n_gpus"):
        bench_setup([*H100_8B, "parallel.tp=2", "n_gpus=3"])
    with pytest.raises(ScenarioError, match="precision"):
        bench_setup([*H100_8B, "precision=fp3"])


def test_calibrate_from_a_stored_run_and_a_file_saves_a_scenario_naming_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.store import get_scenario

    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    monkeypatch.setenv("DATABASE_URL", url)
    code, out, err = cli(["import-bench", str(VLLM), "--set", "gpu=h100-sxm", "--save"])
    assert code == 0, err
    (stored_id,) = json.loads(out)["saved"]
    code, out, err = cli(["calibrate", "--from", str(stored_id), str(SGLANG), "--set", "gpu=h100-sxm", "--set",
                          "model=llama-3.1-8b", "--save", "--name", "8b from my runs"])
    assert code == 0, err
    payload = json.loads(out)
    assert payload["cross_validation"] == "leave-one-run-out"
    assert payload["calibrated_from"] == (f"store {stored_id} (vllm:vllm_serve_llama8b_c16.json), "
                                          "sglang:sglang_bench_serving.jsonl")
    assert {r["run"] for r in payload["rows"]} == set(payload["runs"])
    assert all(r["held_out_error_pct"] is not None for r in payload["rows"])
    saved = get_scenario(engine=make_engine(url), ref=payload["saved"])
    assert saved.scenario.efficiency.calibrated_from == payload["calibrated_from"]
    assert saved.scenario.efficiency.bandwidth == pytest.approx(payload["efficiency"]["bandwidth"])
    assert "calibrated" in saved.tags


def test_calibrate_table_and_a_missing_run_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    monkeypatch.setenv("DATABASE_URL", url)
    code, out, _ = cli(["calibrate", "--from", str(SGLANG), "--set", "gpu=h100-sxm", "--set", "model=llama-3.1-8b",
                        "--format", "table"])
    assert code == 0 and "leave-one-level-out" in out and "efficiency.bandwidth=" in out
    code, _, err = cli(["calibrate", "--from", "999", "--set", "gpu=h100-sxm"])
    assert code == 2 and "no probe run 999" in err


def test_an_imported_run_and_a_probe_run_side_by_side_on_both_stores(engine) -> None:  # noqa: F811
    """SQLite and the local PostgreSQL: the imported run is a probe-run record beside a probe's."""
    import datetime as dt

    from planner.store import save_probe_run

    run = read_bench_file(GUIDELLM)
    setup = bench_setup([*H100_8B, "served_model=tiny-llama", "engine=llama.cpp"])
    imported = save_bench_run(engine=engine, run=run, setup=setup)
    probe = save_probe_run(engine=engine, endpoint_url="http://127.0.0.1:8000", settings={"model": "m"},
                           summary={"run_id": "probe-1", "levels": []}, started_at=dt.datetime.now(dt.UTC))
    listed = {r.id: r for r in list_probe_runs(engine=engine)}
    assert set(listed) == {imported, probe}
    got = listed[imported]
    assert got.endpoint_url == "import:guidellm:guidellm_0.8.1_concurrent4.json"
    assert got.settings["setup"]["engine"] == "llama.cpp" and got.settings["tool"] == "guidellm"
    assert bench_run_from_summary(got.summary, got.settings, store_id=got.id).levels == run.levels
