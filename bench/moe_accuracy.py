"""How accurate is the planner on MoE: cross-validated errors on the MoE measurement files.

    python bench/moe_accuracy.py [--data ../shared/data/inferencex_dsr1.json] [--cv gpu,engine,loso]
                                 [--max-runs N] [--seed 0] [--jobs 1] [--dump rows.json]

For each scheme (``gpu``: leave one GPU out, ``engine``: leave one engine out, ``loso``:
leave one publication out, ``kfold``, ``none``: the shipped defaults) every row is predicted
by efficiencies fitted without its fold (``planner.validate.fit.cross_validate``), and the
script prints, per held-out group and overall, the rows predicted and the median absolute
error of TPOT, TTFT, output tok/s per GPU and per user (markdown tables, the README's
"How accurate is it on MoE?").  ``--max-runs`` scores a seeded sample of runs (all the
rows of a run are kept together) to bound the time on a small machine; the sample size
is printed with the tables.  ``--jobs N`` fits the folds of a term cross-validation in N
processes (the same numbers as one); ``--dump`` writes every scored row (id, held-out group,
metric, measured, predicted, error) as JSON for a closer look.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from planner.validate import (  # noqa: E402
    CV_SCHEMES,
    CvScheme,
    RowResult,
    cross_validate,
    cross_validate_terms,
    fold_assignment,
    load_measurements,
    named_terms,
    run_key,
    validate_rows,
)

__all__ = ["main", "table"]

KNOWN_SCHEMES: dict[str, CvScheme] = {c: c for c in CV_SCHEMES}
METRICS = ("tpot_ms", "ttft_ms", "output_tok_s_per_gpu", "output_tok_s_per_user", "output_tok_s_total", "itl_ms")


def _median(results: list[RowResult], metric: str) -> str:
    e = [abs(r.error_pct) for r in results if r.metric == metric and r.error_pct is not None]
    return f"{np.median(e):.1f}% ({len(e)})" if e else "—"


def table(results: list[RowResult], groups: dict[str, str], title: str) -> str:
    """Markdown: one line per held-out group and one for all rows; median |error| (rows)."""
    present = [m for m in METRICS if any(r.metric == m for r in results)]
    lines = [f"**{title}**", "", "| held out | predicted / rows | " + " | ".join(present) + " |",
             "|---|---|" + "---|" * len(present)]
    by: dict[str, list[RowResult]] = {}
    for r in results:
        by.setdefault(groups.get(r.id, "?"), []).append(r)
    for g in [*sorted(by), "all"]:
        rs = results if g == "all" else by[g]
        done = sum(1 for r in rs if r.error_pct is not None)
        lines.append(f"| {g} | {done} / {len(rs)} | " + " | ".join(_median(rs, m) for m in present) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/inferencex_dsr1.json"))
    ap.add_argument("--cv", default="gpu,engine")
    ap.add_argument("--max-runs", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--terms", default="", help="comma-separated MoE terms to fit per fold with the dense "
                    "efficiencies held (planner.validate.moefit; 'moe' = both MoE terms); empty: refit the "
                    "efficiency table per fold (planner.validate.fit.cross_validate)")
    ap.add_argument("--fit-runs", type=int, default=40, help="runs sampled per fold for the term fit (0: all)")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the folds of a --terms cross-validation")
    ap.add_argument("--dump", default="", help="write every scored row as JSON to this file (the last scheme's)")
    args = ap.parse_args(argv)
    rows = list(load_measurements(args.data))
    if args.max_runs:
        runs = sorted({run_key(r) for r in rows}, key=repr)
        keep = set(random.Random(args.seed).sample(runs, min(args.max_runs, len(runs))))
        rows = [r for r in rows if run_key(r) in keep]
    print(f"{args.data}: {len(rows)} rows, {len({run_key(r) for r in rows})} runs")
    terms = named_terms(args.terms)
    for scheme in [s.strip() for s in args.cv.split(",") if s.strip()]:
        t, wall = time.process_time(), time.monotonic()
        cv = KNOWN_SCHEMES.get(scheme)
        if scheme == "none":
            results, groups = validate_rows(rows), {r.id: "defaults" for r in rows}
        elif cv is not None and terms:
            groups = fold_assignment(rows, cv)
            results, fitted = _terms_cv(rows, cv, terms, args, sorted(set(groups.values())))
            for fold, v in fitted.items():
                print(f"  {scheme} fold {fold}: " + ", ".join(f"{k} = {x:.3g}" for k, x in v.items()))
        elif cv is not None:
            results = cross_validate(rows, cv)
            groups = fold_assignment(rows, cv)
        else:
            print(f"--cv: unknown scheme '{scheme}' (known: none, {', '.join(CV_SCHEMES)})")
            return 2
        print()
        spent = (f"{time.process_time() - t:.0f} s CPU" if args.jobs <= 1 or not terms
                 else f"{time.monotonic() - wall:.0f} s wall, {args.jobs} processes")
        print(table(results, groups, f"{scheme} ({spent})"))
        skipped: dict[str, int] = {}
        for r in results:
            if r.skipped_reason:
                skipped[r.skipped_reason] = skipped.get(r.skipped_reason, 0) + 1
        for why, n in sorted(skipped.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  skipped {n}: {why}")
        if args.dump:
            Path(args.dump).write_text(json.dumps(
                [{"id": r.id, "held_out": groups.get(r.id, "?"), "metric": r.metric, "measured": r.measured,
                  "predicted": r.predicted, "error_pct": r.error_pct, "skipped_reason": r.skipped_reason}
                 for r in results], indent=1))
    return 0


def _one_fold(rows: list, cv: CvScheme, terms: list[str], fit_runs: int, seed: int, fold: str
              ) -> tuple[list[RowResult], dict[str, dict[str, float]]]:
    return cross_validate_terms(rows, cv, terms, fit_runs=fit_runs, seed=seed, only={fold})


def _terms_cv(rows: list, cv: CvScheme, terms: list[str], args: argparse.Namespace, folds: list[str]
              ) -> tuple[list[RowResult], dict[str, dict[str, float]]]:
    """cross_validate_terms, its folds over ``--jobs`` processes; results in file order."""
    if args.jobs <= 1:
        return cross_validate_terms(rows, cv, terms, fit_runs=args.fit_runs, seed=args.seed)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        parts = list(pool.map(_one_fold, *zip(*[(rows, cv, terms, args.fit_runs, args.seed, f) for f in folds],
                                             strict=True)))
    by_id = {r.id: r for part, _ in parts for r in part}
    fitted = {k: v for _, f in parts for k, v in f.items()}
    return [by_id[r.id] for r in rows if r.id in by_id], fitted


if __name__ == "__main__":
    raise SystemExit(main())
