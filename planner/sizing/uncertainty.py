"""How sure a plan is: error bands on its headline numbers from cross-validated residuals.

The planner was scored on published measurements it was not fitted on
(``bench/fit_defaults.py``, leave one publication out); the signed errors
e = (predicted − measured) / measured of those rows live in
:data:`planner.spec.fitted_residuals.FITTED_RESIDUALS`.  For a plan, the rows
nearest to it are used: same GPU and TP degree, else same GPU, else same TP,
else all rows (the first level with at least ``MIN_BAND_ROWS`` rows of the
quantity); the band says which.  A measured value is predicted / (1 + e), so

* TTFT and ITL (times): [t / (1 + e₉₀), t / (1 + e₁₀)];
* $/Mtok output (price / throughput, e from throughput rows): [c × (1 + e₁₀), c × (1 + e₉₀)],

with e₁₀, e₉₀ the 10th and 90th percentiles: an 80% band for the number.  Each
band names the statistic it qualifies (``statistic``: the ITL mean at the
operating point, say, not the p90 the SLO checks) and whether it contains the
value: where the nearest rows all erred one way (the planner predicted high on
every one) the band lies beside the number, and ``contains_value`` says so.
A scenario that states its own efficiencies (a probe calibration) gets the
band of the fitted defaults, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.spec.fitted_residuals import FITTED_RESIDUALS, RESIDUALS_SCHEME

__all__ = ["BAND_LEVEL", "MIN_BAND_ROWS", "Band", "Uncertainty", "nearest_residuals", "plan_uncertainty"]

MIN_BAND_ROWS = 5  # fewer residuals than this at a level: fall back to the next, wider one
BAND_LEVEL = 0.8  # the band spans the 10th to the 90th percentile of the residuals

Residual = tuple[str, str, int, str, float]


class Band(BaseModel):
    """One headline number with its band (same unit as the number)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: float
    low: float
    high: float
    rows: int  # residuals the band is drawn from
    basis: str  # which data: "h100-sxm, TP 2" ... "all rows"
    median_error_pct: float  # the planner's median signed error there (+: predicts high)
    statistic: str = ""  # the number the band qualifies: "mean, queueing included", ...

    @property
    def contains_value(self) -> bool:
        return self.low <= self.value <= self.high

    def describe(self) -> str:
        """Where the band lies against its value, for a caption."""
        if self.contains_value:
            return "around the prediction"
        side = "below" if self.high < self.value else "above"
        return (f"{side} the prediction: the nearest published rows measured {side} it "
                f"(median error {self.median_error_pct:+.0f}%)")


class Uncertainty(BaseModel):
    """The plan's ``uncertainty`` block."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    level: float
    scheme: str  # how the residuals were obtained
    ttft_s: Band | None
    itl_s: Band | None
    usd_per_mtok_output: Band | None
    note: str


def nearest_residuals(quantity: str, *, gpu: str, tp: int, family: str | None = None,
                      residuals: Sequence[Residual] = FITTED_RESIDUALS) -> tuple[list[float], str]:
    """(signed errors in %, basis) of the nearest level with ``MIN_BAND_ROWS`` rows."""
    mine = [r for r in residuals if r[3] == quantity and (family is None or r[0] == family)]
    fam = f"{family}, " if family else ""
    levels = ((f"{fam}{gpu}, TP {tp}", lambda r: r[1] == gpu and r[2] == tp),
              (f"{fam}{gpu}, any TP", lambda r: r[1] == gpu),
              (f"{fam}any GPU, TP {tp}", lambda r: r[2] == tp),
              (f"{fam}all GPUs and TP degrees".strip(), lambda r: True))
    for basis, keep in levels:
        errs = [r[4] for r in mine if keep(r)]
        if len(errs) >= MIN_BAND_ROWS:
            return errs, basis
    return [], "no residuals"


def _band(value: float, errs_pct: list[float], basis: str, *, time_like: bool, statistic: str = "") -> Band | None:
    if not errs_pct or not np.isfinite(value):
        return None
    lo_q, hi_q = (1.0 - BAND_LEVEL) / 2.0, (1.0 + BAND_LEVEL) / 2.0
    e = np.asarray(errs_pct, float) / 100.0
    e_lo, e_hi = float(np.quantile(e, lo_q)), float(np.quantile(e, hi_q))
    low, high = ((value / (1.0 + e_hi), value / (1.0 + e_lo)) if time_like
                 else (value * (1.0 + e_lo), value * (1.0 + e_hi)))
    return Band(value=value, low=low, high=high, rows=len(errs_pct), basis=basis,
                median_error_pct=float(np.median(errs_pct)), statistic=statistic)


def plan_uncertainty(*, gpu: str, tp: int, ttft_s: float, itl_s: float, usd_per_mtok_output: float,
                     stated_efficiency: bool = False, family: str | None = None,
                     ttft_statistic: str = "mean", itl_statistic: str = "mean",
                     residuals: Sequence[Residual] = FITTED_RESIDUALS) -> Uncertainty:
    """The bands of a plan's TTFT, ITL and $/Mtok output on ``gpu`` at TP ``tp``;
    ``ttft_statistic``/``itl_statistic`` name what ``ttft_s``/``itl_s`` are."""
    bands = {}
    for key, quantity, value, time_like, stat in (
            ("ttft_s", "ttft", ttft_s, True, ttft_statistic), ("itl_s", "itl", itl_s, True, itl_statistic),
            ("usd_per_mtok_output", "throughput", usd_per_mtok_output, False, "at the operating point")):
        errs, basis = nearest_residuals(quantity, gpu=gpu, tp=tp, family=family, residuals=residuals)
        bands[key] = _band(value, errs, basis, time_like=time_like, statistic=stat)
    note = (f"{BAND_LEVEL:.0%} band from the {RESIDUALS_SCHEME} cross-validated errors of published rows nearest "
            "to this plan (bench/fit_defaults.py)")
    if stated_efficiency:
        note += "; the scenario states its own efficiencies, the band is that of the fitted defaults"
    return Uncertainty(level=BAND_LEVEL, scheme=RESIDUALS_SCHEME, note=note, **bands)
