"""SGLang's --scheduler-recv-interval (``serving.scheduler_recv_interval``): the scheduler takes
in new requests only every k-th decode pass (a pass with prompt tokens, or an idle loop, takes
them at once), so a request waits for the next take before its prefill.  The load model
(``planner.physics.queueing.recv_wait_cycles`` in ``sizing.load`` and ``sizing.modes``) and
the simulator (``planner.simulate.replica`` and its compiled twin) follow the same rule;
``validate`` reads it from a row, or from InferenceX's SGLang recipes where the row is silent."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from validate_support import inferencex_row, row_scenario

from planner import Scenario
from planner.errors import ScenarioError
from planner.physics.queueing import recv_wait_cycles, recv_wait_points
from planner.simulate import sim_options, simulate
from planner.sizing.load import replica_load
from planner.spec.context import resolve
from planner.validate.rows import MeasurementRow

PROMPT, OUTPUT = 1024, 256


def _scenario(k: int) -> Scenario:
    return Scenario(serving={"engine": "sglang", "scheduler_recv_interval": k},
                    workload={"prompt_tokens": PROMPT, "output_tokens": OUTPUT})


def _plan_ttft(k: int, rate: float) -> tuple[float, float]:
    lp = replica_load(resolve(_scenario(k)), load="request_rate", prompt_tokens=PROMPT, output_tokens=OUTPUT,
                      max_batch=256, level=rate)
    assert not lp.saturated
    return lp.ttft_s, lp.step_s


@settings(max_examples=200, deadline=None)
@given(k=st.integers(1, 1000), p=st.floats(0.0, 50.0))
def test_the_wait_lies_between_nothing_and_a_whole_interval(k: int, p: float) -> None:
    w = float(recv_wait_cycles(interval=k, arrivals_per_cycle=p))
    assert 0.0 <= w <= (k - 1) / 2.0 + 1e-9
    if k == 1:
        assert w == 0.0


@settings(max_examples=100, deadline=None)
@given(k=st.integers(2, 200), p=st.floats(1e-4, 5.0), more=st.floats(1.01, 10.0))
def test_more_arrivals_mean_earlier_takes_and_a_longer_interval_a_longer_wait(k: int, p: float, more: float) -> None:
    w = float(recv_wait_cycles(interval=k, arrivals_per_cycle=p))
    assert float(recv_wait_cycles(interval=k, arrivals_per_cycle=p * more)) <= w + 1e-12
    assert float(recv_wait_cycles(interval=k + 1, arrivals_per_cycle=p)) >= w - 1e-12


@settings(max_examples=200, deadline=None)
@given(k=st.integers(2, 500), p=st.floats(0.0, 20.0), busy=st.floats(0.0, 1.0))
def test_the_spread_has_the_mean_and_stays_within_the_gaps(k: int, p: float, busy: float) -> None:
    """The TTFT distribution's receive-wait points: equal-probability quantiles whose mean is the
    closed form's, sorted, never before the pass in progress ends nor past the longest gap."""
    pts = np.asarray(recv_wait_points(interval=k, arrivals_per_cycle=p, busy=busy))
    mean = float(recv_wait_cycles(interval=k, arrivals_per_cycle=p)) * busy
    assert float(pts.mean()) == pytest.approx(mean, rel=1e-9, abs=1e-9)
    assert np.all(np.diff(pts) >= -1e-12)
    assert pts.min() >= -0.5 - 1e-12 and pts.max() <= k - 0.5 + 1e-12


