"""Simulator speed: a 10,000-request run on one replica, in simulated requests per wall second
(and per CPU second of this process, steadier on a shared machine).

    .venv/bin/python bench/simulate.py [--requests N] [--rate R] [--replicas N]
        [--prefix-tokens N --prefix-hit-rate F] [--draft-tokens K [--acceptance A]] [--no-kernel]

Scenario: the default (llama-3.1-8b, h100-sxm, 2,000/250-token lognormal lengths).  With
``--replicas N`` the rate defaults to N × 5 req/s (the same load per replica).  Runs over
the simulator's MAX_SIM_REQUESTS bound (a bench is not untrusted input) go straight to SimOptions;
its MAX_SIM_TOKEN_STEPS work bound is lifted.
The compiled kernel (planner.simulate.kernel) is made ready first and timed apart: numba compiles
it once per checkout (about 6 s here) and caches it; later runs load it.  ``--no-kernel`` runs the
Python replica instead (the same results, for comparison); ``--prefix-tokens`` with
``--prefix-hit-rate`` gives the requests a shared system prompt (the prefix cache at work);
``--draft-tokens`` turns speculative decoding on (verify passes with bursts of tokens; it also
prints the simulated mean tokens per pass against the plan's 1 + α + … + α^k).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from unittest.mock import patch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario, speculative_tokens_per_pass  # noqa: E402
from planner.simulate import MAX_SIM_REQUESTS, sim_options, simulate, summarize  # noqa: E402
from planner.simulate.kernel import warm  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=None)
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefix-tokens", type=int, default=0)
    ap.add_argument("--prefix-hit-rate", type=float, default=0.0)
    ap.add_argument("--draft-tokens", type=int, default=0)
    ap.add_argument("--acceptance", type=float, default=0.7)
    ap.add_argument("--no-kernel", action="store_true")
    args = ap.parse_args()
    scenario = Scenario(workload={"prefix_tokens": args.prefix_tokens, "prefix_hit_rate": args.prefix_hit_rate},
                        speculative={"draft_tokens": args.draft_tokens, "acceptance": args.acceptance})
    if args.no_kernel:
        from planner.simulate import engine

        patch.object(engine._Sim, "compiles", return_value=False).start()
    args.rate = args.rate if args.rate is not None else 5.0 * args.replicas
    options = sim_options(requests=min(args.requests, MAX_SIM_REQUESTS), rate_req_s=args.rate, seed=args.seed,
                          replicas=args.replicas)
    if args.requests > MAX_SIM_REQUESTS:
        options = options.model_copy(update={"requests": args.requests})
    from planner.simulate import options as sim_opts

    patch.object(sim_opts, "MAX_SIM_TOKEN_STEPS", 10**12).start()  # and its work bound (MAX_SIM_TOKEN_STEPS)
    start = time.perf_counter()
    warm()
    print(f"kernel ready in {time.perf_counter() - start:.2f} s (compiled, or loaded from numba's cache)")
    start, cpu0 = time.perf_counter(), time.process_time()
    run = simulate(scenario, options)
    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu0
    s = summarize(run, slo_ttft_s=scenario.slo.ttft_s, slo_itl_s=scenario.slo.itl_s)
    print(f"requests={run.requests} replicas={args.replicas} rate={args.rate} req/s iterations={run.iterations} wall={wall_s:.2f} s "
          f"cpu={cpu_s:.2f} s")
    print(f"simulated requests/s: {run.requests / wall_s:,.0f} (per CPU second: {run.requests / cpu_s:,.0f})")
    print(f"iterations/s: {run.iterations / wall_s:,.0f}")
    print(f"p99 TTFT {s.ttft_s.p99:.3f} s, p99 ITL {s.itl_s.p99 * 1e3:.1f} ms, "
          f"goodput {s.goodput_req_s:.2f} req/s")
    if run.verify_passes:
        tpp = speculative_tokens_per_pass(draft_tokens=args.draft_tokens, acceptance=args.acceptance)
        print(f"speculation: {run.verify_passes:,} verify passes, {run.verify_tokens / run.verify_passes:.4f} tokens "
              f"per pass (plan: {tpp:.4f}), {float((run.itl_s == 0).mean()):.1%} of gaps inside a burst")


if __name__ == "__main__":
    main()
