"""Calibrate the efficiencies on measured runs (imported files, stored or live probe runs).

One code path for the CLI (``python -m planner calibrate``), the Calibrate page and
the Live probe page: every run becomes measurement rows on its setup
(:mod:`planner.benchimport.setup`), the rows of :data:`CALIBRATION_METRICS` are fitted
with ``validate``'s :func:`~planner.validate.fit_efficiency` (bandwidth, compute,
per-step and per-layer overhead; robust loss on log error), and the fit is scored on
rows it did not see: leave one run out (each run predicted by a fit on the others),
or, with a single run, leave one load level out.

Warnings (the fit may say nothing): a fitted value at a bound of its search range
(the physics cannot reach the measurements inside it: is the setup what served the
runs?), and any row, in sample or held out, off by more than
:data:`~planner.probe.CALIBRATION_MAX_REL_ERROR` (25%).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.benchimport.model import BenchRun
from planner.benchimport.predict import row_setup, scenario_efficiency
from planner.benchimport.setup import BenchSetup, run_rows
from planner.errors import ScenarioError
from planner.probe.calibrate import CALIBRATION_MAX_REL_ERROR
from planner.spec.scenario import Scenario, scenario_from_dict
from planner.validate import (
    MAX_BANDWIDTH_EFFICIENCY,
    EfficiencySet,
    RowSetup,
    fit_efficiency,
    predict_row,
    shared_runs,
)

__all__ = [
    "CALIBRATION_METRICS",
    "FIT_BOUNDS",
    "BenchCalibration",
    "CalibrationRow",
    "calibrate_runs",
    "calibrated_from_scenario",
]

# The rows fitted: first-token latency and the decode step (TPOT).  ITL is the same
# step (the planner predicts one figure for both) and output tok/s follows from them.
CALIBRATION_METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms")
# The search range of validate.fit's parameters, in SI (mirrors planner.validate.fit).
FIT_BOUNDS: dict[str, tuple[float, float]] = {
    "bandwidth": (0.05, MAX_BANDWIDTH_EFFICIENCY),
    "compute": (0.05, 1.0),
    "step_overhead_s": (0.0, 50e-3),
    "layer_overhead_s": (0.0, 1e-3),
}
# Overheads may truly be 0: only their upper bound says the fit failed.
_LOWER_IS_FINE = frozenset({"step_overhead_s", "layer_overhead_s"})
_BOUND_REL = 1e-3
_MIN_ROWS = 3
_FIT_TERMS: tuple[str, ...] = ()  # the scenario cannot carry fitted physics terms: none are fitted

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class CalibrationRow(BaseModel):
    """One fitted row: measured, predicted by the fit (in sample) and by a fit without its fold."""

    model_config = _FROZEN
    run: str
    metric: str
    concurrency: float | None
    request_rate: float | None
    measured: float
    predicted: float
    error_pct: float
    held_out_predicted: float | None
    held_out_error_pct: float | None


class BenchCalibration(BaseModel):
    """The fitted efficiencies, the runs they came from, and how well they predict."""

    model_config = _FROZEN
    runs: tuple[str, ...]
    efficiency: dict[str, float]
    rows: tuple[CalibrationRow, ...]
    cross_validation: str  # "leave-one-run-out", "leave-one-level-out" or "none"
    in_sample_median_abs_error_pct: float
    held_out_median_abs_error_pct: float | None
    held_out_max_abs_error_pct: float | None
    warnings: tuple[str, ...] = ()

    @property
    def calibrated_from(self) -> str:
        return ", ".join(self.runs)

    def to_json_dict(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "calibrated_from": self.calibrated_from}


def _fit_rows(runs: Sequence[tuple[BenchRun, BenchSetup]]) -> list[tuple[str, int, RowSetup]]:
    out: list[tuple[str, int, RowSetup]] = []
    for run, setup in runs:
        for row in run_rows(run, setup):
            if row.metric not in CALIBRATION_METRICS:
                continue
            mapped = row_setup(row, setup)
            if isinstance(mapped, str):
                continue
            level = int(row.id.rsplit("#", 1)[1].split(":", 1)[0])
            out.append((run.label, level, mapped))
    return out


def _predict(setup: RowSetup, eff: EfficiencySet) -> float:
    with shared_runs():
        return predict_row(setup, eff)[0]


def _bound_warnings(eff: EfficiencySet) -> list[str]:
    out = []
    for name, (lo, hi) in FIT_BOUNDS.items():
        v = float(getattr(eff, name))
        span = hi - lo
        side = ("upper" if v >= hi - _BOUND_REL * span else
                "lower" if v <= lo + _BOUND_REL * span and name not in _LOWER_IS_FINE else None)
        if side:
            out.append(f"efficiency.{name} = {v:.3g} sits at its {side} bound {hi if side == 'upper' else lo:g}: "
                       "the physics cannot reach the measurements inside the physical range, so this value says "
                       "nothing (is the setup's GPU, model, layout and engine what served these runs?)")
    return out


def calibrate_runs(runs: Sequence[tuple[BenchRun, BenchSetup]], *, cross_validate: bool = True) -> BenchCalibration:
    """Fit on every run's TTFT and TPOT rows; score leave-one-run-out (one run: leave-one-level-out)."""
    fitted = _fit_rows(runs)
    if len(fitted) < _MIN_ROWS:
        raise ScenarioError(f"calibrate: {len(fitted)} predictable TTFT/TPOT rows; needs at least {_MIN_ROWS} "
                            "(two load levels, or a file with lengths and a stated load)")
    start = scenario_efficiency(runs[0][1].scenario)
    eff = fit_efficiency([s for _, _, s in fitted], start, terms=_FIT_TERMS)
    labels = sorted({label for label, _, _ in fitted})
    folds: list[tuple[str, int]] = [(label, lv) for label, lv, _ in fitted]
    if len(labels) > 1:
        scheme = "leave-one-run-out"
        key = [(label, -1) for label, _ in folds]
    elif len({lv for _, lv in folds}) > 1:
        scheme = "leave-one-level-out"
        key = folds
    else:
        scheme = "none"
        key = []
    held: dict[int, float] = {}
    if cross_validate and scheme != "none":
        for fold in sorted(set(key)):
            train = [s for (k, (_, _, s)) in zip(key, fitted, strict=True) if k != fold]
            test = [i for i, k in enumerate(key) if k == fold]
            if len(train) < 2:
                continue
            table = fit_efficiency(train, eff, terms=_FIT_TERMS)
            for i in test:
                held[i] = _predict(fitted[i][2], table)
    rows = []
    for i, (label, _, s) in enumerate(fitted):
        measured = s.row.value
        pred = _predict(s, eff)
        ho = held.get(i)
        rows.append(CalibrationRow(run=label, metric=s.row.metric, concurrency=s.row.concurrency,
                                   request_rate=s.row.request_rate, measured=measured, predicted=pred,
                                   error_pct=(pred - measured) / measured * 100.0, held_out_predicted=ho,
                                   held_out_error_pct=None if ho is None else (ho - measured) / measured * 100.0))
    ins = np.abs([r.error_pct for r in rows])
    hos = np.abs([r.held_out_error_pct for r in rows if r.held_out_error_pct is not None])
    warnings = _bound_warnings(eff)
    limit = CALIBRATION_MAX_REL_ERROR * 100.0
    worst = max(rows, key=lambda r: abs(r.error_pct))
    if abs(worst.error_pct) > limit:
        warnings.append(f"fit error up to {abs(worst.error_pct):.0f}% ({worst.metric} of {worst.run}), over "
                        f"{limit:.0f}%: the calibrated scenario does not describe these runs")
    if hos.size and float(hos.max()) > limit:
        w = max((r for r in rows if r.held_out_error_pct is not None), key=lambda r: abs(r.held_out_error_pct or 0))
        warnings.append(f"held-out error up to {float(hos.max()):.0f}% ({w.metric} of {w.run}, {scheme}), over "
                        f"{limit:.0f}%: the fit does not carry from one run to another")
    if scheme == "none":
        warnings.append("one run at one load level: nothing is left to score the fit on (no cross-validation)")
    return BenchCalibration(
        runs=tuple(dict.fromkeys(run.label for run, _ in runs)),
        efficiency={"bandwidth": eff.bandwidth, "compute": eff.compute, "step_overhead_s": eff.step_overhead_s,
                    "layer_overhead_s": eff.layer_overhead_s},
        rows=tuple(rows), cross_validation=scheme if cross_validate else "none",
        in_sample_median_abs_error_pct=float(np.median(ins)),
        held_out_median_abs_error_pct=float(np.median(hos)) if hos.size else None,
        held_out_max_abs_error_pct=float(hos.max()) if hos.size else None,
        warnings=tuple(warnings),
    )


def calibrated_from_scenario(scenario: Scenario, cal: BenchCalibration) -> Scenario:
    """``scenario`` at the fitted efficiencies, ``efficiency.calibrated_from`` naming the runs."""
    data = scenario.model_dump(mode="json")
    data["efficiency"] = {**data.get("efficiency", {}), **cal.efficiency, "calibrated_from": cal.calibrated_from}
    return scenario_from_dict(data)
