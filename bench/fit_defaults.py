"""Fit the planner's efficiency factors on published measurements.

    python bench/fit_defaults.py --data ../shared/data/published_calibration.json [--write]

Least squares on log error, log(predicted / measured), over every row the
planner can predict (scipy.optimize.least_squares, bounded), once per engine
family with at least ``MIN_FAMILY_ROWS`` rows and once over all rows (the
``generic`` default).  Prints the fitted constants, then the in-sample and
5-fold cross-validated summary tables (fit on 4/5 of the rows, score on the
held-out fifth).  ``--write`` rewrites ``planner/spec/fitted.py``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.validate.names import engine_family  # noqa: E402
from planner.validate.predict import EfficiencySet, RowSetup, predict_row, setup_row  # noqa: E402
from planner.validate.report import RowResult, summarize, validate_rows  # noqa: E402
from planner.validate.rows import MeasurementRow, load_measurements  # noqa: E402

__all__ = ["MIN_FAMILY_ROWS", "cross_validate", "fit_efficiency", "fit_table", "main", "predictable_setups"]

MIN_FAMILY_ROWS = 12  # fewer rows than this: the family uses the generic fit
FOLDS = 5
SEED = 0
_START = EfficiencySet(bandwidth=0.7, compute=0.5, step_overhead_s=0.0, layer_overhead_s=50e-6)
# Parameter vector: (bandwidth, compute, overhead per layer in µs), bounded.  The
# overhead is fitted per layer: a fixed per-step term on top went to ~0 in a
# 4-parameter fit (1.4e-5 s) and only added variance under cross-validation.
_LOWER = np.array([0.05, 0.05, 0.0])
_UPPER = np.array([1.0, 1.0, 1000.0])


def _eff(x: np.ndarray) -> EfficiencySet:
    return EfficiencySet(bandwidth=float(x[0]), compute=float(x[1]), step_overhead_s=0.0,
                         layer_overhead_s=float(x[2]) * 1e-6)


def predictable_setups(rows: Sequence[MeasurementRow]) -> list[RowSetup]:
    """The rows the planner can predict, mapped once (the mapping does not
    depend on the efficiencies)."""
    return [s for s in (setup_row(r, _START) for r in rows) if not isinstance(s, str)]


def fit_efficiency(setups: Sequence[RowSetup]) -> EfficiencySet:
    """argmin Σ log(predicted / measured)² over bandwidth, compute, overhead per layer."""

    def residuals(x: np.ndarray) -> np.ndarray:
        eff = _eff(x)
        return np.array([np.log(predict_row(s, eff)[0] / s.row.value) for s in setups])

    x0 = np.array([_START.bandwidth, _START.compute, _START.layer_overhead_s * 1e6])
    sol = least_squares(residuals, x0, bounds=(_LOWER, _UPPER), x_scale=np.array([0.1, 0.1, 10.0]),
                        diff_step=1e-3)
    return _eff(sol.x)


def fit_table(setups: Sequence[RowSetup]) -> dict[str, dict[str, float]]:
    """{"generic": ..., family: ...}; a family short of rows copies generic."""
    generic = fit_efficiency(setups)
    table = {"generic": generic.model_dump()}
    for family in ("trtllm", "vllm"):
        mine = [s for s in setups if s.family == family]
        table[family] = fit_efficiency(mine).model_dump() if len(mine) >= MIN_FAMILY_ROWS else generic.model_dump()
    return table


def cross_validate(rows: Sequence[MeasurementRow], *, folds: int = FOLDS, seed: int = SEED) -> list[RowResult]:
    """Each row predicted by a table fitted without its fold."""
    order = np.random.default_rng(seed).permutation(len(rows))
    fold_of = {rows[i].id: k % folds for k, i in enumerate(order)}
    out: dict[str, RowResult] = {}
    for k in range(folds):
        train = predictable_setups([r for r in rows if fold_of[r.id] != k])
        table = fit_table(train)
        for res in validate_rows([r for r in rows if fold_of[r.id] == k], efficiency=table):
            out[res.id] = res
    return [out[r.id] for r in rows]


def _table_text(results: list[RowResult]) -> str:
    s = summarize(results)
    lines = ["| group | rows | skipped | median abs error | p90 abs error |", "|---|---:|---:|---:|---:|"]
    for kind in ("by_metric", "by_family", "all"):
        for key, st in s[kind].items():
            med = "—" if st.median_abs_error_pct is None else f"{st.median_abs_error_pct:.1f}%"
            p90 = "—" if st.p90_abs_error_pct is None else f"{st.p90_abs_error_pct:.1f}%"
            lines.append(f"| {key} | {st.count} | {st.skipped} | {med} | {p90} |")
    return "\n".join(lines)


def _literal(table: dict[str, dict[str, float]]) -> str:
    body = ",\n".join(
        f'    "{k}": {{"bandwidth": {v["bandwidth"]:.4f}, "compute": {v["compute"]:.4f}, '
        f'"step_overhead_s": {v["step_overhead_s"]:.3e}, "layer_overhead_s": {v["layer_overhead_s"]:.3e}}}'
        for k, v in table.items())
    return "FITTED_EFFICIENCY: dict[str, dict[str, float]] = {\n" + body + ",\n}"


def _write(table: dict[str, dict[str, float]], data: str) -> None:
    path = Path(__file__).resolve().parent.parent / "planner" / "spec" / "fitted.py"
    text = path.read_text()
    start = text.index("# bench/fit_defaults.py on")
    path.write_text(text[:start] + f"# bench/fit_defaults.py on {Path(data).name}\n" + _literal(table) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="measurement file (published_calibration.json schema)")
    ap.add_argument("--write", action="store_true", help="rewrite planner/spec/fitted.py with the fitted table")
    args = ap.parse_args(argv)
    rows = load_measurements(args.data)
    setups = predictable_setups(rows)
    fams = {f: sum(1 for s in setups if s.family == f) for f in ("trtllm", "vllm")}
    print(f"{len(rows)} rows, {len(setups)} predictable ({fams}); families need >= {MIN_FAMILY_ROWS} rows")
    table = fit_table(setups)
    print("\nFitted constants:\n" + _literal(table))
    insample = validate_rows(rows, efficiency=table)
    print("\nIn-sample:\n" + _table_text(insample))
    cv = cross_validate(rows)
    print(f"\n{FOLDS}-fold cross-validated:\n" + _table_text(cv))
    worst = sorted((r for r in cv if r.error_pct is not None), key=lambda r: -abs(r.error_pct or 0.0))[:5]
    print("\nFive worst rows (cross-validated):")
    for r in worst:
        print(f"  {r.id}  {r.metric}  measured {r.measured:g}  predicted {r.predicted:.4g}  ({r.error_pct:+.0f}%)")
    _ = engine_family  # re-exported for callers that group by family
    if args.write:
        _write(table, args.data)
        print("\nwrote planner/spec/fitted.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
