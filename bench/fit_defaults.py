"""Fit the planner's efficiency factors on published measurements.

    python bench/fit_defaults.py --data ../shared/data/published_calibration.json [--write] [--no-cv]

Least squares on log error (``planner.validate.fit``), once per engine family
with at least ``MIN_FAMILY_ROWS`` rows and once over all rows (the ``generic``
default).  Prints the fitted constants, then the in-sample, 5-fold and
leave-one-source-out (LOSO) cross-validated tables: median / p90 absolute and
median signed error per quantity, and the median signed error by TP degree.
``--write`` rewrites ``planner/spec/fitted.py`` (the fitted table) and
``planner/spec/fitted_residuals.py`` (the cross-validated residuals the plan's
uncertainty band is drawn from).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.physics.terms import TERM_NAMES  # noqa: E402
from planner.validate.fit import (  # noqa: E402
    FIT_TERMS,
    FOLDS,
    MIN_FAMILY_ROWS,
    TERM_SEARCH,
    cross_validate,
    fit_efficiency,
    fit_table,
    predictable_setups,
)
from planner.validate.report import QUANTITIES, GroupKey, RowResult, grouped_summary, validate_rows  # noqa: E402
from planner.validate.rows import load_measurements  # noqa: E402

__all__ = ["MIN_FAMILY_ROWS", "accuracy_table", "cross_validate", "fit_efficiency", "fit_table", "main",
           "predictable_setups", "tp_table"]

_ORDER = ("throughput", "ttft", "itl", "e2e", "all")
_NAMES = {"throughput": "output tok/s", "ttft": "TTFT", "itl": "ITL", "e2e": "E2E", "all": "all rows"}


def _pct(v: float | None, signed: bool = False) -> str:
    return "–" if v is None else (f"{v:+.1f}%" if signed else f"{v:.1f}%")


def accuracy_table(schemes: dict[str, list[RowResult]]) -> str:
    """Markdown: rows per quantity, then median / p90 abs and median signed error per scheme."""
    heads = list(schemes)
    lines = ["| quantity | rows | " + " | ".join(f"{h}: median / p90 abs, median signed" for h in heads) + " |",
             "|---|---:|" + "---:|" * len(heads)]
    summaries = {h: grouped_summary(res, "metric") for h, res in schemes.items()}
    alls = {h: grouped_summary([r.model_copy(update={"metric": "all"}) for r in res], "metric")
            for h, res in schemes.items()}
    for q in _ORDER:
        cells = []
        count = 0
        for h in heads:
            st = alls[h]["all"]["all"] if q == "all" else summaries[h].get(q, {}).get("all")
            if st is None:
                cells.append("–")
                continue
            count = st.count
            cells.append(f"{_pct(st.median_abs_error_pct)} / {_pct(st.p90_abs_error_pct)}, "
                         f"{_pct(st.median_signed_error_pct, True)}")
        if count:
            lines.append(f"| {_NAMES[q]} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tp_table(results: list[RowResult], *, key: GroupKey = "tp") -> str:
    """Markdown: median signed error (rows) per quantity × group (TP degree by default)."""
    g = grouped_summary(results, key)
    cols = list(g)
    lines = ["| quantity | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for q in _ORDER[:-1]:
        cells = []
        for c in cols:
            st = g[c].get(q)
            cells.append("–" if st is None or not st.count else f"{st.median_signed_error_pct:+.1f}% ({st.count})")
        if any(c != "–" for c in cells):
            lines.append(f"| {_NAMES[q]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _literal(table: dict[str, dict[str, float]]) -> str:
    body = ",\n".join(
        f'    "{k}": {{' + ", ".join(f'"{n}": {v[n]:.4g}' for n in v) + "}" for k, v in table.items())
    return "FITTED_EFFICIENCY: dict[str, dict[str, float]] = {\n" + body + ",\n}"


def _residuals(results: list[RowResult]) -> list[tuple[str, str, int, str, float]]:
    """(family, GPU, TP, quantity, signed error %) of every predicted throughput/TTFT/ITL row."""
    return [(r.family, r.gpu, r.tp or 1, QUANTITIES[r.metric], round(r.error_pct, 1)) for r in results
            if r.error_pct is not None and QUANTITIES.get(r.metric) in {"throughput", "ttft", "itl"}]


def _write(table: dict[str, dict[str, float]], data: str, residuals: list[tuple[str, str, int, str, float]] | None
           ) -> None:
    spec = Path(__file__).resolve().parent.parent / "planner" / "spec"
    path = spec / "fitted.py"
    text = path.read_text()
    terms = {k: float(table["generic"].get(k) or 0.0) for k in TERM_NAMES}
    text = re.sub(r"FITTED_TERMS: dict\[str, float\] = \{[^}]*\}",
                  "FITTED_TERMS: dict[str, float] = {" + ", ".join(f'"{k}": {v:.4g}' for k, v in terms.items()) + "}",
                  text)
    start = text.index("# bench/fit_defaults.py on")
    path.write_text(text[:start] + f"# bench/fit_defaults.py on {Path(data).name}\n" + _literal(table) + "\n")
    if residuals is None:
        return
    path = spec / "fitted_residuals.py"
    text = path.read_text()
    start = text.index("# bench/fit_defaults.py residuals")
    body = "".join(f"    {r!r},\n" for r in residuals)
    path.write_text(text[:start] + f"# bench/fit_defaults.py residuals ({len(residuals)} rows, {Path(data).name})\n"
                    "FITTED_RESIDUALS: tuple[tuple[str, str, int, str, float], ...] = (\n" + body + ")\n")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", required=True, help="measurement file (published_calibration.json schema)")
    ap.add_argument("--write", action="store_true", help="rewrite planner/spec/fitted.py with the fitted table")
    ap.add_argument("--no-cv", action="store_true", help="fit and score in-sample only (quick)")
    ap.add_argument("--terms", default=None,
                    help=f"comma-separated physics terms to fit besides the base (known: {', '.join(TERM_SEARCH)}; "
                         f"default: the shipped FIT_TERMS = {', '.join(FIT_TERMS) or 'none'})")
    args = ap.parse_args(argv)
    terms = FIT_TERMS if args.terms is None else tuple(t for t in args.terms.split(",") if t)
    unknown = [t for t in terms if t not in TERM_SEARCH]
    if unknown:
        ap.error(f"--terms: unknown {', '.join(unknown)} (known: {', '.join(TERM_SEARCH)})")
    rows = load_measurements(args.data)
    setups = predictable_setups(rows)
    fams = {f: sum(1 for s in setups if s.family == f) for f in ("trtllm", "vllm")}
    print(f"{len(rows)} rows, {len(setups)} predictable ({fams}); families need >= {MIN_FAMILY_ROWS} rows")
    print(f"fitted terms: {', '.join(terms) or 'none'}")
    table = fit_table(setups, terms=terms)
    print("\nFitted constants:\n" + _literal(table))
    schemes = {"in-sample": validate_rows(rows, efficiency=table)}
    if not args.no_cv:
        schemes[f"{FOLDS}-fold CV"] = cross_validate(rows, "kfold", terms=terms, start=table)
        schemes["leave-one-source-out CV"] = cross_validate(rows, "loso", terms=terms, start=table)
    print("\nAccuracy by quantity:\n" + accuracy_table(schemes))
    for name, res in schemes.items():
        print(f"\nMedian signed error by TP degree ({name}, rows in brackets):\n" + tp_table(res))
    last = list(schemes)[-1]
    worst = sorted((r for r in schemes[last] if r.error_pct is not None), key=lambda r: -abs(r.error_pct or 0.0))[:8]
    print(f"\nWorst rows ({last}):")
    for r in worst:
        print(f"  {r.id}  {r.metric}  measured {r.measured:g}  predicted {r.predicted:.4g}  ({r.error_pct:+.0f}%)")
    if args.write:
        loso = schemes.get("leave-one-source-out CV")
        _write(table, args.data, _residuals(loso) if loso else None)
        print("\nwrote planner/spec/fitted.py" + (" and planner/spec/fitted_residuals.py" if loso else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
