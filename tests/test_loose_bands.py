"""The likely range names the statistic it qualifies and says where it lies
against the value (a band from rows that all erred one way sits beside it)."""

from __future__ import annotations

import pytest

from planner import Scenario, plan
from planner.sizing.uncertainty import plan_uncertainty

# (family, gpu, tp, quantity, signed error %): five rows each, the planner predicting high on every ITL row
HIGH = [("f", "g", 1, "itl", e) for e in (10.0, 20.0, 30.0, 40.0, 50.0)]
MIXED = [("f", "g", 1, "ttft", e) for e in (-20.0, -10.0, 0.0, 10.0, 20.0)]


def test_a_band_from_rows_that_all_predicted_high_lies_below_and_says_so() -> None:
    u = plan_uncertainty(gpu="g", tp=1, ttft_s=0.1, itl_s=0.05, usd_per_mtok_output=1.0,
                         itl_statistic="mean at the operating point", residuals=HIGH + MIXED)
    b = u.itl_s
    assert b is not None and b.statistic == "mean at the operating point"
    # measured = predicted / (1 + e): 0.05 / 1.46 … 0.05 / 1.14, all below 0.05
    assert b.high < b.value and not b.contains_value
    assert b.describe().startswith("below the prediction") and "+30%" in b.describe()
    t = u.ttft_s
    assert t is not None and t.contains_value and t.describe() == "around the prediction"
    assert t.statistic == "mean"


def test_the_plans_bands_name_the_numbers_they_qualify() -> None:
    p = plan(Scenario())
    u = p.uncertainty
    assert u is not None and u.itl_s is not None and u.ttft_s is not None
    assert u.itl_s.statistic == "mean at the operating point" and u.itl_s.value == pytest.approx(
        p.operating_point.itl_s)
    assert u.ttft_s.statistic == "mean, queueing included" and u.ttft_s.value == pytest.approx(
        p.operating_point.ttft_s)


def test_plan_page_labels_each_band_with_its_statistic() -> None:
    from tests.apptest_v2 import new_app_test

    at = new_app_test(timeout=120)
    at.run()
    at.switch_page("pages/plan.py").run()
    assert not at.exception, at.exception
    cap = next(c.value for c in at.caption if c.value.startswith("Likely range"))
    assert "ITL (mean at the operating point)" in cap and "TTFT (mean, queueing included)" in cap
