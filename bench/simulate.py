"""Simulator speed: a 10,000-request run on one replica, in simulated requests per wall second.

    .venv/bin/python bench/simulate.py [--requests N] [--rate R]

Scenario: the default (llama-3.1-8b, one h100-sxm, 2,000/250-token lognormal lengths).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario  # noqa: E402
from planner.simulate import sim_options, simulate, summarize  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    scenario = Scenario()
    options = sim_options(requests=args.requests, rate_req_s=args.rate, seed=args.seed)
    start = time.perf_counter()
    run = simulate(scenario, options)
    wall_s = time.perf_counter() - start
    s = summarize(run, slo_ttft_s=scenario.slo.ttft_s, slo_itl_s=scenario.slo.itl_s)
    print(f"requests={run.requests} rate={args.rate} req/s iterations={run.iterations} wall={wall_s:.2f} s")
    print(f"simulated requests/s: {run.requests / wall_s:,.0f}")
    print(f"iterations/s: {run.iterations / wall_s:,.0f}")
    print(f"p99 TTFT {s['ttft_s']['p99']:.3f} s, p99 ITL {s['itl_s']['p99'] * 1e3:.1f} ms, "
          f"goodput {s['goodput_req_s']:.2f} req/s")


if __name__ == "__main__":
    main()
