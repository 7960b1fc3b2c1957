"""A benchmark file from a stranger is untrusted: a 2 GB file, a JSON bomb, a 10^6-row
JSONL, NaN and negative latencies, a mismatched model name.  Each is one line naming
the problem (exit status 2), and nothing is saved."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from planner.benchimport import MAX_BENCH_FILE_BYTES, MAX_BENCH_ROWS, Deadline, parse_bench, read_bench_file
from planner.cli import main
from planner.errors import ScenarioError
from planner.store import list_probe_runs
from planner.store.db import make_engine
from planner.store.migrate import upgrade

DATA = Path(__file__).parent / "data" / "bench"
VLLM = json.loads((DATA / "vllm_serve_llama8b_c16.json").read_text())


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def refused(path: Path, store: str, *extra: str) -> str:
    """Run import-bench --save on ``path``: exit 2, one line on stderr, nothing stored."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["import-bench", str(path), "--set", "gpu=h100-sxm", "--set", "model=llama-3.1-8b", *extra,
                     "--save"])
    text = err.getvalue()
    assert code == 2, text
    assert text.count("\n") == 1 and text.startswith("error: ")
    assert out.getvalue() == ""
    assert list_probe_runs(engine=make_engine(store)) == []
    return text


def vllm_file(tmp_path: Path, **changes: object) -> Path:
    p = tmp_path / "vllm.json"
    p.write_text(json.dumps({**VLLM, **changes}))  # json.dumps writes NaN as the bare token NaN
    return p


def test_a_2gb_file_is_refused_by_size_before_a_byte_is_read(tmp_path: Path, store: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "huge.json"
    with big.open("wb") as fh:
        fh.truncate(2 * 1024**3)  # sparse: 2 GB by os.stat, nothing on disk

    def never(*_a: object, **_k: object) -> str:
        raise AssertionError("the file was opened for reading")

    monkeypatch.setattr("planner.benchimport.read.read_text_file", never)
    text = refused(big, store)
    assert "2,147,483,648 bytes" in text and f"{MAX_BENCH_FILE_BYTES:,}" in text and "huge.json" in text


def test_an_upload_over_the_cap_is_refused_by_its_length() -> None:
    with pytest.raises(ScenarioError, match="over the limit"):
        parse_bench(b" " * (MAX_BENCH_FILE_BYTES + 1), "upload.json")


def test_a_deeply_nested_json_bomb(tmp_path: Path, store: str) -> None:
    p = tmp_path / "bomb.json"
    p.write_text('{"completed": 1, "mean_ttft_ms": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested deeper than" in refused(p, store, "--tool", "vllm")


def test_a_huge_array_is_held_to_the_row_cap(tmp_path: Path, store: str) -> None:
    p = vllm_file(tmp_path, ttfts=[0.1] * 1_000_000)
    text = refused(p, store)
    assert "ttfts" in text and f"{MAX_BENCH_ROWS:,}" in text


def test_a_million_row_jsonl_is_held_to_the_row_cap(tmp_path: Path, store: str) -> None:
    p = tmp_path / "sglang.jsonl"
    p.write_text('{"completed": 1, "mean_ttft_ms": 5.0}\n' * 1_000_000)
    assert f"more than {MAX_BENCH_ROWS:,} lines" in refused(p, store, "--tool", "sglang")


def test_nan_latency(tmp_path: Path, store: str) -> None:
    text = refused(vllm_file(tmp_path, median_ttft_ms=float("nan")), store)
    assert "median_ttft_ms" in text and "NaN" in text


def test_negative_latency(tmp_path: Path, store: str) -> None:
    text = refused(vllm_file(tmp_path, median_tpot_ms=-3.0), store)
    assert "median_tpot_ms" in text and "negative" in text


def test_negative_per_request_latency(tmp_path: Path, store: str) -> None:
    text = refused(vllm_file(tmp_path, ttfts=[0.1, -0.2]), store)
    assert "ttfts[1]" in text


def test_infinite_latency(tmp_path: Path, store: str) -> None:
    p = tmp_path / "inf.json"
    p.write_text(json.dumps({**VLLM, "mean_e2el_ms": float("inf")}))
    assert "mean_e2el_ms" in refused(p, store)


def test_a_mismatched_model_name_names_both(tmp_path: Path, store: str) -> None:
    p = vllm_file(tmp_path, model_id="Qwen/Qwen2.5-72B-Instruct")
    text = refused(p, store)
    assert "Qwen/Qwen2.5-72B-Instruct" in text and "llama-3.1-8b" in text


def test_a_yaml_alias_bomb(tmp_path: Path, store: str) -> None:
    p = tmp_path / "report.yaml"
    p.write_text("version: '0.2'\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                 "c: [*b, *b, *b, *b, *b, *b, *b, *b]\n")
    assert "anchors and aliases" in refused(p, store, "--tool", "llmd")


def test_text_fields_with_control_characters(tmp_path: Path, store: str) -> None:
    assert "control characters" in refused(vllm_file(tmp_path, model_id="llama\x1b[31m"), store)


def test_not_a_number(tmp_path: Path, store: str) -> None:
    assert "expected a number" in refused(vllm_file(tmp_path, median_ttft_ms="fast"), store)


def test_an_unknown_format_says_to_give_the_tool(tmp_path: Path, store: str) -> None:
    p = tmp_path / "other.json"
    p.write_text('{"hello": 1}')
    assert "give --tool" in refused(p, store)


def test_a_directory_or_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="directory"):
        read_bench_file(tmp_path)
    with pytest.raises(ScenarioError, match="cannot read"):
        read_bench_file(tmp_path / "absent.json")


def test_the_time_budget_is_enforced() -> None:
    with pytest.raises(ScenarioError, match="longer than the limit"):
        Deadline("slow.json", seconds=-1.0).check()
