"""The compiled replica (planner.simulate.kernel) gives the run the Python replica gives.

Replicas simulated alone run as compiled code (prefix caches included; chat turns and
streams with very many prefixes keep the Python replica).
Each case below is run three ways: compiled (as the engine chooses), the Python replica
alone on the same arrivals, and every replica on the engine's one event queue.  Every
per-request array, every timeline point and every run total must be equal, not merely
close: the kernel schedules the same iterations and sums the same step times in the
same order.  Hypothesis draws the cases over what the scheduler branches on: block size,
chunked or whole prefills (prompts longer than the chunk), the batch cap, a KV budget
small enough to preempt and evict, bursty arrivals, outputs of one token, shared
prefixes (one system prompt, or several keys competing for the cache).
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
from planner.simulate import Request, SimRun, engine, sim_options, simulate  # noqa: E402
from planner.simulate import kernel as kernel_mod  # noqa: E402

ARRAYS = ("arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens", "hit_tokens", "tpot_s", "itl_s")
TOTALS = ("preemptions", "mean_in_flight", "duration_s", "iterations", "kv_capacity_tokens", "timeline", "kv_blocks",
          "verify_passes", "verify_tokens")


def _assert_same(a: SimRun, b: SimRun, what: str) -> None:
    for k in ARRAYS:
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype.kind == y.dtype.kind, (what, k)
        assert np.array_equal(x, y), (what, k)
    for k in TOTALS:
        assert getattr(a, k) == getattr(b, k), (what, k)


def _three_ways(scenario: Scenario, options: Any, monkeypatch: pytest.MonkeyPatch,
                requests: tuple[Request, ...] | None = None) -> tuple[SimRun, int]:
    """The compiled run (checked equal to the other two) and how many compiled runs it took."""
    calls: list[int] = []
    real = kernel_mod.run_compiled

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*args, **kw)

    with monkeypatch.context() as m:
        m.setattr(kernel_mod, "run_compiled", counting)
        compiled = simulate(scenario, options, requests)
    with monkeypatch.context() as m:
        m.setattr(engine._Sim, "compiles", lambda self: False)
        python_alone = simulate(scenario, options, requests)
    with monkeypatch.context() as m:
        m.setattr(engine._Sim, "alone", lambda self: False)
        shared = simulate(scenario, options, requests)
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
    "idle_replicas": ({}, {"requests": 3, "rate_req_s": 1.0, "replicas": 5, "seed": 51}),
    "system_prefix": ({"workload": {"prefix_tokens": 1024, "prefix_hit_rate": 0.7}},
                      {"requests": 300, "rate_req_s": 12.0, "replicas": 2, "seed": 47}),
    # speculative decoding: verify passes emitting bursts (planner.simulate.speculation)
    "spec_rr_4": ({"speculative": {"draft_tokens": 4, "acceptance": 0.7}},
                  {"requests": 400, "rate_req_s": 30.0, "replicas": 4, "seed": 61}),
    "spec_preempting": ({"serving": {"block_tokens": 32}, "speculative": {"draft_tokens": 6, "acceptance": 0.8}},
                        {"requests": 300, "rate_req_s": 24.0, "replicas": 2, "arrival": "gamma", "burstiness": 0.3,
                         "kv_capacity_tokens": 20_000, "seed": 62}),
    "spec_whole_prefills": ({"serving": {"chunk_tokens": 1024}, "speculative": {"draft_tokens": 2}},
                            {"requests": 150, "rate_req_s": 6.0, "chunked_prefill": False, "seed": 63}),
    # SGLang's --scheduler-recv-interval: new requests taken in every k-th decode pass
    "recv_30": ({"serving": {"engine": "sglang", "scheduler_recv_interval": 30}},
                {"requests": 500, "rate_req_s": 20.0, "replicas": 2, "seed": 71}),
    "recv_preempting": ({"serving": {"engine": "sglang", "scheduler_recv_interval": 10, "block_tokens": 32}},
                        {"requests": 300, "rate_req_s": 24.0, "replicas": 2, "arrival": "gamma", "burstiness": 0.3,
                         "kv_capacity_tokens": 20_000, "seed": 72}),
    "spec_recv_10": ({"serving": {"engine": "sglang", "scheduler_recv_interval": 10},
                      "speculative": {"draft_tokens": 3, "acceptance": 0.7}},
                     {"requests": 300, "rate_req_s": 16.0, "replicas": 2, "seed": 73}),
    # TensorRT-LLM's attention-DP balance: new requests taken once every rank has one, or every T passes
    "balance_60": ({"model": "qwen3-30b-a3b", "parallel": {"tp": 4, "ep": 4, "dp_attention": True},
                    "serving": {"engine": "trtllm", "attention_dp_balance_iters": 60}},
                   {"requests": 500, "rate_req_s": 20.0, "replicas": 2, "seed": 74}),
    "spec_balance_20": ({"model": "qwen3-30b-a3b", "parallel": {"tp": 4, "ep": 4, "dp_attention": True},
                         "serving": {"engine": "trtllm", "attention_dp_balance_iters": 20},
                         "speculative": {"draft_tokens": 3, "acceptance": 0.7}},
                        {"requests": 300, "rate_req_s": 16.0, "replicas": 2, "seed": 75}),
    "spec_system_prefix": ({"workload": {"prefix_tokens": 1024, "prefix_hit_rate": 0.7},
                            "speculative": {"draft_tokens": 3, "acceptance": 0.6}},
                           {"requests": 200, "rate_req_s": 12.0, "replicas": 2, "seed": 64}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_equals_the_python_replica(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sc_kw, opt_kw = CASES[name]
    run, calls = _three_ways(Scenario(**sc_kw), sim_options(**opt_kw), monkeypatch)
    assert calls == 1  # the compiled path was taken
    if name in ("recv_30", "spec_recv_10", "balance_60", "spec_balance_20"):  # requests wait for the take
        key = "scheduler_recv_interval" if "recv" in name else "attention_dp_balance_iters"
        plain = simulate(Scenario(**{**sc_kw, "serving": {**sc_kw["serving"], key: 1}}), sim_options(**opt_kw))
        assert np.mean(run.first_token_s - run.arrival_s) > 1.2 * np.mean(plain.first_token_s - plain.arrival_s)
    if name in ("preempting", "spec_preempting", "recv_preempting"):
        assert run.preemptions > 0  # the case exercises preemption
    if name.startswith("spec_"):
        assert run.verify_passes > 0 and run.verify_tokens > run.verify_passes  # bursts of several tokens
        assert np.any(run.itl_s == 0.0)
    else:
        assert run.verify_passes == 0
    if name == "whole_prefills":
        assert run.prompt_tokens.max() > 1024  # prefills longer than a chunk, priced exactly
    if name == "batch_cap_2":
        assert max(max(t["batch_size"]) for t in run.timeline) <= 2
    if name == "system_prefix":
        assert run.hit_tokens.sum() > 0  # prefix hits
    if name == "idle_replicas":
        assert sum(not t["t_s"] for t in run.timeline) == 2  # two replicas got no request


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


def _keyed(n: int, keys: int, seed: int, *, rate_req_s: float, prompt: int = 1500, prefix: int = 1024,
           output: int = 120) -> tuple[Request, ...]:
    """``n`` requests spread over ``keys`` prefixes (some with none), lengths jittered."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / rate_req_s, n))
    k = rng.integers(-1, keys, n)
    p = prompt + rng.integers(-200, 200, n)
    o = np.maximum(1, output + rng.integers(-100, 100, n))
    return tuple(Request(float(t[i]), int(p[i]), int(o[i]), None if k[i] < 0 else f"k{k[i]}",
                         0 if k[i] < 0 else prefix) for i in range(n))


