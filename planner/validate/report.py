"""Run a measurement file through the planner: per-row results and a summary."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.spec.fitted import FITTED_EFFICIENCY
from planner.validate.predict import EfficiencySet, LoadPoint, RowSetup, efficiency_for, predict_row, setup_row
from planner.validate.rows import MeasurementRow

__all__ = ["MetricSummary", "RowResult", "summarize", "validate_rows", "validation_payload"]


class RowResult(BaseModel):
    """One row: measured, predicted (None when skipped) and the scenario used."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    metric: str
    engine: str
    family: str
    measured: float
    predicted: float | None
    error_pct: float | None  # signed: (predicted − measured) / measured × 100
    skipped_reason: str | None
    scenario: dict[str, Any] | None
    operating_point: LoadPoint | None
    notes: tuple[str, ...] = ()


class MetricSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    count: int
    skipped: int
    median_abs_error_pct: float | None
    p90_abs_error_pct: float | None


def _result(row: MeasurementRow, setup: RowSetup | str, eff: EfficiencySet, family: str) -> RowResult:
    if isinstance(setup, str):
        return RowResult(id=row.id, metric=row.metric, engine=row.engine, family=family, measured=row.value,
                         predicted=None, error_pct=None, skipped_reason=setup, scenario=None, operating_point=None)
    value, op = predict_row(setup, eff)
    return RowResult(
        id=row.id, metric=row.metric, engine=row.engine, family=setup.family, measured=row.value,
        predicted=value, error_pct=(value - row.value) / row.value * 100.0, skipped_reason=None,
        scenario={"gpu": setup.scenario.gpu, "model": setup.scenario.model,
                  "weights_dtype": setup.scenario.weights_dtype, "kv_dtype": setup.scenario.kv_dtype,
                  **setup.scenario.model_dump(mode="json", exclude_defaults=True, exclude={"name"})},
        operating_point=op, notes=setup.notes,
    )


def validate_rows(
    rows: Iterable[MeasurementRow], *, efficiency: Mapping[str, Mapping[str, float]] | None = None
) -> list[RowResult]:
    """Predict every row with its engine family's efficiencies (default: the fitted table)."""
    from planner.validate.names import engine_family

    table = {k: dict(v) for k, v in (efficiency or FITTED_EFFICIENCY).items()}
    out = []
    for row in rows:
        family = engine_family(row.engine)
        eff = efficiency_for(family, table)
        out.append(_result(row, setup_row(row, eff), eff, family))
    return out


def _stats(results: list[RowResult]) -> MetricSummary:
    errs = np.array([abs(r.error_pct) for r in results if r.error_pct is not None], float)
    return MetricSummary(
        count=int(errs.size),
        skipped=sum(1 for r in results if r.error_pct is None),
        median_abs_error_pct=float(np.median(errs)) if errs.size else None,
        p90_abs_error_pct=float(np.percentile(errs, 90)) if errs.size else None,
    )


def summarize(results: list[RowResult]) -> dict[str, dict[str, MetricSummary]]:
    """``{"by_metric": {metric: stats}, "by_family": {family: stats}, "all": {"all": stats}}``."""
    by_metric: dict[str, list[RowResult]] = {}
    by_family: dict[str, list[RowResult]] = {}
    for r in results:
        by_metric.setdefault(r.metric, []).append(r)
        by_family.setdefault(r.family, []).append(r)
    return {
        "by_metric": {k: _stats(v) for k, v in sorted(by_metric.items())},
        "by_family": {k: _stats(v) for k, v in sorted(by_family.items())},
        "all": {"all": _stats(results)},
    }


def validation_payload(results: list[RowResult]) -> dict[str, Any]:
    """The JSON document ``python -m planner validate`` prints."""
    s = summarize(results)
    summary: dict[str, Any] = {k: v.model_dump() for k, v in s["by_metric"].items()}
    return {
        "rows": [r.model_dump(mode="json") for r in results],
        "summary": summary,
        "summary_by_family": {k: v.model_dump() for k, v in s["by_family"].items()},
        "summary_all": s["all"]["all"].model_dump(),
    }
