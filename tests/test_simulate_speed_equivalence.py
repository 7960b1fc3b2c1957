"""The faster simulator reproduces the engine it replaced, run for run.

``tests/data/simulate_equivalence.json`` was recorded ONCE from the engine as it was at
commit ad2280a (before the issue-15 speed work), by running this file as a script:

    .venv/bin/python tests/test_simulate_speed_equivalence.py --write

It holds, for each small scenario below (colocated and disaggregated; round_robin,
least_loaded and prefix_affinity routers; lognormal, gamma and fixed lengths; prefix
sharing; multi-turn chat; preemption under a small ``kv_capacity_tokens``; unchunked
prefill; a closed loop; replicas joining mid-run via ``join_s`` / ``decode_join_s``),
the run's ``summarize`` output (each replica's timeline as digests), its end-of-run KV blocks and
order-sensitive digests of the per-request arrays.  Do not regenerate it from a changed
engine: it is the reference the changed engine must match (rel 1e-9).

Re-recorded once, deliberately, for issue 24, whose changes alter every run on purpose:
the iteration's token budget now holds the decodes first (prompts get what is left),
step times are sums of kernel groups, and the defaults were refitted.  The speed paths
still agree with each other run for run (tests/test_simulate_kernel.py); from here this
recording is again the reference later speed work must match.

Re-recorded again, deliberately, when the refitted defaults adopted ``collective_call_s``
(26.36 µs per TP all-reduce call; bandwidth 0.916, compute 0.592, step 2.23 ms, 76 µs per
eager layer): a physics change on purpose, with tests/test_simulate_kernel.py green first.

Re-recorded a third time, for the three disaggregated runs only (the others reproduced
unchanged before and after): a disaggregated request's first token now reaches the client
with its KV, after the hand-off's calibrated setup (``disagg_handoff_s``), as the plan has it.
The three state that setup (``fleet.kv_transfer_setup_s`` = 0.21 s, the calibration they were
recorded at), so a refit of the calibrated default does not move the reference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario  # noqa: E402
from planner.simulate import sim_options, simulate, summarize  # noqa: E402

FIXTURE = Path(__file__).parent / "data" / "simulate_equivalence.json"

# the hand-off's setup the disaggregated runs were recorded at (disagg_handoff_s then)
RECORDED_SETUP = {"kv_transfer_setup_s": 0.21}
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "rr_lognormal_4": ({}, {"requests": 400, "rate_req_s": 20.0, "replicas": 4, "lengths": "lognormal", "seed": 1}),
    "least_loaded_gamma_3": ({}, {"requests": 300, "rate_req_s": 14.0, "replicas": 3, "router": "least_loaded",
                                  "arrival": "gamma", "burstiness": 0.5, "seed": 2}),
    "affinity_multi_turn_4": ({}, {"requests": 300, "rate_req_s": 12.0, "replicas": 4, "router": "prefix_affinity",
                                   "multi_turn": 4, "think_s": 1.0, "seed": 3}),
    "rr_multi_turn_2": ({}, {"requests": 200, "rate_req_s": 8.0, "replicas": 2, "multi_turn": 3, "think_s": 2.0,
                             "seed": 4}),
    "shared_prefix_2": ({"workload": {"prefix_tokens": 1024, "prefix_hit_rate": 0.7}},
                        {"requests": 300, "rate_req_s": 10.0, "replicas": 2, "seed": 5}),
    "preempt_small_kv": ({}, {"requests": 200, "rate_req_s": 12.0, "replicas": 2, "kv_capacity_tokens": 24_000,
                              "multi_turn": 2, "think_s": 1.0, "router": "prefix_affinity", "seed": 6}),
    "preempt_mem_util": ({"serving": {"memory_utilization": 0.3}},
                         {"requests": 300, "rate_req_s": 8.0, "replicas": 2, "multi_turn": 4, "think_s": 1.0,
                          "seed": 9}),
    "unchunked_fixed": ({"serving": {"chunk_tokens": 1024}},
                        {"requests": 200, "rate_req_s": 6.0, "chunked_prefill": False, "lengths": "fixed",
                         "seed": 7}),
    "closed_loop": ({"workload": {"prompt_tokens": 256, "output_tokens": 300}},
                    {"requests": 200, "concurrency": 24, "max_batch": 16, "replicas": 2, "seed": 8}),
    "disagg_least": ({"serving": {"mode": "disaggregated"}, "fleet": RECORDED_SETUP},
                     {"requests": 300, "rate_req_s": 8.0, "prefill_replicas": 2, "decode_replicas": 3, "seed": 10}),
    "disagg_small_kv_affinity": ({"serving": {"mode": "disaggregated"}, "fleet": RECORDED_SETUP,
                                  "workload": {"prefix_tokens": 512, "prefix_hit_rate": 0.5}},
                                 {"requests": 250, "rate_req_s": 10.0, "prefill_replicas": 2, "decode_replicas": 2,
                                  "kv_capacity_tokens": 30_000, "router": "prefix_affinity", "seed": 11}),
    "join_colocated": ({}, {"requests": 300, "rate_req_s": 15.0, "replicas": 4, "join_s": (0.0, 0.0, 5.0, 12.0),
                            "router": "least_loaded", "seed": 12}),
    "join_colocated_rr": ({}, {"requests": 300, "rate_req_s": 15.0, "replicas": 3, "join_s": (0.0, 4.0, 9.0),
                               "seed": 13}),
    "join_disagg": ({"serving": {"mode": "disaggregated"}, "fleet": RECORDED_SETUP},
                    {"requests": 300, "rate_req_s": 10.0, "prefill_replicas": 3, "decode_replicas": 3,
                     "join_s": (0.0, 6.0, 10.0), "decode_join_s": (0.0, 8.0, 14.0), "router": "prefix_affinity",
                     "multi_turn": 2, "think_s": 1.0, "seed": 14}),
}


def _digest(a: np.ndarray) -> dict[str, float]:
    v = np.asarray(a, dtype=float)
    w = np.arange(1, v.size + 1, dtype=float)  # order-sensitive
    return {"n": float(v.size), "sum": float(v.sum()), "weighted": float((v * w).sum() / max(v.size, 1))}


def record(name: str) -> dict[str, Any]:
    sc_kw, opt_kw = SCENARIOS[name]
    sc = Scenario(**sc_kw)
    run = simulate(sc, sim_options(**opt_kw))
    summary = summarize(run, slo_ttft_s=sc.slo.ttft_s, slo_itl_s=sc.slo.itl_s, timeline=True).to_json_dict()
    summary["timeline"] = [{"role": tl["role"], **{k: _digest(np.asarray(tl[k])) for k in
                                                    ("t_s", "batch_size", "kv_utilization")}}
                           for tl in summary["timeline"]]
    return {
        "summary": summary,
        "kv_blocks": [[b.capacity, b.free, b.cached, b.referenced] for b in run.kv_blocks],
        "arrays": {k: _digest(getattr(run, k)) for k in ("arrival_s", "first_token_s", "finish_s", "prompt_tokens",
                                                         "output_tokens", "hit_tokens", "tpot_s", "itl_s")},
    }


def _close(got: Any, want: Any, path: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), path
        for k in want:
            _close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list | tuple) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), path
    else:
        assert got == want, path


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return dict(json.loads(FIXTURE.read_text()))


def test_fixture_covers_every_scenario(reference: dict[str, Any]) -> None:
    assert set(reference) == set(SCENARIOS)
    # The scenarios exercise what they claim: preemption, prefix hits, every pool.
    assert reference["preempt_small_kv"]["summary"]["preemptions"] > 0
    assert reference["preempt_mem_util"]["summary"]["preemptions"] > 0
    assert reference["shared_prefix_2"]["summary"]["prefix_hit_rate"] > 0
    assert len(reference["join_disagg"]["kv_blocks"]) == 6


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_engine_reproduces_the_recorded_run(name: str, reference: dict[str, Any]) -> None:
    got = json.loads(json.dumps(record(name)))  # the same JSON round trip as the fixture
    _close(got, reference[name], name)


if __name__ == "__main__":
    if "--write" not in sys.argv:
        raise SystemExit("usage: test_simulate_speed_equivalence.py --write  (records the reference fixture)")
    FIXTURE.write_text(json.dumps({n: record(n) for n in SCENARIOS}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
