"""Plan against the simulator (the referee): p90 TTFT, p90 ITL and SLO attainment.

    .venv/bin/python bench/agreement.py [--requests N] [--seed S]

For each scenario the plan sizes a fleet; the simulator then serves the plan's own
rate (the peak) on that fleet (colocated replicas, or the prefill and decode
pools) with the plan's decode batch as the engine's batch cap and a load-aware
router (least loaded: the pool the plan's M/G/c queue assumes).  Printed per
scenario: plan and simulated p90 TTFT, p90 ITL (the plan's at the fleet's load,
chunk stalls included), the relative differences, and the simulated attainment
against the plan's target (the p90 TTFT it sizes for: 90% of requests).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario, plan  # noqa: E402
from planner.physics.queueing import TTFT_PERCENTILE  # noqa: E402
from planner.simulate import sim_options, simulate, summarize  # noqa: E402

__all__ = ["SCENARIOS", "AgreementRow", "agreement", "main"]

# The scenarios issue 13 names, each at a rate its fleet serves with several replicas.
SCENARIOS: dict[str, dict[str, Any]] = {
    "llama-3.1-8b h100 colocated": {
        "model": "llama-3.1-8b", "gpu": "h100-sxm",
        "workload": {"requests_per_s": 20, "prompt_tokens": 2000, "output_tokens": 250},
    },
    "llama-3.1-70b fp8 h200 tp2 disaggregated 50 req/s": {
        "model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8", "parallel": {"tp": 2},
        "serving": {"mode": "disaggregated"},
        "workload": {"requests_per_s": 50, "prompt_tokens": 2000, "output_tokens": 300},
    },
    "llama-3.1-70b fp8 h200 tp2 32k prompts": {
        "model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8", "parallel": {"tp": 2},
        "serving": {"mode": "disaggregated"}, "slo": {"ttft_s": 10.0},
        "workload": {"requests_per_s": 5, "prompt_tokens": 32000, "output_tokens": 300},
    },
    "mixtral-8x7b h100 tp2": {
        "model": "mixtral-8x7b", "gpu": "h100-sxm", "parallel": {"tp": 2},
        "workload": {"requests_per_s": 20, "prompt_tokens": 2000, "output_tokens": 250},
    },
    "qwen3-30b-a3b h100": {
        "model": "qwen3-30b-a3b", "gpu": "h100-sxm",
        "workload": {"requests_per_s": 20, "prompt_tokens": 2000, "output_tokens": 250},
    },
    "deepseek-v3 fp8 8xh200 ep8": {
        "model": "deepseek-v3", "gpu": "h200-sxm", "weights_dtype": "fp8", "kv_dtype": "fp8",
        "parallel": {"ep": 8}, "workload": {"requests_per_s": 20, "prompt_tokens": 2000, "output_tokens": 250},
    },
}


@dataclass(frozen=True)
class AgreementRow:
    name: str
    feasible: bool
    fleet: str
    plan_ttft_p90_s: float
    sim_ttft_p90_s: float
    plan_itl_p90_s: float
    sim_itl_p90_s: float
    attainment: float
    target: float

    @property
    def ttft_error(self) -> float:
        return self.plan_ttft_p90_s / self.sim_ttft_p90_s - 1.0

    @property
    def itl_error(self) -> float:
        return self.plan_itl_p90_s / self.sim_itl_p90_s - 1.0


def agreement(name: str, data: dict[str, Any], *, requests: int, seed: int = 0) -> AgreementRow:
    """Plan the scenario, simulate its fleet at its peak rate, compare."""
    sc = Scenario.model_validate({"name": name, **data})
    p = plan(sc)
    op, fl = p.operating_point, p.fleet
    if not op.feasible:
        nan = float("nan")
        return AgreementRow(name, False, op.reason, nan, nan, nan, nan, nan, TTFT_PERCENTILE)
    disagg = sc.serving.mode == "disaggregated"
    pools = ({"prefill_replicas": int(fl.prefill_replicas), "decode_replicas": int(fl.decode_replicas)} if disagg
             else {"replicas": int(fl.replicas)})
    opts = sim_options(rate_req_s=sc.workload.peak_rate, requests=requests, seed=seed, router="least_loaded",
                       max_batch=op.batch_size, **pools)
    run = simulate(sc, opts)
    s = summarize(run, slo_ttft_s=sc.slo.ttft_s, slo_itl_s=sc.slo.itl_s)
    fleet = (f"{int(fl.prefill_replicas)}P+{int(fl.decode_replicas)}D" if disagg else f"{int(fl.replicas)}") + \
        f" × {fl.gpus_per_replica} GPU, B≤{op.batch_size}"
    return AgreementRow(name, True, fleet, op.ttft_p90_s, s.ttft_s.p90, op.fleet_itl_percentile_s,
                        s.itl_s.p90, s.slo_attainment, TTFT_PERCENTILE)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("| scenario | fleet | p90 TTFT plan | sim | Δ | p90 ITL plan | sim | Δ | attainment (target) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, data in SCENARIOS.items():
        r = agreement(name, data, requests=args.requests, seed=args.seed)
        if not r.feasible:
            print(f"| {name} | infeasible: {r.fleet} | | | | | | | |")
            continue
        print(f"| {name} | {r.fleet} | {r.plan_ttft_p90_s * 1e3:.0f} ms | {r.sim_ttft_p90_s * 1e3:.0f} ms | "
              f"{r.ttft_error:+.0%} | {r.plan_itl_p90_s * 1e3:.1f} ms | {r.sim_itl_p90_s * 1e3:.1f} ms | "
              f"{r.itl_error:+.0%} | {r.attainment:.3f} (≥ {r.target}) |")


if __name__ == "__main__":
    main()
