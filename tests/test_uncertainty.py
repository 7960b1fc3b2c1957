"""Plans say how sure they are: bands from the cross-validated residuals of the nearest data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs

from planner.sizing.plan import plan
from planner.sizing.uncertainty import MIN_BAND_ROWS, nearest_residuals, plan_uncertainty
from planner.spec.fitted_residuals import FITTED_RESIDUALS
from planner.spec.scenario import Scenario


def _res(gpu: str, tp: int, q: str, errs: list[float], family: str = "trtllm") -> list[tuple[str, str, int, str, float]]:
    return [(family, gpu, tp, q, e) for e in errs]


def test_falls_back_outward_and_says_which() -> None:
    data = (_res("h100-sxm", 2, "itl", [1, 2, 3, 4, 5]) + _res("h100-sxm", 8, "itl", [50, 60])
            + _res("h200-sxm", 8, "itl", [7, 8, 9, 10]) + _res("a100-sxm-80gb", 1, "ttft", [0] * 9))
    errs, basis = nearest_residuals("itl", gpu="h100-sxm", tp=2, residuals=data)
    assert sorted(errs) == [1, 2, 3, 4, 5] and basis == "h100-sxm, TP 2"
    errs, basis = nearest_residuals("itl", gpu="h100-sxm", tp=8, residuals=data)  # 2 rows at TP 8: not enough
    assert len(errs) == 7 and basis == "h100-sxm, any TP"
    errs, basis = nearest_residuals("itl", gpu="b200", tp=8, residuals=data)
    assert len(errs) == 6 and basis == "any GPU, TP 8"
    errs, basis = nearest_residuals("itl", gpu="b200", tp=4, residuals=data)
    assert len(errs) == 11 and basis == "all GPUs and TP degrees"
    assert nearest_residuals("e2e", gpu="b200", tp=4, residuals=data) == ([], "no residuals")
    errs, basis = nearest_residuals("itl", gpu="h100-sxm", tp=2, family="vllm", residuals=data)
    assert errs == [] and basis == "no residuals"  # MIN_BAND_ROWS rows of the family or none
    assert MIN_BAND_ROWS == 5


def test_band_turns_errors_into_measured_values() -> None:
    # The planner predicts 25% high everywhere: the measured time is t / 1.25, the measured cost c × 1.25
    # (cost = price / throughput, and throughput is over-predicted by 25%).
    data = sum((_res("h100-sxm", 1, q, [25.0] * 6) for q in ("ttft", "itl", "throughput")), [])
    u = plan_uncertainty(gpu="h100-sxm", tp=1, ttft_s=0.5, itl_s=0.02, usd_per_mtok_output=2.0, residuals=data)
    assert u.ttft_s is not None and u.itl_s is not None and u.usd_per_mtok_output is not None
    assert (u.ttft_s.low, u.ttft_s.high) == pytest.approx((0.4, 0.4))
    assert (u.itl_s.low, u.itl_s.high) == pytest.approx((0.016, 0.016))
    assert (u.usd_per_mtok_output.low, u.usd_per_mtok_output.high) == pytest.approx((2.5, 2.5))
    assert u.ttft_s.median_error_pct == 25.0 and u.ttft_s.rows == 6


@given(hs.lists(hs.floats(-60, 200), min_size=MIN_BAND_ROWS, max_size=40), hs.floats(1e-3, 10))
def test_band_is_ordered_and_straddles_when_errors_do(errs: list[float], value: float) -> None:
    data = _res("h100-sxm", 1, "ttft", errs) + _res("h100-sxm", 1, "throughput", errs)
    u = plan_uncertainty(gpu="h100-sxm", tp=1, ttft_s=value, itl_s=value, usd_per_mtok_output=value, residuals=data)
    assert u.itl_s is None  # no ITL residuals at any level
    for b in (u.ttft_s, u.usd_per_mtok_output):
        assert b is not None and 0 < b.low <= b.high
        if np.quantile(errs, 0.1) < 0 < np.quantile(errs, 0.9):  # errors both ways: the number is inside
            assert b.low <= value * (1 + 1e-9) and b.high >= value * (1 - 1e-9)


def test_plan_json_carries_the_uncertainty_block() -> None:
    assert FITTED_RESIDUALS, "bench/fit_defaults.py --write stores the residuals"
    result = plan(Scenario(gpu="h100-sxm", model="llama-3.1-8b"))
    u = result.uncertainty
    assert u is not None and u.ttft_s is not None and u.itl_s is not None and u.usd_per_mtok_output is not None
    assert u.ttft_s.value == result.ttft_s and u.usd_per_mtok_output.value == result.cost.usd_per_mtok_output
    assert u.ttft_s.basis.startswith("h100-sxm") and u.ttft_s.rows >= MIN_BAND_ROWS
    doc = result.to_json_dict()["uncertainty"]
    assert set(doc) == {"level", "scheme", "ttft_s", "itl_s", "usd_per_mtok_output", "note"}
    assert doc["scheme"] == "leave-one-source-out"
    stated = plan(Scenario(gpu="h100-sxm", model="llama-3.1-8b", efficiency={"bandwidth": 0.8}))
    assert stated.uncertainty is not None and "states its own efficiencies" in stated.uncertainty.note


def test_plan_page_shows_the_band_beside_the_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.apptest_v2 import new_app_test, use_migrated_sqlite

    use_migrated_sqlite(tmp_path, monkeypatch)
    at = new_app_test()
    at.run()
    at.switch_page("pages/plan.py").run()
    assert not at.exception, at.exception
    captions = [c.value for c in at.caption if "Likely range (80%)" in c.value]
    assert len(captions) == 1
    assert "ITL" in captions[0] and "TTFT" in captions[0] and "/Mtok" in captions[0] and "rows" in captions[0]
