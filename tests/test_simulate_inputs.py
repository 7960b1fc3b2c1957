"""Simulator inputs: arrival processes, lengths, sessions, traces, validation, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import Scenario, ScenarioError
from planner.cli import main
from planner.physics import draw_lengths, parse_trace_csv
from planner.simulate import (
    arrival_times,
    find_knee,
    generate_requests,
    latency_stats,
    load_trace,
    parse_request_trace_csv,
    sim_options,
    simulate,
)

ROOT = Path(__file__).resolve().parents[1]
SUMMARY_KEYS = {"requests", "duration_s", "throughput_req_s", "mean_in_flight", "ttft_s", "itl_s", "e2e_s",
                "goodput_req_s", "preemptions", "prefix_hit_rate"}


def test_poisson_and_gamma_rates_and_burstiness() -> None:
    rng = np.random.default_rng(0)
    for process, b, cv in [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5)]:
        t = arrival_times(rate_req_s=5.0, count=200_000, process=process, burstiness=b, rng=rng)
        gaps = np.diff(t)
        assert 1.0 / gaps.mean() == pytest.approx(5.0, rel=0.02)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.03)  # CV = 1/√shape


def test_lognormal_lengths_keep_the_mean() -> None:
    rng = np.random.default_rng(1)
    x = draw_lengths(mean_tokens=2000, count=200_000, distribution="lognormal", sigma=0.8, rng=rng)
    assert x.mean() == pytest.approx(2000, rel=0.02)
    assert np.median(x) < 2000  # long right tail
    assert x.min() >= 1
    assert set(draw_lengths(mean_tokens=7, count=5, distribution="fixed", sigma=1.0, rng=rng)) == {7}


def test_multi_turn_prompts_carry_the_conversation() -> None:
    reqs = generate_requests(Scenario(), sim_options(requests=12, multi_turn=3, seed=4))
    assert len(reqs) == 12
    for i in range(0, 12, 3):
        t0, t1, t2 = reqs[i:i + 3]
        assert t0.parent == -1 and t1.parent == i and t2.parent == i + 1
        assert t1.prefix_tokens == t0.prompt_tokens + t0.output_tokens
        assert t1.prompt_tokens > t1.prefix_tokens
        assert t2.prefix_tokens == t1.prompt_tokens + t1.output_tokens
        assert t0.prefix_key == t1.prefix_key == t2.prefix_key
        assert t0.cache_on_finish and t1.cache_on_finish and not t2.cache_on_finish


def test_trace_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n0.5,200,20\n0.5,300,5\n")
    reqs = load_trace(path)
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in reqs] == [
        (0.0, 100, 10), (0.5, 200, 20), (0.5, 300, 5)]
    run = simulate(Scenario(), sim_options(), reqs)
    assert run.requests == 3
    assert list(run.arrival_s) == [0.0, 0.5, 0.5]


@given(st.one_of(st.integers(-3, 200_000).map(str), st.floats(allow_nan=True, allow_infinity=True).map(str),
                 st.text(alphabet="0123456789.-+eE x_", max_size=10)))
def test_both_trace_formats_read_a_token_count_alike(raw: str) -> None:
    """One reader for token counts: a length trace and a timed request trace accept the same
    field with the same value, or both refuse it."""
    try:
        pairs: int | str = parse_trace_csv(f"prompt_tokens,output_tokens\n{raw},5\n")[0][0]
    except ScenarioError:
        pairs = "refused"
    try:
        timed: int | str = parse_request_trace_csv(f"arrival_s,prompt_tokens,output_tokens\n0,{raw},5\n")[0].prompt_tokens
    except ScenarioError:
        timed = "refused"
    assert pairs == timed


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("arrival_s,prompt_tokens,output_tokens\n", "trace: empty"),
        ("", "trace: missing column"),
        ("arrival_s,prompt_tokens,output_tokens\n1.0,10,10\n0.5,10,10\n", "trace.arrival_s: arrivals must be sorted"),
        ("arrival_s,prompt_tokens,output_tokens\n0,0,10\n", "trace.prompt_tokens"),
        ("arrival_s,prompt_tokens,output_tokens\n0,10,-1\n", "trace.output_tokens"),
        ("arrival_s,prompt_tokens,output_tokens\n-1,10,1\n", "trace.arrival_s: negative"),
        ("arrival_s,prompt_tokens,output_tokens\nsoon,10,1\n", "trace.arrival_s: not a number"),
        ("arrival_s,prompt_tokens\n0,10\n", "output_tokens"),
    ],
)
def test_bad_traces_are_rejected(text: str, needle: str) -> None:
    with pytest.raises(ScenarioError, match=needle):
        parse_request_trace_csv(text)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"rate_req_s": -1.0}, "rate_req_s"),
        ({"rate_req_s": 0.0}, "rate_req_s"),
        ({"requests": 0}, "requests"),
        ({"burstiness": 0.0}, "burstiness"),
        ({"router": "random"}, "router"),
        ({"replicas": 0}, "replicas"),
        ({"slo_attainment": 1.5}, "slo_attainment"),
        ({"arrivals": "poisson"}, "arrivals: unknown key"),
    ],
)
def test_bad_options_name_the_field(kwargs: dict, needle: str) -> None:
    with pytest.raises(ScenarioError, match=needle):
        sim_options(**kwargs)


def test_requests_that_cannot_fit_the_kv_budget_are_refused() -> None:
    from planner import InsufficientMemoryError

    with pytest.raises(InsufficientMemoryError, match="KV budget holds"):
        simulate(Scenario(), sim_options(requests=5, kv_capacity_tokens=1000, lengths="fixed"))


def test_knee_and_stats() -> None:
    assert find_knee(rates=[1, 2, 3, 4], attainments=[1.0, 0.995, 0.98, 0.999], target=0.99) == 2
    assert find_knee(rates=[3, 1, 2], attainments=[0.5, 1.0, 1.0], target=0.99) == 2
    assert find_knee(rates=[1, 2], attainments=[0.9, 0.5], target=0.99) is None
    st = latency_stats(np.arange(1, 101, dtype=float))
    assert st.model_dump() == {"mean": 50.5, "p50": 50.5, "p90": pytest.approx(90.1), "p99": pytest.approx(99.01)}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_cli_json_keys(capsys) -> None:
    assert main(["simulate", "--requests", "150", "--rate", "3", "--seed", "7", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert SUMMARY_KEYS <= set(data)
    for key in ("ttft_s", "itl_s", "e2e_s"):
        assert set(data[key]) == {"mean", "p50", "p90", "p99"}
    assert data["requests"] == 150
    assert data["mean_in_flight"] == pytest.approx(data["throughput_req_s"] * data["e2e_s"]["mean"], rel=1e-6)


def test_cli_rates_sweep_and_formats(capsys) -> None:
    assert main(["simulate", "--set", "workload.output_tokens=100", "--requests", "120", "--rates", "1,3",
                 "--router", "least_loaded", "--replicas", "2", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [lv["offered_rate_req_s"] for lv in data["levels"]] == [1.0, 3.0]
    assert all(SUMMARY_KEYS <= set(lv) for lv in data["levels"])
    assert "knee_rate_req_s" in data
    assert main(["simulate", "--requests", "50", "--rate", "2", "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert "ttft_s.p99" in header and "goodput_req_s" in header
    assert main(["simulate", "--requests", "50", "--rate", "2", "--multi-turn", "3", "--replicas", "2",
                 "--compare-routers", "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "prefix_affinity" in table and "round_robin" in table


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rate", "-1"], "rate_req_s"),
        (["--rates", "1,-2"], "--rates"),
        (["--rates", "1,x"], "--rates"),
        (["--requests", "0"], "requests"),
        (["--burstiness", "-0.5", "--arrival", "gamma"], "burstiness"),
        (["--set", "slo.ttft_s=0"], "slo.ttft_s"),
    ],
)
def test_cli_bad_input_is_one_line(args: list[str], needle: str) -> None:
    out = run_cli("simulate", *args)
    assert out.returncode == 2
    assert needle in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_cli_bad_traces(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("arrival_s,prompt_tokens,output_tokens\n")
    unsorted = tmp_path / "unsorted.csv"
    unsorted.write_text("arrival_s,prompt_tokens,output_tokens\n2,10,10\n1,10,10\n")
    for path, needle in [(empty, "trace: empty"), (unsorted, "trace.arrival_s"),
                         (tmp_path / "missing.csv", "trace: cannot read")]:
        out = run_cli("simulate", "--trace", str(path))
        assert out.returncode == 2, out.stderr
        assert needle in out.stderr
        assert "Traceback" not in out.stderr