def test_prefixes_competing_for_a_small_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six prefixes, a KV budget that holds few of them: hits, LRU evictions and preemptions,
    the same in both replicas."""
    reqs = _keyed(240, 6, 48, rate_req_s=10.0)
    opts = sim_options(requests=len(reqs), replicas=2, kv_capacity_tokens=9_000, seed=48)
    run, calls = _three_ways(Scenario(), opts, monkeypatch, reqs)
    assert calls == 1
    assert run.hit_tokens.sum() > 0
    assert run.preemptions > 0
    assert any(b.cached > 0 for b in run.kv_blocks)  # unreferenced prefixes stay cached at the end


def test_many_prefixes_keep_the_python_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over MAX_KERNEL_PREFIX_KEYS distinct prefixes (an eviction scans them all), and chat turns
    (a conversation cached on finish), run the Python replica."""
    calls: list[int] = []
    monkeypatch.setattr(kernel_mod, "run_compiled", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(kernel_mod, "MAX_KERNEL_PREFIX_KEYS", 3)
    reqs = _keyed(60, 4, 49, rate_req_s=4.0)
    run = simulate(Scenario(), sim_options(requests=len(reqs), seed=49), reqs)
    assert not calls
    assert run.hit_tokens.sum() > 0


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
    prefix_tokens=st.sampled_from([0, 16, 700]),
    prefix_hit_rate=st.sampled_from([0.3, 1.0]),
    recv_interval=st.sampled_from([1, 1, 2, 10, 30]),
    seed=st.integers(0, 2**16),
)
def test_compiled_equals_the_python_replica_anywhere(block_tokens: int, chunk_tokens: int, chunked: bool,
                                                     replicas: int, max_batch: int | None, kv_tokens: int | None,
                                                     prompt_tokens: int, output_tokens: int, lengths: str,
                                                     arrival: str, per_replica_rate: float, prefix_tokens: int,
                                                     prefix_hit_rate: float, recv_interval: int, seed: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    engine_kw: dict[str, Any] = ({"engine": "sglang", "scheduler_recv_interval": recv_interval}
                                 if recv_interval > 1 else {})
    scenario = Scenario(workload={"prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
                                  "prefix_tokens": min(prefix_tokens, prompt_tokens),
                                  "prefix_hit_rate": prefix_hit_rate},
                        serving={"block_tokens": block_tokens, "chunk_tokens": chunk_tokens, **engine_kw})
    options = sim_options(requests=60 * replicas, rate_req_s=per_replica_rate * replicas, replicas=replicas,
                          chunked_prefill=chunked, max_batch=max_batch, kv_capacity_tokens=kv_tokens,
                          lengths=lengths, arrival=arrival, burstiness=0.4, seed=seed)
    try:
        _, calls = _three_ways(scenario, options, monkeypatch)
    except InsufficientMemoryError:
        assume(False)  # a request longer than the KV budget: refused before any path runs
    assert calls == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.integers(1, 8), block_tokens=st.sampled_from([8, 16, 64]), replicas=st.integers(1, 3),
       kv_tokens=st.sampled_from([5_000, 9_000, 40_000]), rate_req_s=st.floats(2.0, 30.0),
       prefix=st.sampled_from([64, 500, 1024]), seed=st.integers(0, 2**16))
