"""Fit the MoE physics terms on the MoE measurements and print them (the values
``planner.spec.fitted.FITTED_TERMS`` ships):

    python bench/fit_moe_terms.py [--data ../shared/data/inferencex_dsr1.json[,more.json…]] [--runs 240]
                                  [--seed 7] [--terms moe]

``planner.validate.moefit.fit_terms`` on a seeded sample of ``--runs`` whole runs of each file
(every metric of a run kept together; TTFT rows are fitted on only through their rise with the
prompt, over every run of the files: planner.validate.moefit.rise_pairs), the dense efficiencies
held as shipped.
Then each MoE file is scored with the fitted terms: rows predicted and the median absolute
error per metric, so a value is only copied into ``fitted.py`` with the figures it gives.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from planner.physics.terms import physics_terms  # noqa: E402
from planner.spec.fitted import FITTED_EFFICIENCY  # noqa: E402
from planner.validate import (  # noqa: E402
    efficiency_for,
    fit_terms,
    load_measurements,
    named_terms,
    sample_runs,
    setup_rows,
    validate_rows,
)

__all__ = ["main"]

DATA = Path(__file__).resolve().parents[2] / "shared/data"


def _summary(path: Path, values: dict[str, float]) -> str:
    rows = list(load_measurements(path))
    with physics_terms(**values):
        res = validate_rows(rows)
    done = [r for r in res if r.error_pct is not None]
    per = {m: float(np.median([abs(r.error_pct or 0.0) for r in done if r.metric == m]))
           for m in sorted({r.metric for r in done})}
    allm = float(np.median([abs(r.error_pct or 0.0) for r in done])) if done else float("nan")
    return (f"{path.name}: {len(done)} / {len(res)} rows predicted, median |error| {allm:.1f}%; "
            + ", ".join(f"{m} {v:.1f}%" for m, v in per.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(DATA / "inferencex_dsr1.json"))
    ap.add_argument("--runs", type=int, default=240)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--terms", default="moe", help="comma-separated terms ('moe': planner.validate.MOE_TERMS)")
    args = ap.parse_args(argv)
    terms = named_terms(args.terms)
    paths = [Path(p.strip()) for p in args.data.split(",") if p.strip()]
    every = [list(load_measurements(p)) for p in paths]
    rows = [r for f in every for r in sample_runs(f, args.runs, args.seed)]
    eff = efficiency_for("generic", FITTED_EFFICIENCY)
    setups = [s for s in setup_rows(rows, eff, [r for f in every for r in f]) if not isinstance(s, str)]
    rises = [s for f in every for s in setup_rows(f, eff) if not isinstance(s, str)]
    t = time.process_time()
    values = fit_terms(setups, terms, rise_from=rises)
    print(f"fitted on {len(setups)} rows ({', '.join(p.name for p in paths)}; up to {args.runs} runs each, "
          f"seed {args.seed}) in {time.process_time() - t:.0f} s CPU:")
    print("  " + ", ".join(f'"{k}": {v:.4g}' for k, v in values.items()))
    for path in dict.fromkeys([*paths, DATA / "inferencex_dsr1.json", DATA / "published_moe.json"]):
        if path.exists():
            print("  " + _summary(path, values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
