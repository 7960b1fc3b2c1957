"""Speculative decoding in the simulator (planner.simulate.speculation): verify passes, bursts,
and the plan's speculative arithmetic in the mean."""

from __future__ import annotations

import numpy as np
import pytest

from planner import Scenario
from planner.physics.speculative import drafter_for
from planner.physics.step import decode_cycle
from planner.physics.techniques import speculative_tokens_per_pass
from planner.simulate import sim_options, simulate
from planner.simulate.speculation import hash32, spec_draws
from planner.spec.context import resolve

SPEC = {"draft_tokens": 4, "acceptance": 0.7}


def _binomial_band(mean: float, var: float, n: int) -> float:
    """Four standard errors of a mean of n draws."""
    return 4.0 * float(np.sqrt(var / n))


def test_draws_have_the_plans_tokens_per_pass() -> None:
    """Over 200,000 passes the drawn tokens average 1 + α + … + α^k, within sampling error,
    and their distribution is the truncated geometric P(tokens ≥ i + 1) = α^i."""
    for k, alpha in ((4, 0.7), (2, 0.9), (6, 0.5), (3, 1.0), (3, 0.0)):
        d = spec_draws(draft_tokens=k, acceptance=alpha, seed=7)
        x = np.array([d.tokens(r, p) for r in range(400) for p in range(500)])
        tpp = float(speculative_tokens_per_pass(draft_tokens=k, acceptance=alpha))
        assert d.mean_tokens == pytest.approx(tpp, abs=1e-8)
        assert x.min() >= 1 and x.max() <= k + 1
        var = float(sum((2 * i + 1) * alpha**i for i in range(k + 1)) - tpp**2)  # E[a²] − E[a]², a = 1 + j
        assert abs(x.mean() - tpp) <= max(_binomial_band(tpp, var, x.size), 1e-12)
        for i in range(1, k + 1):  # P(j ≥ i) = α^i
            p = alpha**i
            assert abs(float(np.mean(x >= i + 1)) - p) <= 4.0 * np.sqrt(p * (1 - p) / x.size) + 1e-12


def test_draws_are_seeded_and_keyed() -> None:
    a, b = spec_draws(draft_tokens=4, acceptance=0.7, seed=1), spec_draws(draft_tokens=4, acceptance=0.7, seed=2)
    xa = [a.tokens(r, p) for r in range(50) for p in range(50)]
    assert xa == [a.tokens(r, p) for r in range(50) for p in range(50)]  # deterministic
    assert xa != [b.tokens(r, p) for r in range(50) for p in range(50)]  # the seed matters
    assert all(0 <= hash32(x) < 2**32 for x in (0, 1, 2**32 - 1, 2**40 + 5))
    assert spec_draws(draft_tokens=4, acceptance=0.7, seed=2**64 - 1).seed_h < 2**32


def _long_outputs(spec: dict[str, float] | None, **opt: float) -> tuple[Scenario, object]:
    sc = Scenario(workload={"prompt_tokens": 128, "output_tokens": 1500}, **({"speculative": spec} if spec else {}))
    return sc, sim_options(requests=int(opt.get("requests", 120)), rate_req_s=float(opt.get("rate", 2.0)),
                           lengths="fixed", seed=int(opt.get("seed", 11)))


def test_simulated_tokens_per_pass_match_the_plan() -> None:
    """Simulated mean tokens per verify pass ≈ the planner's expected tokens per pass (fixed seed,
    ~65,000 passes; the last pass of each request, cut at its output, moves it by < 0.1%)."""
    sc, opts = _long_outputs(SPEC)
    run = simulate(sc, opts)  # type: ignore[arg-type]
    tpp = float(speculative_tokens_per_pass(draft_tokens=4, acceptance=0.7))
    assert run.verify_passes > 50_000
    assert run.verify_tokens == int((run.output_tokens - 1).sum())  # every token after the first from a pass
    sim = run.verify_tokens / run.verify_passes
    var = sum((2 * i + 1) * 0.7**i for i in range(5)) - tpp**2
    assert abs(sim - tpp) <= _binomial_band(tpp, var, run.verify_passes) + tpp / 1500.0


def test_bursts_in_the_gaps_and_tpot_falls() -> None:
    """Token gaps come in bursts (several tokens at one time: zero gaps), every request still has
    outputs − 1 gaps, and its TPOT falls by the plan's speculative speedup at batch ~1."""
    sc, opts = _long_outputs(SPEC, requests=30, rate=0.002)
    sc0, _ = _long_outputs(None)
    spec, plain = simulate(sc, opts), simulate(sc0, opts)  # type: ignore[arg-type]
    assert spec.itl_s.size == plain.itl_s.size == int((spec.output_tokens - 1).sum())
    zero = float(np.mean(spec.itl_s == 0.0))
    tpp = float(speculative_tokens_per_pass(draft_tokens=4, acceptance=0.7))
    assert zero == pytest.approx(1.0 - 1.0 / tpp, abs=0.01)  # tokens − 1 zero gaps per pass
    assert not np.any(plain.itl_s == 0.0)
    # alone in the replica (arrivals 100 s apart): TPOT = cycle / tokens per pass vs one step
    batches = np.concatenate([t["batch_size"] for t in spec.timeline])
    assert float(np.mean(batches <= 1)) > 0.95
    r = resolve(sc)
    ctx = 128 + 1500 / 2
    # the plan's own cycle: the scenario's drafter (an EAGLE head timed by the step model)
    cyc = decode_cycle(batch_size=1, context_tokens=ctx, draft_tokens=4, drafter=drafter_for(sc.speculative, r.model),
                       **r.step_kwargs())
    speedup = float(cyc.step.step_s) * tpp / float(cyc.cycle_s)
    assert float(plain.tpot_s.mean() / spec.tpot_s.mean()) == pytest.approx(speedup, rel=0.02)
    assert float(spec.tpot_s.mean()) == pytest.approx(float(cyc.itl_s), rel=0.02)


def test_draft_kv_shrinks_the_simulated_cache() -> None:
    """The simulator's KV capacity is the plan's budget over target + draft KV per token."""
    base = {"model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8"}
    off = simulate(Scenario(**base), sim_options(requests=4, rate_req_s=1.0, seed=1))
    on = simulate(Scenario(**base, speculative={"draft_tokens": 4, "draft_model": "llama-3.1-8b",
                                                "draft_weights_dtype": "bf16"}),
                  sim_options(requests=4, rate_req_s=1.0, seed=1))
    assert on.kv_capacity_tokens < 0.55 * off.kv_capacity_tokens