def test_keyed_prefixes_anywhere(keys: int, block_tokens: int, replicas: int, kv_tokens: int, rate_req_s: float,
                                 prefix: int, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    reqs = _keyed(50 * replicas, keys, seed, rate_req_s=rate_req_s, prefix=prefix)
    opts = sim_options(requests=len(reqs), replicas=replicas, kv_capacity_tokens=kv_tokens, seed=seed)
    _, calls = _three_ways(Scenario(serving={"block_tokens": block_tokens}), opts, monkeypatch, reqs)
    assert calls == 1


def test_without_numba_the_python_replica_gives_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where numba cannot be imported (a Python it has no wheel for), the engine runs the Python
    replica: slower, the same numbers."""
    scenario, opts = Scenario(), sim_options(requests=120, rate_req_s=10.0, replicas=2, seed=50)
    compiled = simulate(scenario, opts)
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    monkeypatch.delitem(sys.modules, "planner.simulate.kernel")
    fallback = simulate(scenario, opts)
    assert "planner.simulate.kernel" not in sys.modules  # it could not be loaded
    _assert_same(compiled, fallback, "compiled vs without numba")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    draft_tokens=st.integers(1, 8),
    acceptance=st.sampled_from([0.0, 0.5, 0.8, 1.0]),
    block_tokens=st.sampled_from([1, 8, 16]),
    chunk_tokens=st.sampled_from([64, 512]),
    chunked=st.booleans(),
    replicas=st.integers(1, 3),
    max_batch=st.sampled_from([None, 1, 4]),
    kv_tokens=st.sampled_from([None, 4_000, 12_000]),
    prompt_tokens=st.integers(8, 2_000),
    output_tokens=st.integers(1, 300),
    prefix_tokens=st.sampled_from([0, 700]),
    per_replica_rate=st.floats(0.5, 20.0),
    seed=st.integers(0, 2**16),
)
def test_speculative_compiled_equals_the_python_replica_anywhere(
        draft_tokens: int, acceptance: float, block_tokens: int, chunk_tokens: int, chunked: bool, replicas: int,
        max_batch: int | None, kv_tokens: int | None, prompt_tokens: int, output_tokens: int, prefix_tokens: int,
        per_replica_rate: float, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verify passes with bursts drawn per (request, pass), preemption under a small KV budget, the
    batch cap, chunked or whole prefills, a shared prefix: the kernel and the Python replica agree."""
    scenario = Scenario(workload={"prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
                                  "prefix_tokens": min(prefix_tokens, prompt_tokens), "prefix_hit_rate": 0.5},
                        serving={"block_tokens": block_tokens, "chunk_tokens": chunk_tokens},
                        speculative={"draft_tokens": draft_tokens, "acceptance": acceptance})
    options = sim_options(requests=50 * replicas, rate_req_s=per_replica_rate * replicas, replicas=replicas,
                          chunked_prefill=chunked, max_batch=max_batch, kv_capacity_tokens=kv_tokens,
                          lengths="lognormal", arrival="gamma", burstiness=0.4, seed=seed)
    try:
        run, calls = _three_ways(scenario, options, monkeypatch)
    except InsufficientMemoryError:
        assume(False)
        return
    assert calls == 1
    assert run.itl_s.size == int(np.maximum(run.output_tokens - 1, 0).sum())


@pytest.mark.parametrize("draft_tokens", [0, 2])
def test_the_hosts_floor_is_held_alike_compiled_and_in_python(draft_tokens: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A MoE replica over two GPUs with a floor above its short prompts' passes (Mixtral 8x7B, 32 layers
    × 2.5 ms = 80 ms): the kernel and the Python replicas hold the first tokens alike, every TTFT is at
    least the floor, and the token gaps stay the iterations' (none negative, the same count)."""
    from planner.physics.terms import physics_terms

    scenario = Scenario(model="mixtral-8x7b", gpu="h100-sxm", parallel={"tp": 2},
                        workload={"prompt_tokens": 256, "output_tokens": 40},
                        speculative={"draft_tokens": draft_tokens, "acceptance": 0.6} if draft_tokens else {})
    options = sim_options(requests=120, rate_req_s=6.0, replicas=2, lengths="lognormal", seed=7)
    with physics_terms(moe_prefill_host_layer_s=2.5e-3):
        run, calls = _three_ways(scenario, options, monkeypatch)
    assert calls == 1
    assert float(run.ttft_s.min()) >= 32 * 2.5e-3 - 1e-12
    assert run.itl_s.size == int(np.maximum(run.output_tokens - 1, 0).sum()) and float(run.itl_s.min()) >= 0.0
