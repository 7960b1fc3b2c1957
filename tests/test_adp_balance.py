"""TensorRT-LLM's attention-DP balance (``serving.attention_dp_balance_iters``): with
``enable_attention_dp``, ``attention_dp_config: {enable_balance: true, timeout_iters: T,
batching_wait_iters: 0}`` holds new prompts until every attention-DP rank has one, or until T
passes since the scheduler last took any (its counter runs whether or not a prompt waits), and
releases them at once when a rank has no sequence.  The load model
(``planner.physics.queueing.balance_wait_cycles`` in ``sizing.load`` and ``sizing.modes``) and
the simulator (``planner.simulate.replica`` and its compiled twin) follow the same rule;
``validate`` reads it from a row, or from InferenceX's TensorRT-LLM recipes where the row is
silent; ``deploy`` writes it into the TensorRT-LLM YAML."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from validate_support import inferencex_row, row_scenario

from planner import Scenario
from planner.errors import ScenarioError
from planner.physics.queueing import balance_busy, balance_wait_cycles, balance_wait_points
from planner.simulate import sim_options, simulate
from planner.simulate.hashing import balance_rank
from planner.sizing.load import replica_load
from planner.spec.context import resolve
from planner.validate.rows import MeasurementRow

PROMPT, OUTPUT = 1024, 256
RANKS = 4


def _scenario(timeout: int, **serving: object) -> Scenario:
    return Scenario(model="qwen3-30b-a3b", parallel={"tp": RANKS, "ep": RANKS, "dp_attention": True},
                    serving={"engine": "trtllm", "attention_dp_balance_iters": timeout, **serving},
                    workload={"prompt_tokens": PROMPT, "output_tokens": OUTPUT})


def _monte_carlo(timeout: int, p: float, ranks: int, passes: int, seed: int) -> float:
    """The rule itself, pass by pass: Poisson(p) arrivals per pass on uniform ranks; a take at
    the end of the pass by which every rank holds one, or of the timeout-th pass since the last
    take; a request's wait is the passes after its own."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(p, passes)
    ranks_of = rng.integers(0, ranks, int(counts.sum()))
    waits: list[int] = []
    pending: list[int] = []
    seen: set[int] = set()
    since, k = 0, 0
    for t, c in enumerate(counts):
        for _ in range(int(c)):
            seen.add(int(ranks_of[k]))
            pending.append(t)
            k += 1
        since += 1
        if len(seen) == ranks or since >= timeout:
            waits += [t - a for a in pending]
            pending, seen, since = [], set(), 0
    return float(np.mean(waits))


@settings(max_examples=200, deadline=None)
@given(t=st.integers(1, 256), p=st.floats(0.0, 50.0), r=st.integers(1, 72))
def test_the_wait_lies_between_nothing_and_half_the_timeout(t: int, p: float, r: int) -> None:
    w = float(balance_wait_cycles(timeout=t, arrivals_per_cycle=p, ranks=r))
    assert 0.0 <= w <= (t - 1) / 2.0 + 1e-9
    if r == 1 or t == 1:
        assert w == 0.0


@settings(max_examples=100, deadline=None)
@given(t=st.integers(2, 200), p=st.floats(1e-4, 5.0), r=st.integers(2, 64), more=st.floats(1.01, 10.0))
def test_more_arrivals_shorten_it_and_a_longer_timeout_or_more_ranks_lengthen_it(t: int, p: float, r: int,
                                                                                 more: float) -> None:
    w = float(balance_wait_cycles(timeout=t, arrivals_per_cycle=p, ranks=r))
    assert float(balance_wait_cycles(timeout=t, arrivals_per_cycle=p * more, ranks=r)) <= w + 1e-9
    assert float(balance_wait_cycles(timeout=t + 1, arrivals_per_cycle=p, ranks=r)) >= w - 1e-9
    assert float(balance_wait_cycles(timeout=t, arrivals_per_cycle=p, ranks=r + 1)) >= w - 1e-9


@settings(max_examples=150, deadline=None)
@given(t=st.integers(2, 256), p=st.floats(0.0, 20.0), r=st.integers(2, 72), busy=st.floats(0.0, 1.0))
def test_the_spread_has_the_mean_and_stays_within_the_timeout(t: int, p: float, r: int, busy: float) -> None:
    pts = np.asarray(balance_wait_points(timeout=t, arrivals_per_cycle=p, ranks=r, busy=busy))
    mean = float(balance_wait_cycles(timeout=t, arrivals_per_cycle=p, ranks=r)) * busy
    assert float(pts.mean()) == pytest.approx(mean, rel=1e-9, abs=1e-9)
    assert np.all(np.diff(pts) >= -1e-9)
    assert pts.min() >= -1e-12 and pts.max() <= t - 1 + 1e-9


