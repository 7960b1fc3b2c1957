"""Run a measurement file through the planner: per-row results and summaries.

Every summary gives, per group, the rows predicted and skipped, the median and
90th-percentile absolute error and the median signed error (positive: the
planner predicts high).  Groups: by metric, by engine family, and by any of
``GROUP_KEYS`` (TP degree, GPU, family, publication) crossed with the quantity
a metric measures (throughput, TTFT, ITL, E2E).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.spec.fitted import FITTED_EFFICIENCY
from planner.validate.names import assumed_gpu_variant, engine_family, resolve_gpu_name
from planner.validate.predict import (
    EfficiencySet,
    LoadPoint,
    RowSetup,
    efficiency_for,
    predict_row,
    setup_rows,
    shared_runs,
)
from planner.validate.rows import MeasurementRow, publication

__all__ = [
    "GROUP_KEYS",
    "QUANTITIES",
    "GroupKey",
    "MetricSummary",
    "RowResult",
    "gpu_label",
    "group_value",
    "grouped_summary",
    "row_result",
    "summarize",
    "validate_rows",
    "validation_payload",
]

GroupKey = Literal["tp", "gpu", "family", "engine", "source", "metric"]
GROUP_KEYS: tuple[GroupKey, ...] = ("tp", "gpu", "family", "engine", "source", "metric")
# The quantity each metric measures: the accuracy goals are per quantity.
QUANTITIES: dict[str, str] = {"output_tok_s_total": "throughput", "output_tok_s_per_gpu": "throughput",
                              "input_tok_s_total": "throughput", "input_tok_s_per_gpu": "throughput",
                              "output_tok_s_per_user": "per_user",
                              "ttft_ms": "ttft", "itl_ms": "itl", "tpot_ms": "itl", "e2e_s": "e2e"}


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
    tp: int | None = None  # the TP degree predicted (the row's, or n_gpus / pp when unstated)
    gpu: str = ""  # the catalog GPU predicted on (the row's own text when skipped)
    source: str = ""  # the row's publication (planner.validate.rows.publication)


class MetricSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    count: int
    skipped: int
    median_abs_error_pct: float | None
    p90_abs_error_pct: float | None
    median_signed_error_pct: float | None = None


def gpu_label(name: str) -> str:
    """The catalog id a skipped row's GPU resolves (or is assumed) to, else its own text."""
    gid, _ = resolve_gpu_name(name)
    assumed = assumed_gpu_variant(name)
    return gid or (assumed[0] if assumed else name)


def row_result(row: MeasurementRow, setup: RowSetup | str, eff: EfficiencySet) -> RowResult:
    """The row predicted at ``eff`` (or skipped with the setup's reason)."""
    family = engine_family(row.engine)
    if isinstance(setup, str):
        return RowResult(id=row.id, metric=row.metric, engine=row.engine, family=family, measured=row.value,
                         predicted=None, error_pct=None, skipped_reason=setup, scenario=None, operating_point=None,
                         tp=row.tp, gpu=gpu_label(row.gpu), source=publication(row.source))
    value, op = predict_row(setup, eff)
    used = setup.with_efficiency(eff)
    return RowResult(
        id=row.id, metric=row.metric, engine=row.engine, family=setup.family, measured=row.value,
        predicted=value, error_pct=(value - row.value) / row.value * 100.0, skipped_reason=None,
        scenario={"gpu": used.gpu, "model": used.model, "weights_dtype": used.weights_dtype, "kv_dtype": used.kv_dtype,
                  **used.model_dump(mode="json", exclude_defaults=True, exclude={"name"})},
        operating_point=op, notes=setup.notes, tp=setup.scenario.parallel.tp, gpu=str(setup.scenario.gpu),
        source=publication(row.source),
    )


def validate_rows(
    rows: Iterable[MeasurementRow], *, efficiency: Mapping[str, Mapping[str, float]] | None = None,
    context: Sequence[MeasurementRow] | None = None,
) -> list[RowResult]:
    """Predict every row with its engine family's efficiencies (default: the
    fitted table).  ``context``: the whole file the rows come from, for the
    rule on runs whose load is unstated (default: the rows themselves)."""
    table = {k: dict(v) for k, v in (efficiency or FITTED_EFFICIENCY).items()}
    rows = list(rows)
    effs = [efficiency_for(engine_family(r.engine), table) for r in rows]
    setups = setup_rows(rows, effs, context)
    with shared_runs():
        return [row_result(r, s, e) for r, s, e in zip(rows, setups, effs, strict=True)]


def _stats(results: list[RowResult]) -> MetricSummary:
    signed = np.array([r.error_pct for r in results if r.error_pct is not None], float)
    errs = np.abs(signed)
    return MetricSummary(
        count=int(errs.size),
        skipped=sum(1 for r in results if r.error_pct is None),
        median_abs_error_pct=float(np.median(errs)) if errs.size else None,
        p90_abs_error_pct=float(np.percentile(errs, 90)) if errs.size else None,
        median_signed_error_pct=float(np.median(signed)) if signed.size else None,
    )


def group_value(result: RowResult, key: GroupKey) -> str:
    """The group a result falls in under ``key`` (TP as ``tp4``; ``tp?`` when unknown)."""
    if key == "tp":
        return f"tp{result.tp}" if result.tp is not None else "tp?"
    if key == "metric":
        return QUANTITIES.get(result.metric, result.metric)
    return str(getattr(result, key))


def _sort_key(text: str) -> tuple[str, int, str]:
    digits = "".join(c for c in text if c.isdigit())
    return (text.rstrip("0123456789"), int(digits) if digits and text.startswith("tp") else 0, text)


def grouped_summary(results: list[RowResult], key: GroupKey) -> dict[str, dict[str, MetricSummary]]:
    """``{group: {quantity: stats, ..., "all": stats}}`` for one grouping key."""
    groups: dict[str, list[RowResult]] = {}
    for r in results:
        groups.setdefault(group_value(r, key), []).append(r)
    out: dict[str, dict[str, MetricSummary]] = {}
    for g in sorted(groups, key=_sort_key):
        by_q: dict[str, list[RowResult]] = {}
        for r in groups[g]:
            by_q.setdefault(QUANTITIES.get(r.metric, r.metric), []).append(r)
        out[g] = {q: _stats(v) for q, v in sorted(by_q.items())} | {"all": _stats(groups[g])}
    return out


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


def validation_payload(results: list[RowResult], *, by: Sequence[GroupKey] = (),
                       cross_validation: str = "none") -> dict[str, Any]:
    """The JSON document ``python -m planner validate`` prints; ``by`` adds
    ``summary_by`` = {key: {group: {quantity: stats}}}."""
    s = summarize(results)
    summary: dict[str, Any] = {k: v.model_dump() for k, v in s["by_metric"].items()}
    out: dict[str, Any] = {
        "cross_validation": cross_validation,
        "rows": [r.model_dump(mode="json") for r in results],
        "summary": summary,
        "summary_by_family": {k: v.model_dump() for k, v in s["by_family"].items()},
        "summary_all": s["all"]["all"].model_dump(),
    }
    if by:
        out["summary_by"] = {key: {g: {q: st.model_dump() for q, st in qs.items()}
                                   for g, qs in grouped_summary(results, key).items()} for key in by}
    return out
