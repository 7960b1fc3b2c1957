"""The decode worker's take-in (planner.physics.handoff.decode_admission_s): a disaggregated
request's first token leaves k decode iterations after its KV arrives, k the fitted term
``disagg_handoff_iterations``.  The plan's load model, the simulator and validate alike; fitted
with the fixed hand-off on the disaggregated TTFT rows (planner.validate.moefit.fit_handoff_iterations)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import plan
from planner.physics.handoff import decode_admission_s
from planner.physics.terms import physics_terms
from planner.spec.scenario import Scenario
from planner.validate import (
    HANDOFF_ITERATIONS_TERM,
    HANDOFF_TERM,
    fit_handoff_iterations,
    parse_measurements,
    setup_rows,
    validate_rows,
)


@settings(max_examples=40, deadline=None)
@given(k=st.one_of(st.just(0.0), st.floats(1e-3, 40.0)), cycle=st.floats(1e-4, 0.5))
def test_the_take_in_is_k_decode_iterations_and_nothing_at_k_zero(k: float, cycle: float) -> None:
    assert float(decode_admission_s(cycle, k)) == pytest.approx(k * cycle, rel=1e-12, abs=0.0)
    with physics_terms(**{HANDOFF_ITERATIONS_TERM: k}):
        got = np.asarray(decode_admission_s(np.array([cycle, 2 * cycle])))
    assert got.shape == (2,) and got[1] == pytest.approx(2 * got[0], rel=1e-12, abs=0.0)
    with physics_terms(**{HANDOFF_ITERATIONS_TERM: 0.0}):
        assert float(decode_admission_s(cycle)) == 0.0


DISAGG = Scenario(model="llama-3.1-70b", gpu="h200-sxm", weights_dtype="fp8", kv_dtype="fp8", parallel={"tp": 2},
                  serving={"mode": "disaggregated"}, workload={"requests_per_s": 20.0})


@pytest.mark.parametrize("k", [0.0, 6.0, 12.0])
def test_the_plan_adds_k_decode_iterations_at_the_fleets_batch_to_a_disaggregated_ttft(k: float) -> None:
    """operating_point.decode_admission_s = k × the decode pass at the fleet's batch (ITL × tokens per
    pass: one without speculation), inside the TTFT (mean and p90) and its derivation; none colocated."""
    with physics_terms(**{HANDOFF_ITERATIONS_TERM: k}):
        p = plan(DISAGG)
        c = plan(DISAGG.model_copy(update={"serving": DISAGG.serving.model_copy(update={"mode": "colocated"})}))
    op = p.operating_point
    assert op.decode_admission_s == pytest.approx(k * op.fleet_itl_s, rel=1e-9, abs=1e-12)
    assert op.ttft_s >= op.decode_admission_s and op.ttft_p90_s >= op.decode_admission_s
    assert c.operating_point.decode_admission_s == 0.0
    if k > 0:
        assert "operating_point.decode_admission_s" in p.derivations


@settings(max_examples=8, deadline=None)
@given(k=st.sampled_from([0.0, 4.0, 16.0]))
def test_a_longer_take_in_never_shortens_the_plans_first_token(k: float) -> None:
    """More iterations before the first token never lower the disaggregated TTFT at one fleet."""
    with physics_terms(**{HANDOFF_ITERATIONS_TERM: 0.0}):
        base = plan(DISAGG).operating_point
    with physics_terms(**{HANDOFF_ITERATIONS_TERM: k}):
        more = plan(DISAGG).operating_point
    if more.batch_size == base.batch_size:
        assert more.ttft_s >= base.ttft_s - 1e-9


ROW = {"engine": "Dynamo + SGLang", "model": "llama-3.1-70b", "precision": "fp8", "gpu": "h100_sxm", "n_gpus": 12,
       "tp": 8, "isl": 1024, "osl": 1024, "metric": "ttft_ms", "value": 100.0,
       "disaggregated": {"prefill_gpus": 4, "decode_gpus": 8, "prefill_tp": 4, "prefill_workers": 1,
                         "decode_tp": 8, "decode_workers": 1}}


@pytest.mark.parametrize(("handoff_s", "iterations"), [(0.05, 8.0), (0.0, 14.0), (0.12, 0.0)])
def test_the_hand_off_and_its_iterations_are_fitted_to_what_the_ttft_rows_show(handoff_s: float,
                                                                               iterations: float) -> None:
    """Disaggregated runs from 1 to 256 clients measured at the model's TTFT with a hand-off h and k
    decode iterations give back (h, k): the take-in grows with the decode batch, the hand-off does not,
    so the light and the heavy runs tell them apart."""
    from planner.spec.fitted import FITTED_EFFICIENCY, FITTED_TERMS
    from planner.validate import efficiency_for

    specs = [{**ROW, "id": f"d{c}_{n}", "concurrency": c, "isl": n} for c in (1, 4, 16, 64, 256) for n in (1024, 4096)]
    with physics_terms(**{HANDOFF_TERM: handoff_s, HANDOFF_ITERATIONS_TERM: iterations}):
        truth = {r.id: r.predicted for r in validate_rows(parse_measurements(specs))}
    assert all(v is not None and v > 0 for v in truth.values())
    rows = parse_measurements([{**sp, "value": float(truth[sp["id"]] or 0.0)} for sp in specs])
    setups = [s for s in setup_rows(rows, efficiency_for("generic", FITTED_EFFICIENCY)) if not isinstance(s, str)]
    assert len(setups) == len(specs)
    h, k = fit_handoff_iterations(setups, dict(FITTED_TERMS))
    assert k == iterations and h == pytest.approx(handoff_s, abs=0.006)
