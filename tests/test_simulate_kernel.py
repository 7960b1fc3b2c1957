"""The compiled replica (planner.simulate.kernel) gives the run the Python replica gives.

For request streams that name no prefix, replicas simulated alone run as compiled code.
Each case below is run three ways: compiled (as the engine chooses), the Python replica
alone on the same arrivals, and every replica on the engine's one event queue.  Every
per-request array, every timeline point and every run total must be equal, not merely
close: the kernel schedules the same iterations and sums the same step times in the
same order.  Hypothesis draws the cases over what the scheduler branches on: block size,
chunked or whole prefills (prompts longer than the chunk), the batch cap, a KV budget
small enough to preempt, bursty arrivals, outputs of one token.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario  # noqa: E402
from planner.errors import InsufficientMemoryError  # noqa: E402
from planner.simulate import SimRun, engine, sim_options, simulate  # noqa: E402
from planner.simulate import kernel as kernel_mod  # noqa: E402

ARRAYS = ("arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens", "hit_tokens", "tpot_s", "itl_s")
TOTALS = ("preemptions", "mean_in_flight", "duration_s", "iterations", "kv_capacity_tokens", "timeline", "kv_blocks")


def _assert_same(a: SimRun, b: SimRun, what: str) -> None:
    for k in ARRAYS:
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype.kind == y.dtype.kind, (what, k)
        assert np.array_equal(x, y), (what, k)
    for k in TOTALS:
        assert getattr(a, k) == getattr(b, k), (what, k)


def _three_ways(scenario: Scenario, options: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[SimRun, int]:
    """The compiled run (checked equal to the other two) and how many compiled runs it took."""
    calls: list[int] = []
    real = kernel_mod.run_compiled

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*args, **kw)

    with monkeypatch.context() as m:
        m.setattr(kernel_mod, "run_compiled", counting)
        compiled = simulate(scenario, options)
    with monkeypatch.context() as m:
        m.setattr(engine._Sim, "plain", lambda self: False)
        python_alone = simulate(scenario, options)
    with monkeypatch.context() as m:
        m.setattr(engine._Sim, "alone", lambda self: False)
        shared = simulate(scenario, options)
    _assert_same(compiled, python_alone, "compiled vs Python replica alone")
    _assert_same(compiled, shared, "compiled vs the shared event queue")
    return compiled, len(calls)


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "rr_8": ({}, {"requests": 800, "rate_req_s": 40.0, "replicas": 8, "seed": 41}),
    "preempting": ({"serving": {"block_tokens": 32}},
                   {"requests": 400, "rate_req_s": 24.0, "replicas": 3, "arrival": "gamma", "burstiness": 0.3,
                    "kv_capacity_tokens": 20_000, "seed": 42}),
    "whole_prefills": ({"serving": {"chunk_tokens": 1024}},
                       {"requests": 200, "rate_req_s": 6.0, "chunked_prefill": False, "seed": 43}),
    "batch_cap_2": ({}, {"requests": 150, "rate_req_s": 9.0, "max_batch": 2, "seed": 44}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_equals_the_python_replica(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sc_kw, opt_kw = CASES[name]
    run, calls = _three_ways(Scenario(**sc_kw), sim_options(**opt_kw), monkeypatch)
    assert calls == 1  # the compiled path was taken
    if name == "preempting":
        assert run.preemptions > 0  # the case exercises preemption
    if name == "whole_prefills":
        assert run.prompt_tokens.max() > 1024  # prefills longer than a chunk, priced exactly
    if name == "batch_cap_2":
        assert max(max(t["batch_size"]) for t in run.timeline) <= 2


def test_outputs_grown_mid_run_resume_where_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long outputs one at a time: many iterations per request fill the kernel's first buffers;
    it returns asking for room, the caller grows them, and the run resumes bit-identically."""
    codes: list[int] = []
    real = kernel_mod.replica_kernel

    def recording(*args: Any) -> int:
        code = real(*args)
        codes.append(code)
        return code

    monkeypatch.setattr(kernel_mod, "replica_kernel", recording)
    scenario = Scenario(workload={"prompt_tokens": 64, "output_tokens": 400})
    _three_ways(scenario, sim_options(requests=40, rate_req_s=0.05, lengths="fixed", seed=46), monkeypatch)
    assert kernel_mod.NEED_SPACE in codes
    assert codes[-1] == kernel_mod.DONE


def test_a_named_prefix_keeps_the_python_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel has no prefix cache: a stream that names a prefix runs the Python replica."""
    calls: list[int] = []
    monkeypatch.setattr(kernel_mod, "run_compiled", lambda *a, **k: calls.append(1))
    run = simulate(Scenario(workload={"prefix_tokens": 512, "prefix_hit_rate": 0.8}),
                   sim_options(requests=100, rate_req_s=5.0, seed=45))
    assert not calls
    assert run.hit_tokens.sum() > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    block_tokens=st.sampled_from([1, 8, 16, 32]),
    chunk_tokens=st.sampled_from([64, 512, 2048]),
    chunked=st.booleans(),
    replicas=st.integers(1, 4),
    max_batch=st.sampled_from([None, 1, 3, 16]),
    kv_tokens=st.sampled_from([None, 4_000, 12_000]),
    prompt_tokens=st.integers(8, 3_000),
    output_tokens=st.integers(1, 300),
    lengths=st.sampled_from(["lognormal", "fixed"]),
    arrival=st.sampled_from(["poisson", "gamma"]),
    per_replica_rate=st.floats(0.5, 20.0),
    seed=st.integers(0, 2**16),
)
def test_compiled_equals_the_python_replica_anywhere(block_tokens: int, chunk_tokens: int, chunked: bool,
                                                     replicas: int, max_batch: int | None, kv_tokens: int | None,
                                                     prompt_tokens: int, output_tokens: int, lengths: str,
                                                     arrival: str, per_replica_rate: float, seed: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = Scenario(workload={"prompt_tokens": prompt_tokens, "output_tokens": output_tokens},
                        serving={"block_tokens": block_tokens, "chunk_tokens": chunk_tokens})
    options = sim_options(requests=60 * replicas, rate_req_s=per_replica_rate * replicas, replicas=replicas,
                          chunked_prefill=chunked, max_batch=max_batch, kv_capacity_tokens=kv_tokens,
                          lengths=lengths, arrival=arrival, burstiness=0.4, seed=seed)
    try:
        _, calls = _three_ways(scenario, options, monkeypatch)
    except InsufficientMemoryError:
        assume(False)  # a request longer than the KV budget: refused before any path runs
    assert calls == 1
