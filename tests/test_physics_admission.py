"""Issue 24: iterations as engines schedule them.  Each iteration's token budget
(``serving.chunk_tokens``) holds the running decodes first and then as many waiting
prompts, whole or a chunk of a long one, as fit; the load model (``sizing.load``,
``sizing.modes``) and the simulator follow the same rule, so on a 128/128 chat
workload the plan's steady-state decode batch, its ITL and its capacity land near
the simulator's (before, the load model admitted one prompt per iteration and capped
the batch near o·c/(c + P): ~120 sequences where the simulator ran ~1,000)."""

from __future__ import annotations

import numpy as np
import pytest

from planner import Scenario
from planner.simulate import sim_options, simulate
from planner.sizing.load import replica_load
from planner.spec.context import resolve

CHAT = Scenario(model="llama-3.1-8b", gpu="h100-sxm",
                workload={"prompt_tokens": 128, "output_tokens": 128, "requests_per_s": 100})
MAX_BATCH = 1024
REQUESTS = 4000
STEADY = slice(1000, 3500)  # requests served after the warm-up and before the drain


def _plan(rate: float) -> tuple[float, float, bool]:
    lp = replica_load(resolve(CHAT), load="request_rate", prompt_tokens=128, output_tokens=128, max_batch=MAX_BATCH,
                      level=rate)
    return lp.batch_size, lp.itl_s, lp.saturated


def _capacity() -> float:
    lp = replica_load(resolve(CHAT), load="request_rate", prompt_tokens=128, output_tokens=128, max_batch=MAX_BATCH,
                      level=1e6)
    assert lp.saturated
    return lp.output_tok_s_per_replica / 128


def test_plan_capacity_packs_prompts_beyond_one_per_iteration() -> None:
    """The load model's capacity holds a batch in the hundreds, not o·c/(c + P) ≈ o."""
    lp = replica_load(resolve(CHAT), load="request_rate", prompt_tokens=128, output_tokens=128, max_batch=MAX_BATCH,
                      level=1e6)
    assert lp.batch_size > 4 * 128


@pytest.mark.parametrize("fraction", [0.5, 0.8])
def test_steady_state_batch_and_itl_match_the_simulator(fraction: float) -> None:
    rate = fraction * _capacity()
    batch, itl, saturated = _plan(rate)
    assert not saturated
    run = simulate(CHAT, sim_options(replicas=1, rate_req_s=rate, requests=REQUESTS, lengths="fixed",
                                     max_batch=MAX_BATCH, seed=1))
    decode_s = (run.finish_s - run.first_token_s)[STEADY]
    sim_batch = rate * float(np.mean(decode_s))  # Little's law on the decoding sequences
    sim_tpot = float(np.mean(run.tpot_s[STEADY]))
    assert sim_batch == pytest.approx(batch, rel=0.15)
    assert sim_tpot == pytest.approx(itl, rel=0.15)


def test_saturated_throughput_matches_the_simulator() -> None:
    cap = _capacity()
    run = simulate(CHAT, sim_options(replicas=1, rate_req_s=1.5 * cap, requests=REQUESTS, lengths="fixed",
                                     max_batch=MAX_BATCH, seed=1))
    assert REQUESTS / run.duration_s == pytest.approx(cap, rel=0.15)
