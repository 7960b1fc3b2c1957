"""What the Calibrate and Live probe pages show of imported runs and their fit: the
setup the page's inputs give, long-form rows for the measured-vs-predicted charts
(one per run × metric × load), and table rows.  Pages stay thin: every figure here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from planner.benchimport.calibrate import BenchCalibration
from planner.benchimport.model import BenchRun
from planner.benchimport.setup import BenchSetup, bench_setup
from planner.spec.scenario import Scenario
from planner.validate import RowResult

__all__ = ["CHART_METRICS", "calibration_chart_rows", "comparison_chart_rows", "comparison_table", "page_setup",
           "scenario_setup"]

# The metrics the charts draw, with their unit in the axis title.
CHART_METRICS: dict[str, str] = {"ttft_ms": "TTFT (ms)", "tpot_ms": "TPOT (ms)", "itl_ms": "ITL (ms)",
                                 "e2e_s": "E2E (s)", "output_tok_s_total": "output tok/s"}


def page_setup(scenario: Scenario, *, engine: str = "", precision: str = "", n_gpus: int | None = None,
               served_model: str = "", file_model: str | None = None) -> BenchSetup:
    """The setup a page maps: its scenario (GPU, model, layout) and the inputs beside it
    (blank: not given)."""
    items = [f"{k}={v}" for k, v in (("engine", engine), ("precision", precision), ("served_model", served_model))
             if v.strip()]
    if n_gpus:
        items.append(f"n_gpus={n_gpus}")
    return bench_setup(items, scenario.model_dump(mode="json"), file_model=file_model)


def scenario_setup(scenario: Scenario) -> BenchSetup:
    """The setup of a live probe run: the page's scenario as it stands (one replica)."""
    return page_setup(scenario, engine=scenario.serving.engine)


def _load(row: RowResult | Any, run: BenchRun) -> float | None:
    level = int(row.id.rsplit("#", 1)[1].split(":", 1)[0])
    lv = run.levels[level]
    return lv.concurrency if lv.concurrency is not None else lv.request_rate


def comparison_chart_rows(pairs: Sequence[tuple[BenchRun, Sequence[RowResult]]]) -> list[dict[str, Any]]:
    """{run, metric, load, source (measured / predicted), value} for the charted metrics."""
    out = []
    for run, results in pairs:
        for r in results:
            if r.metric not in CHART_METRICS:
                continue
            base = {"run": run.label, "metric": CHART_METRICS[r.metric], "load": _load(r, run)}
            out.append({**base, "source": "measured", "value": r.measured})
            if r.predicted is not None:
                out.append({**base, "source": "predicted", "value": r.predicted})
    return out


def calibration_chart_rows(cal: BenchCalibration) -> list[dict[str, Any]]:
    """{run, metric, load, source (measured / fitted / held out), value} per fitted row."""
    out = []
    for r in cal.rows:
        base = {"run": r.run, "metric": CHART_METRICS.get(r.metric, r.metric),
                "load": r.concurrency if r.concurrency is not None else r.request_rate}
        out.append({**base, "source": "measured", "value": r.measured})
        out.append({**base, "source": "fitted", "value": r.predicted})
        if r.held_out_predicted is not None:
            out.append({**base, "source": "held out", "value": r.held_out_predicted})
    return out


def comparison_table(pairs: Sequence[tuple[BenchRun, Sequence[RowResult]]]) -> list[dict[str, Any]]:
    """One row per measurement: run, load, metric, measured, predicted, signed error, or why skipped."""
    out = []
    for run, results in pairs:
        for r in results:
            level = int(r.id.rsplit("#", 1)[1].split(":", 1)[0])
            out.append({"run": run.label, "load": run.levels[level].label(), "metric": r.metric,
                        "measured": r.measured, "predicted": r.predicted,
                        "error %": None if r.error_pct is None else round(r.error_pct, 1),
                        "skipped": r.skipped_reason or ""})
    return out
