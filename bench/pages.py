"""Median rerun time of each page under AppTest, caches warm (goal < 300 ms).

    .venv/bin/python bench/pages.py [--runs N]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This script is itself named pages.py: replace its folder on sys.path with the
# repository root so ``import pages._sidebar`` finds the app's pages/ package.
sys.path[0] = str(ROOT)

from tests.apptest_v2 import new_app_test  # noqa: E402

PAGES = ["plan", "roofline", "memory", "latency", "parallelism", "fleet", "tail", "compare", "explore", "scenarios", "probe",
         "catalog"]
GOAL_S = 0.300


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if not os.environ.get("DATABASE_URL"):  # the Scenarios page needs a migrated store: a scratch SQLite file
        from planner.store.migrate import upgrade

        os.environ["RIDGELINE_DB"] = os.path.join(tempfile.mkdtemp(prefix="ridgeline-bench-"), "bench.db")
        upgrade()
    at = new_app_test(timeout=120)
    at.run()
    worst = 0.0
    print(f"{'page':<12} {'median ms':>10} {'min ms':>8}  (runs={args.runs}, default scenario, caches warm)")
    for page in PAGES:
        at.switch_page(f"pages/{page}.py").run()
        at.run()  # warm the caches for this page
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - t0)
        if at.exception:
            print(f"{page}: exception {at.exception}")
            return 1
        med = statistics.median(times)
        worst = max(worst, med)
        print(f"{page:<12} {med * 1e3:>10.1f} {min(times) * 1e3:>8.1f}{'' if med < GOAL_S else '  over goal'}")
    print(f"slowest median {worst * 1e3:.1f} ms; goal {GOAL_S * 1e3:.0f} ms: {'met' if worst < GOAL_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
