"""Replicas simulated alone (planner.simulate.alone) give the run the shared event queue gives.

Each case is run twice: each replica alone on its own arrivals (the Python replica: the
compiled one, planner.simulate.kernel, is held to it by tests/test_simulate_kernel.py) and
with that path turned off (every replica on the one event queue, runs of decode
iterations cut by arrivals).  Every per-request array, every timeline point and every
run total must be equal, not merely close.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario  # noqa: E402
from planner.simulate import engine, sim_options, simulate  # noqa: E402

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "rr_6": ({}, {"requests": 600, "rate_req_s": 30.0, "replicas": 6, "seed": 31}),
    "one_prefix": ({"workload": {"prefix_tokens": 1024, "prefix_hit_rate": 0.6}},
                   {"requests": 300, "rate_req_s": 6.0, "seed": 32}),
    "gamma_small_kv": ({"serving": {"block_tokens": 32}},
                       {"requests": 400, "rate_req_s": 24.0, "replicas": 3, "arrival": "gamma", "burstiness": 0.3,
                        "kv_capacity_tokens": 20_000, "seed": 33}),
    "unchunked_one": ({"serving": {"chunk_tokens": 1024}},
                      {"requests": 200, "rate_req_s": 6.0, "chunked_prefill": False, "seed": 34}),
}

ARRAYS = ("arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens", "hit_tokens", "tpot_s", "itl_s")


def _run(name: str) -> Any:
    sc_kw, opt_kw = CASES[name]
    return simulate(Scenario(**sc_kw), sim_options(**opt_kw))


@pytest.mark.parametrize("name", sorted(CASES))
def test_alone_equals_the_shared_event_queue(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    run_alone = engine.run_alone

    def counting(*args: Any) -> None:
        calls.append(1)
        run_alone(*args)

    monkeypatch.setattr(engine, "run_alone", counting)
    monkeypatch.setattr(engine._Sim, "compiles", lambda self: False)
    alone = _run(name)
    assert calls, "the case must take the alone path"
    monkeypatch.setattr(engine._Sim, "alone", lambda self: False)
    shared = _run(name)
    assert len(calls) == len(alone.timeline)  # the second run never took it
    for k in ARRAYS:
        assert np.array_equal(getattr(alone, k), getattr(shared, k)), k
    for k in ("preemptions", "mean_in_flight", "duration_s", "iterations", "kv_capacity_tokens", "timeline",
              "kv_blocks"):
        assert getattr(alone, k) == getattr(shared, k), k
    if name == "gamma_small_kv":
        assert alone.preemptions > 0  # the case exercises preemption
    if name == "one_prefix":
        assert alone.hit_tokens.sum() > 0  # and prefix hits
