"""Speed: the default sweep's candidates/s and ``plan()``'s milliseconds per call.

Run: .venv/bin/python bench/sweep.py [--referee] [--plans N]

Method: CPU time of this process (``time.process_time``), so other work on a shared
machine does not count; wall time is printed beside it.  The sweep is the default
``sweep(BASE)`` (every GPU × dtype × TP × PP × chunk × mode) after one warm-up sweep,
without the simulator referee unless ``--referee`` is given (then the refereed sweep is
timed too: its short simulations are extra).  ``plan()`` is timed over N scenarios drawn
(seed 0) from the sweep's planned rows, each ``Scenario`` built before the clock starts;
``plan()`` does not call the simulator.  Goals (issue 24): ≥ 10,000 candidates/s, ≤ 2 ms
per ``plan()``."""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario, plan  # noqa: E402
from planner.views.review import sweep_row_scenario  # noqa: E402
from planner.views.sweep import sweep  # noqa: E402

BASE = Scenario(model="llama-3.1-70b", workload={"requests_per_s": 100, "prompt_tokens": 2000, "output_tokens": 250},
                slo={"ttft_s": 1.0, "itl_s": 0.05})
GOAL_CANDIDATES_PER_S = 10_000
GOAL_PLAN_MS = 2.0


def _timed(fn):  # type: ignore[no-untyped-def]
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--referee", action="store_true", help="also time the sweep refereed by the simulator")
    ap.add_argument("--plans", type=int, default=40, help="plan() calls to time (default 40)")
    args = ap.parse_args()
    sweep(BASE, gpus=["h100-sxm"], dtypes=["bf16"])  # warm caches and imports
    result, cpu, wall = _timed(lambda: sweep(BASE))
    rows = result["rows"]
    n = len(rows)
    rate = n / cpu
    print(f"default sweep: {n} candidates in {cpu:.3f} s CPU ({wall:.3f} s wall) -> {rate:,.0f} candidates/s "
          f"(CPU; {n / wall:,.0f}/s wall); goal >= {GOAL_CANDIDATES_PER_S:,}: {'met' if rate >= GOAL_CANDIDATES_PER_S else 'NOT met'}")
    planned = [r for r in rows if not r["reason"].startswith("parallel")]
    sample = random.Random(0).sample(planned, min(args.plans, len(planned)))
    scenarios = [sweep_row_scenario(BASE, r) for r in sample]
    plan(scenarios[0])
    _, cpu, wall = _timed(lambda: [plan(s) for s in scenarios])
    ms = cpu / len(scenarios) * 1e3
    print(f"plan(): {ms:.2f} ms CPU per call ({wall / len(scenarios) * 1e3:.2f} ms wall) over {len(scenarios)} "
          f"sweep rows (no simulation inside plan()); goal <= {GOAL_PLAN_MS} ms: {'met' if ms <= GOAL_PLAN_MS else 'NOT met'}")
    if args.referee:
        from planner.simulate.referee import simulated_attainment

        result, cpu, wall = _timed(lambda: sweep(BASE, referee=simulated_attainment))
        print(f"refereed sweep: {n} candidates, {len(result['simulated'])} simulated, in {cpu:.3f} s CPU "
              f"({wall:.3f} s wall) -> {n / cpu:,.0f} candidates/s (CPU)")


if __name__ == "__main__":
    main()