def test_the_wait_by_hand() -> None:
    """A trickle waits (T − 1)/2 passes.  T = 3, R = 2, p = 1 per pass (F_k(n) = (1 − e^(−n/2))^k):
    E[G] = 1 + (1 − F_2(1)) + (1 − F_2(2)) = 1 + 0.8452 + 0.6004 = 2.4456 passes;
    W = [1·(1 − F_1(1)) + 2·(1 − F_1(2))] / E[G] = (0.6065 + 2 × 0.3679) / 2.4456 = 0.5489 passes."""
    assert float(balance_wait_cycles(timeout=60, arrivals_per_cycle=1e-12, ranks=8)) == pytest.approx(29.5)
    f = [1.0 - math.exp(-n / 2.0) for n in range(3)]
    eg = sum(1.0 - f[n] ** 2 for n in range(3))
    w = (1 * (1 - f[1]) + 2 * (1 - f[2])) / eg
    assert eg == pytest.approx(2.4456, abs=1e-4)
    assert float(balance_wait_cycles(timeout=3, arrivals_per_cycle=1.0, ranks=2)) == pytest.approx(w, rel=1e-12)
    assert w == pytest.approx(0.5489, abs=1e-4)


@pytest.mark.parametrize(("t", "p", "r"), [(60, 0.177, 4), (60, 1.0, 8), (20, 0.2, 4), (60, 3.0, 8)])
def test_the_closed_form_is_the_rule(t: int, p: float, r: int) -> None:
    """The arrivals are not independent of the gaps (a gap ends because of them): the closed form
    counts that, and lands on the rule's own mean pass by pass."""
    mc = _monte_carlo(t, p, r, passes=120_000, seed=5)
    assert float(balance_wait_cycles(timeout=t, arrivals_per_cycle=p, ranks=r)) == pytest.approx(mc, rel=0.04)


def test_every_rank_busy_by_hand() -> None:
    """One replica: P(Poisson(B) ≥ R); over n least-loaded replicas the fleet's n·B sequences
    spread evenly, so a replica below R sequences on average rarely has every rank busy."""
    assert float(balance_busy(ranks=1, batch=2.0)) == pytest.approx(1 - math.exp(-2.0))
    p8 = 1 - sum(math.exp(-5.75) * 5.75**k / math.factorial(k) for k in range(8))
    assert float(balance_busy(ranks=8, batch=5.75)) == pytest.approx(p8, rel=1e-9)
    assert float(balance_busy(ranks=8, batch=5.75, replicas=22)) < 1e-3 < p8
    assert float(balance_busy(ranks=8, batch=12.0, replicas=22)) > 0.999


def test_requests_spread_evenly_over_the_ranks() -> None:
    counts = np.bincount([balance_rank(i, 8) for i in range(8000)], minlength=8)
    assert counts.min() > 900 and counts.max() < 1100
    assert balance_rank(12345, 1) == 0


def _plan(timeout: int, rate: float) -> tuple[float, float]:
    lp = replica_load(resolve(_scenario(timeout)), load="request_rate", prompt_tokens=PROMPT, output_tokens=OUTPUT,
                      max_batch=256, level=rate)
    assert not lp.saturated
    return lp.ttft_s, lp.step_s


@pytest.mark.parametrize("rate", [2.0, 10.0])
def test_the_plan_and_the_simulator_agree_on_the_wait(rate: float) -> None:
    """Mean TTFT on one replica of four attention-DP ranks: the load model's against the
    simulator's, with the balance (T = 60) and without; both see the same added wait."""
    plan_0, step = _plan(0, rate)
    plan_t, _ = _plan(60, rate)
    opts = sim_options(replicas=1, rate_req_s=rate, requests=1500, lengths="fixed", seed=3)
    steady = slice(200, 1400)
    sim_0 = simulate(_scenario(0), opts)
    sim_t = simulate(_scenario(60), opts)
    t0 = float(np.mean((sim_0.first_token_s - sim_0.arrival_s)[steady]))
    tt = float(np.mean((sim_t.first_token_s - sim_t.arrival_s)[steady]))
    assert plan_t - plan_0 > 10.0 * step  # tens of decode passes of wait
    assert tt - t0 == pytest.approx(plan_t - plan_0, rel=0.2)
    assert tt == pytest.approx(plan_t, rel=0.15)


def test_a_rank_without_sequences_takes_prompts_at_once() -> None:
    """Below one sequence per rank, some rank has none, and TensorRT-LLM releases the prompts:
    a trickle of requests sees no balance wait, in the plan and in the simulator."""
    lp0 = replica_load(resolve(_scenario(0)), load="concurrency", prompt_tokens=PROMPT, output_tokens=OUTPUT,
                       max_batch=256, level=2)
    lpt = replica_load(resolve(_scenario(60)), load="concurrency", prompt_tokens=PROMPT, output_tokens=OUTPUT,
                       max_batch=256, level=2)
    assert lpt.ttft_s == pytest.approx(lp0.ttft_s, rel=1e-12)
    opts = sim_options(replicas=1, rate_req_s=0.05, requests=60, lengths="fixed", seed=4)
    a, b = simulate(_scenario(0), opts), simulate(_scenario(60), opts)
    assert np.array_equal(a.first_token_s, b.first_token_s)