def test_the_wait_by_hand() -> None:
    """A trickle waits (k − 1)/2 passes; at 0.0625 arrivals per pass and k = 30 the gaps are short
    (one pass) with π = q_30 / (1 − q_1 + q_30) = 0.847 / 1.786 = 0.474, E[G] = 16.25, E[G²] = 473.8,
    W = 473.8 / 32.51 − 1/2 = 14.08 passes."""
    assert float(recv_wait_cycles(interval=30, arrivals_per_cycle=1e-9)) == pytest.approx(14.5, rel=1e-6)
    q1, q30 = 1 - math.exp(-0.0625), 1 - math.exp(-0.0625 * 30)
    short = q30 / (1 - q1 + q30)
    g1, g2 = short + (1 - short) * 30, short + (1 - short) * 900
    assert float(recv_wait_cycles(interval=30, arrivals_per_cycle=0.0625)) == pytest.approx(g2 / (2 * g1) - 0.5)
    assert float(recv_wait_cycles(interval=30, arrivals_per_cycle=0.0625)) == pytest.approx(14.08, abs=0.01)


@settings(max_examples=25, deadline=None)
@given(k=st.integers(2, 60), rate=st.floats(0.05, 20.0))
def test_the_wait_never_shortens_a_ttft_below_its_prefill(k: int, rate: float) -> None:
    lp = replica_load(resolve(_scenario(k)), load="request_rate", prompt_tokens=PROMPT, output_tokens=OUTPUT,
                      max_batch=256, level=rate)
    base = replica_load(resolve(_scenario(1)), load="request_rate", prompt_tokens=PROMPT, output_tokens=OUTPUT,
                        max_batch=256, level=rate)
    assert lp.ttft_s >= lp.prefill_s
    assert lp.ttft_s >= base.ttft_s - 1e-12
    assert lp.ttft_s - base.ttft_s <= (k - 1) / 2.0 * lp.step_s * (1 + 1e-9) + 1e-12 or lp.saturated


def test_interval_one_changes_nothing() -> None:
    base = Scenario(serving={"engine": "sglang"}, workload={"prompt_tokens": PROMPT, "output_tokens": OUTPUT})
    lp = replica_load(resolve(base), load="request_rate", prompt_tokens=PROMPT, output_tokens=OUTPUT,
                      max_batch=256, level=4.0)
    assert lp.ttft_s == _plan_ttft(1, 4.0)[0]


@pytest.mark.parametrize("k", [10, 30])
def test_the_plan_and_the_simulator_agree_on_the_wait(k: int) -> None:
    """Mean TTFT at 4 requests/s on one replica: the load model's against the simulator's, with
    the interval and without; both see the same added wait (within 20%)."""
    plan_1, step = _plan_ttft(1, 4.0)
    plan_k, _ = _plan_ttft(k, 4.0)
    opts = sim_options(replicas=1, rate_req_s=4.0, requests=1500, lengths="fixed", seed=3)
    sim_1 = simulate(_scenario(1), opts)
    sim_k = simulate(_scenario(k), opts)
    steady = slice(200, 1400)
    t1 = float(np.mean((sim_1.first_token_s - sim_1.arrival_s)[steady]))
    tk = float(np.mean((sim_k.first_token_s - sim_k.arrival_s)[steady]))
    assert plan_k - plan_1 > 2.0 * step  # several decode passes of wait
    assert tk - t1 == pytest.approx(plan_k - plan_1, rel=0.2)
    assert tk == pytest.approx(plan_k, rel=0.15)


def test_the_plan_carries_it() -> None:
    """The sizing path (sizing.modes) adds the wait, and its spread, to the TTFT the SLO is checked
    on: the p90 rises by more than the mean (bench/agreement.py and tests/test_agreement.py hold
    the plan's p90 to the simulator's on DeepSeek-V3 with k = 30)."""
    from planner.sizing.plan import plan

    p1 = plan(_scenario(1)).operating_point
    p30 = plan(_scenario(30)).operating_point
    assert p30.ttft_s > p1.ttft_s
    assert p30.ttft_p90_s - p1.ttft_p90_s > p30.ttft_s - p1.ttft_s


def test_other_engines_refuse_it_naming_the_field() -> None:
    with pytest.raises((ScenarioError, ValueError), match="serving.scheduler_recv_interval"):
        Scenario(serving={"engine": "vllm", "scheduler_recv_interval": 10})
    with pytest.raises((ScenarioError, ValueError), match="scheduler_recv_interval"):
        Scenario(serving={"engine": "sglang", "scheduler_recv_interval": 10**6})


