"""``python -m planner validate`` on a small fixed file: stable structure and values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.cli import main

SMALL = str(Path(__file__).parent / "data" / "validate_small.json")


@pytest.fixture(scope="module")
def payload() -> dict:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["validate", "--data", SMALL]) == 0
    return json.loads(buf.getvalue())


def test_rows_in_file_order_none_dropped(payload: dict) -> None:
    assert [r["id"] for r in payload["rows"]] == [
        "nim_70b_c1_ttft", "triton_8b_qps2_out", "replicas_8b_qps8_out", "unknown_model", "unknown_gpu",
        "no_lengths", "odd_metric"]
    for r in payload["rows"]:
        assert set(r) >= {"id", "metric", "measured", "predicted", "error_pct", "skipped_reason", "scenario"}


def test_skipped_rows_say_why(payload: dict) -> None:
    rows = {r["id"]: r for r in payload["rows"]}
    reasons = {k: rows[k]["skipped_reason"] for k in ("unknown_model", "no_lengths", "odd_metric")}
    assert "unknown model 'Mistral-7B'" in reasons["unknown_model"]
    assert "isl/osl" in reasons["no_lengths"]
    assert "joules_per_token" in reasons["odd_metric"]
    for k in reasons:
        assert rows[k]["predicted"] is None and rows[k]["error_pct"] is None


def test_unstated_gpu_variant_predicted_under_the_common_one(payload: dict) -> None:
    row = {r["id"]: r for r in payload["rows"]}["unknown_gpu"]
    assert row["skipped_reason"] is None and row["predicted"] is not None
    assert row["scenario"]["gpu"] == "h100-sxm" and row["gpu"] == "h100-sxm"
    assert any("h100_unspecified" in n and "assumed the common variant h100-sxm" in n for n in row["notes"])


def test_scenario_used(payload: dict) -> None:
    rows = {r["id"]: r for r in payload["rows"]}
    sc = rows["nim_70b_c1_ttft"]["scenario"]
    assert sc["gpu"] == "h100-sxm" and sc["model"] == "llama-3.3-70b"
    assert sc["weights_dtype"] == "fp8" and sc["kv_dtype"] == "fp8"  # NIM runs TensorRT-LLM: FP8 KV
    assert sc["parallel"]["tp"] == 2
    assert sc["workload"]["prompt_tokens"] == 5000 and sc["workload"]["output_tokens"] == 500
    # The efficiencies the row was predicted at, the per-layer overhead included.
    assert set(sc["efficiency"]) == {"bandwidth", "compute", "step_overhead_s", "layer_overhead_s"}
    vl = rows["replicas_8b_qps8_out"]
    assert vl["scenario"]["kv_dtype"] == "bf16" and vl["family"] == "vllm"
    # 4 GPUs at TP 1 = 4 replicas, each at 8 / 4 = 2 req/s.
    assert vl["operating_point"]["replicas"] == 4
    assert vl["scenario"]["workload"]["requests_per_s"] == 2.0


def test_predicted_values(payload: dict) -> None:
    rows = {r["id"]: r for r in payload["rows"]}
    # Below capacity an open-loop replica emits rate × OSL output tokens/s: 2 × 256 = 512.
    assert rows["triton_8b_qps2_out"]["predicted"] == pytest.approx(512.0)
    assert rows["triton_8b_qps2_out"]["error_pct"] == pytest.approx((512 - 504) / 504 * 100)
    # Four replicas at 2 req/s each: 4 × 2 × 256 = 2048.
    assert rows["replicas_8b_qps8_out"]["predicted"] == pytest.approx(2048.0)
    # NVIDIA NIM 1.8 table: TTFT 406.77 ms for one 5000-token prompt on 2× H100 FP8.
    assert rows["nim_70b_c1_ttft"]["predicted"] == pytest.approx(406.77, rel=0.25)


def test_summary(payload: dict) -> None:
    s = payload["summary"]
    assert s["output_tok_s_total"]["count"] == 3 and s["output_tok_s_total"]["skipped"] == 0
    # |512 − 504| / 504 = 1.59 % and |2048 − 2000| / 2000 = 2.4 % beside the assumed-variant row: the median
    # is the middle one of the three.
    errs = [r["error_pct"] for r in payload["rows"] if r["metric"] == "output_tok_s_total"]
    assert errs[:2] == pytest.approx([800 / 504, 2.4], rel=1e-6)
    assert s["output_tok_s_total"]["median_abs_error_pct"] == pytest.approx(sorted(abs(e) for e in errs)[1])
    assert s["output_tok_s_total"]["median_signed_error_pct"] == pytest.approx(sorted(errs)[1])
    assert s["ttft_ms"]["count"] == 1 and s["ttft_ms"]["skipped"] == 1
    assert set(payload["summary_by_family"]) == {"trtllm", "vllm"}


@pytest.mark.parametrize("fmt", ["csv", "table"])
def test_other_formats(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--data", SMALL, "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "triton_8b_qps2_out" in out and "unknown model 'Mistral-7B'" in out
    if fmt == "table":
        assert "median_abs_error_pct" in out


def test_bad_file_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps([{"id": "x", "engine": "vLLM", "model": "m", "precision": "bf16", "gpu": "g",
                              "n_gpus": "many", "metric": "itl_ms", "value": 1}]))
    assert main(["validate", "--data", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "row 0 (id 'x')" in err and "n_gpus" in err


def test_by_groups_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--data", SMALL, "--by", "gpu,tp,family"]) == 0
    out = json.loads(capsys.readouterr().out)
    by = out["summary_by"]
    assert list(by) == ["tp", "gpu", "family"]  # GROUP_KEYS order
    predicted = [r for r in out["rows"] if r["error_pct"] is not None]
    # Every predicted row is counted once per grouping, under its own TP/GPU/family.
    for key in ("tp", "gpu", "family"):
        assert sum(g["all"]["count"] for g in by[key].values()) == len(predicted)
        for name, g in by[key].items():
            own = [r for r in predicted if (f"tp{r['tp']}" if key == "tp" else r[key]) == name]
            assert g["all"]["count"] == len(own)
    assert by["tp"]["tp2"]["ttft"]["count"] == 1  # the NIM 70B TP2 TTFT row
    nim = next(r for r in out["rows"] if r["id"] == "nim_70b_c1_ttft")
    assert by["tp"]["tp2"]["ttft"]["median_signed_error_pct"] == pytest.approx(nim["error_pct"])
    assert by["gpu"]["h100-sxm"]["throughput"]["count"] == 3
    assert main(["validate", "--data", SMALL, "--by", "tp", "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "tp tp2 ttft" in table and "median_signed_error_pct" in table


def test_bad_by_key_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--data", SMALL, "--by", "tp,colour"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--by" in err and "colour" in err


def test_cv_without_other_sources_skips_rather_than_guessing(capsys: pytest.CaptureFixture[str]) -> None:
    # The small file states no sources: one publication, so leave-one-source-out has nothing to fit on.
    assert main(["validate", "--data", SMALL, "--cv", "loso", "--by", "source"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cross_validation"] == "loso" and list(out["summary_by"]["source"]) == ["(no source)"]
    assert all(r["predicted"] is None for r in out["rows"])
    nim = next(r for r in out["rows"] if r["id"] == "nim_70b_c1_ttft")
    assert "no predictable row outside '(no source)'" in nim["skipped_reason"]


def test_the_table_names_each_rows_layout_with_ep_and_dp_attention(tmp_path: Path) -> None:
    """The table's scenario column names the layout predicted (issue 25: every label names EP and
    DP attention), also where the row left dp_attention to its notes."""
    import contextlib
    import io

    base = {"engine": "SGLang", "model": "DeepSeek-R1", "precision": "fp8", "gpu": "h200_sxm", "n_gpus": 8,
            "tp": 8, "isl": 1024, "osl": 1024, "concurrency": 16, "metric": "tpot_ms", "value": 20.0}
    rows = [{**base, "id": "tp_only", "ep": 1},
            {**base, "id": "ep_tp_attention", "ep": 8},
            {**base, "id": "ep_dp_attention", "ep": 8, "dp_attention": True},
            {**base, "id": "dp_from_notes", "ep": 8, "notes": "launched with --enable-dp-attention"}]
    data = tmp_path / "rows.json"
    data.write_text(json.dumps(rows))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["validate", "--data", str(data), "--format", "table"]) == 0
    lines = {line.split()[0]: line for line in buf.getvalue().splitlines() if line.split()}
    assert " TP8 x1 " in lines["tp_only"]
    assert " TP8·EP8 x1 " in lines["ep_tp_attention"]
    assert " TP8·EP8·DPattn x1 " in lines["ep_dp_attention"]
    assert " TP8·EP8·DPattn x1 " in lines["dp_from_notes"]