def test_the_plan_carries_it_with_its_derivation() -> None:
    """The sizing path adds the wait and its spread to the TTFT the SLO is checked on (the p90
    rises more than the mean), and the derivation substitutes the values that give it."""
    from planner.sizing.plan import plan

    p0 = plan(_scenario(0)).operating_point
    pt = plan(_scenario(60))
    assert pt.operating_point.ttft_s > p0.ttft_s
    assert pt.operating_point.ttft_p90_s - p0.ttft_p90_s > pt.operating_point.ttft_s - p0.ttft_s
    d = pt.derivations["operating_point.ttft_recv_wait_s"]
    got = re.findall(r"T = (\d+), R = (\d+), λ = ([\d.e+-]+) .* c = ([\d.e+-]+) s, B = ([\d.e+-]+), n = (\d+)",
                     d.substituted)
    t, r, lam, c, b, n = (float(x) for x in got[0])
    w = (float(balance_wait_cycles(timeout=int(t), arrivals_per_cycle=lam * c, ranks=int(r))) * c
         * float(balance_busy(ranks=int(r), batch=b, replicas=n)))
    assert (t, r) == (60, RANKS) and w > 0
    assert d.value == pytest.approx(w, rel=2e-3)  # the printed values carry four significant digits
    assert "attention-DP balance" in pt.derivations["operating_point.ttft_s"].formula


def test_the_scenario_refuses_it_where_it_cannot_run_naming_the_field() -> None:
    with pytest.raises((ScenarioError, ValueError), match="serving.attention_dp_balance_iters"):
        Scenario(serving={"engine": "vllm", "attention_dp_balance_iters": 60})
    with pytest.raises((ScenarioError, ValueError), match="parallel.dp_attention"):
        Scenario(model="qwen3-30b-a3b", parallel={"tp": 4}, serving={"engine": "trtllm", "attention_dp_balance_iters": 60})
    with pytest.raises((ScenarioError, ValueError), match="attention_dp_balance_iters"):
        _scenario(10**6)
    with pytest.raises((ScenarioError, ValueError), match="attention_dp_balance_iters"):
        _scenario(60, mode="disaggregated")


def _row(**kw: object) -> MeasurementRow:
    return inferencex_row(**{**dict(engine="TensorRT-LLM", ep=8, dp_attention=True, concurrency=256, value=1200.0), **kw})


def _balance(row: MeasurementRow) -> tuple[int, tuple[str, ...]]:
    scenario, notes = row_scenario(row, "trtllm")
    return scenario.serving.attention_dp_balance_iters, notes


def test_validate_reads_the_recipe_where_the_row_is_silent() -> None:
    t, notes = _balance(_row())
    assert t == 60 and any("attention_dp_balance_iters not stated: 60" in n for n in notes)
    assert _balance(_row(dp_attention=False, ep=1))[0] == 0
    assert _balance(_row(source="https://example.org/blog"))[0] == 0
    assert _balance(_row(attention_dp_balance_iters=30))[0] == 30  # the row's own value


def test_a_row_stating_it_for_another_engine_is_skipped_with_the_reason() -> None:
    from planner.validate.report import validate_rows

    [res] = validate_rows([_row(engine="SGLang", attention_dp_balance_iters=60)])
    assert res.predicted is None and "attention_dp_balance_iters" in (res.skipped_reason or "")


def test_the_deployment_runs_what_was_planned() -> None:
    """The TensorRT-LLM YAML carries attention_dp_config; another engine's command says it has none."""
    from planner.deploy import deploy

    [c] = deploy(_scenario(60), "trtllm").commands
    assert c.config["attention_dp_config"] == {"enable_balance": True, "timeout_iters": 60, "batching_wait_iters": 0}
    [plain] = deploy(_scenario(0), "trtllm").commands
    assert "attention_dp_config" not in plain.config
    [v] = deploy(_scenario(60), "vllm").commands
    assert any("attention_dp_balance_iters 60" in n for n in v.notes)


def test_an_infeasible_plan_still_shows_the_wait_derivation() -> None:
    from planner.sizing.plan import plan

    p = plan(_scenario(60).model_copy(update={"slo": _scenario(60).slo.model_copy(update={"ttft_s": 0.001})}))
    assert not p.operating_point.feasible
    assert "n = —" in p.derivations["operating_point.ttft_recv_wait_s"].substituted