def _row(**kw: object) -> MeasurementRow:
    return inferencex_row(**{**dict(engine="SGLang", ep=1, dp_attention=False, concurrency=32, value=300.0), **kw})


def _recv(row: MeasurementRow) -> tuple[int, tuple[str, ...]]:
    scenario, notes = row_scenario(row, "vllm")
    return scenario.serving.scheduler_recv_interval, notes


def test_validate_reads_the_recipe_where_the_row_is_silent() -> None:
    k, notes = _recv(_row())
    assert k == 30 and any("scheduler_recv_interval not stated: 30" in n for n in notes)
    assert _recv(_row(concurrency=4))[0] == 10
    assert _recv(_row(dp_attention=True, ep=8))[0] == 1
    assert _recv(_row(gpu="mi355x"))[0] == 1  # ROCm recipes leave SGLang's default
    assert _recv(_row(source="https://example.org/blog"))[0] == 1
    assert _recv(_row(scheduler_recv_interval=5))[0] == 5  # the row's own value


def test_a_row_stating_it_for_another_engine_is_skipped_with_the_reason() -> None:
    from planner.validate.report import validate_rows

    [res] = validate_rows([_row(engine="vLLM", scheduler_recv_interval=10)])
    assert res.predicted is None and "scheduler_recv_interval" in (res.skipped_reason or "")


def test_the_deployment_runs_what_was_planned() -> None:
    """The SGLang command carries --scheduler-recv-interval; another engine's says it has none."""
    from deploy_support import parse_command

    from planner.deploy import deploy

    s = _scenario(30)
    ns = parse_command("sglang", deploy(s, "sglang").commands[0].argv)
    assert ns.scheduler_recv_interval == "30"
    [c] = deploy(s, "vllm").commands
    assert "--scheduler-recv-interval" not in c.argv
    assert any("scheduler_recv_interval 30" in n for n in c.notes)
    plain = parse_command("sglang", deploy(_scenario(1), "sglang").commands[0].argv)
    assert plain.scheduler_recv_interval is None


def test_the_derivation_substitutes_the_values_that_give_the_wait() -> None:
    """operating_point.ttft_recv_wait_s: W = recv_wait_cycles(k, λc) × c × P(n, n·B) from the
    values it prints (λ per replica, c the decode pass at the fleet's batch, B that batch, n the
    least-loaded replicas: an arrival finds its replica busy only when no replica is idle)."""
    import re as _re

    from planner.physics.queueing import balance_busy
    from planner.sizing.plan import plan

    d = plan(_scenario(30)).derivations["operating_point.ttft_recv_wait_s"]
    lam, c, b, n = (float(x) for x in _re.findall(
        r"λ = ([\d.e+-]+) .* c = ([\d.e+-]+) s, B = ([\d.e+-]+), n = (\d+)", d.substituted)[0])
    busy = float(balance_busy(ranks=1, batch=b, replicas=n))
    w = float(recv_wait_cycles(interval=30, arrivals_per_cycle=lam * c)) * c * busy
    assert d.value == pytest.approx(w, rel=2e-3)  # the printed values carry four significant digits
    assert float(balance_busy(ranks=1, batch=b, replicas=1)) == pytest.approx(-math.expm1(-b))  # one replica


def test_an_infeasible_plan_still_shows_the_wait_derivation() -> None:
    """A plan no fleet can meet (a 1 ms TTFT target) has no replica count: the derivation prints
    it as missing instead of failing (found by the simulator's property test)."""
    from planner.sizing.plan import plan

    s = Scenario(serving={"engine": "sglang", "scheduler_recv_interval": 30}, slo={"ttft_s": 0.001},
                 workload={"prompt_tokens": PROMPT, "output_tokens": OUTPUT})
    p = plan(s)
    assert not p.operating_point.feasible
    assert "n = —" in p.derivations["operating_point.ttft_recv_wait_s"].substituted
