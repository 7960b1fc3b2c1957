"""Plan against the simulator (the referee): TTFT p90, TPOT, the token-gap p99 and SLO
attainment at the plan's own fleet, and the smallest fleet the simulator accepts.

    .venv/bin/python bench/agreement.py [--requests N] [--seed S] [--panel short|existing|all]

For each scenario the plan sizes a fleet; the simulator then serves the plan's own
rate (the peak) on that fleet (colocated replicas, or the prefill and decode pools)
with the plan's decode batch as the engine's batch cap and the router the plan's M/G/c
queue assumes (least loaded).  Printed per scenario, plan | simulated:

* TTFT p90 (queueing included), per-request TPOT at ``slo.itl_percentile``, the p99 of
  all token gaps, each at the fleet's load, and the share of requests meeting both
  targets (the plan's ``fleet_slo_attainment``; the simulator's ``slo_attainment``);
* the plan's GPUs (at the scenario's ``fleet.target_utilization``, 70%: headroom by
  design), the plan's minimum fleet (the same scenario at target utilization 1: the
  fewest GPUs the plan says meet the SLO) and the smallest fleet (GPUs) the simulator
  accepts at that minimum plan's batch cap and the peak rate: colocated, the fewest
  replicas; disaggregated, the fewest prefill replicas beside the plan's decode pool,
  then the fewest decode replicas beside those.  The 10% goal compares the minimum
  plan with the simulator's smallest.

Goals (issue 24): statistics within 15%, simulated attainment ≥ ``slo.attainment`` at
the plan's fleet, the plan's fleet within 10% (or one replica) of the smallest accepted.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import Scenario, plan  # noqa: E402
from planner.simulate import PLAN_ROUTER, sim_options, simulate, summarize  # noqa: E402
from planner.sizing import workload_stats  # noqa: E402
from planner.spec.context import resolve  # noqa: E402

__all__ = ["AgreementRow", "EXISTING", "SCENARIOS", "SHORT_PROMPTS", "agreement", "main"]

# The short-prompt panel issue 24 names.
SHORT_PROMPTS: dict[str, dict[str, Any]] = {
    "llama-3.1-8b h100 128/128 1000 req/s": {
        "model": "llama-3.1-8b", "gpu": "h100-sxm",
        "workload": {"requests_per_s": 1000, "prompt_tokens": 128, "output_tokens": 128},
    },
    "llama-3.1-8b h100 500/200 200 req/s": {
        "model": "llama-3.1-8b", "gpu": "h100-sxm",
        "workload": {"requests_per_s": 200, "prompt_tokens": 500, "output_tokens": 200},
    },
    "llama-3.1-70b fp8 h200 tp1 1500/350 40 req/s": {
        "model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8", "parallel": {"tp": 1},
        "slo": {"ttft_s": 0.8, "itl_s": 0.04},
        "workload": {"requests_per_s": 40, "prompt_tokens": 1500, "output_tokens": 350},
    },
    "rag 32k/300 70b fp8 h200 tp2 colocated 2 req/s": {
        "model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8", "parallel": {"tp": 2},
        "slo": {"ttft_s": 10.0},
        "workload": {"requests_per_s": 2, "prompt_tokens": 32000, "output_tokens": 300},
    },
    "rag 32k/300 70b fp8 h200 tp2 disaggregated 2 req/s": {
        "model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8", "parallel": {"tp": 2},
        "serving": {"mode": "disaggregated"}, "slo": {"ttft_s": 10.0},
        "workload": {"requests_per_s": 2, "prompt_tokens": 32000, "output_tokens": 300},
    },
}
# The scenarios issue 13 named, each at a rate its fleet serves with several replicas.
EXISTING: dict[str, dict[str, Any]] = {
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
        "parallel": {"tp": 8, "ep": 8}, "workload": {"requests_per_s": 20, "prompt_tokens": 2000, "output_tokens": 250},
    },
    # SGLang taking new requests every 30 decode passes (--scheduler-recv-interval 30, as InferenceX's recipes)
    "deepseek-v3 fp8 8xh200 ep8 sglang recv 30": {
        "model": "deepseek-v3", "gpu": "h200-sxm", "weights_dtype": "fp8", "kv_dtype": "fp8",
        "parallel": {"tp": 8, "ep": 8}, "serving": {"engine": "sglang", "scheduler_recv_interval": 30},
        "workload": {"requests_per_s": 20, "prompt_tokens": 2000, "output_tokens": 250},
    },
    # TensorRT-LLM with attention DP over the 8 GPUs and its balance (attention_dp_config enable_balance,
    # timeout_iters 60, as InferenceX's recipes): new prompts wait for every rank to have one, or 60 passes;
    # a 3 s TTFT target lets the replicas run tens of sequences, so every rank is busy and the wait binds
    "deepseek-v3 fp8 8xh200 dep8 trtllm balance 60": {
        "model": "deepseek-v3", "gpu": "h200-sxm", "weights_dtype": "fp8", "kv_dtype": "fp8",
        "parallel": {"tp": 8, "ep": 8, "dp_attention": True},
        "serving": {"engine": "trtllm", "attention_dp_balance_iters": 60},
        "workload": {"requests_per_s": 20, "prompt_tokens": 2000, "output_tokens": 250},
        "slo": {"ttft_s": 3.0, "itl_s": 0.1},
    },
}
SCENARIOS: dict[str, dict[str, Any]] = {**SHORT_PROMPTS, **EXISTING}
# Arrivals span this many planned end-to-end latencies (the first fills the empty fleet).
E2E_MULTIPLE = 4.0
MIN_REQUESTS = 300


@dataclass(frozen=True)
class SimPoint:
    ttft_p90_s: float
    tpot_s: float  # at slo.itl_percentile
    gap_p99_s: float
    attainment: float


@dataclass(frozen=True)
class AgreementRow:
    name: str
    feasible: bool
    fleet: str
    target: float  # slo.attainment
    plan: SimPoint  # the plan's numbers at its fleet's load
    sim: SimPoint  # the simulator's at the plan's fleet
    plan_gpus: float  # at the scenario's target utilization
    min_gpus: float  # the plan at target utilization 1
    smallest_gpus: float  # the smallest fleet the simulator accepts (GPUs)
    gpus_per_replica: int

    @staticmethod
    def _err(a: float, b: float) -> float:
        return a / b - 1.0 if b > 0 else math.nan

    @property
    def ttft_error(self) -> float:
        return self._err(self.plan.ttft_p90_s, self.sim.ttft_p90_s)

    @property
    def tpot_error(self) -> float:
        return self._err(self.plan.tpot_s, self.sim.tpot_s)

    @property
    def gap_error(self) -> float:
        return self._err(self.plan.gap_p99_s, self.sim.gap_p99_s)

    @property
    def fleet_excess(self) -> float:
        """The minimum plan over the smallest fleet the simulator accepts (0.1 = 10% more GPUs)."""
        return self._err(self.min_gpus, self.smallest_gpus)

    @property
    def fleet_close(self) -> bool:
        """The minimum plan within 10% or one replica of the smallest accepted."""
        return abs(self.min_gpus - self.smallest_gpus) <= max(0.1 * self.smallest_gpus, self.gpus_per_replica)


def _run(sc: Scenario, *, pools: dict[str, int], batch: int, requests: int, seed: int) -> SimPoint:
    opts = sim_options(rate_req_s=sc.workload.peak_rate, requests=requests, seed=seed, router=PLAN_ROUTER,
                       max_batch=batch, slo_attainment=sc.slo.attainment, **pools)
    run = simulate(sc, opts)
    s = summarize(run, slo_ttft_s=sc.slo.ttft_s, slo_itl_s=sc.slo.itl_s)
    tpot = run.tpot_s[run.output_tokens > 1]
    q = sc.slo.itl_percentile
    return SimPoint(ttft_p90_s=s.ttft_s.p90, tpot_s=float(_quantile(tpot, q)), gap_p99_s=s.itl_s.p99,
                    attainment=s.slo_attainment)


def _quantile(x: Any, q: float) -> float:
    import numpy as np

    return float(np.quantile(x, q)) if len(x) else 0.0


def _smallest(accepts: Any, hi: int) -> int:
    """The smallest n in 1..hi with accepts(n), searching down from hi (accepts(hi) assumed);
    bisection (attainment falls as the pool shrinks)."""
    lo = 0  # accepts(lo) is False by convention
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if accepts(mid):
            hi = mid
        else:
            lo = mid
    return hi


def agreement(name: str, data: dict[str, Any], *, requests: int, seed: int = 0, search: bool = True) -> AgreementRow:
    """Plan the scenario, simulate its fleet at its peak rate, compare; the smallest accepted fleet."""
    sc = Scenario.model_validate({"name": name, **data})
    p = plan(sc)
    op, fl = p.operating_point, p.fleet
    nan = math.nan
    blank = SimPoint(nan, nan, nan, nan)
    if not op.feasible:
        return AgreementRow(name, False, op.reason, sc.slo.attainment, blank, blank, nan, nan, nan,
                            fl.gpus_per_replica)
    disagg = sc.serving.mode == "disaggregated"
    e2e = op.ttft_s + workload_stats(resolve(sc)).mean_output * op.itl_s
    n_req = int(min(requests, max(MIN_REQUESTS, math.ceil(sc.workload.peak_rate * E2E_MULTIPLE * e2e))))
    pools = ({"prefill_replicas": int(fl.prefill_replicas), "decode_replicas": int(fl.decode_replicas)} if disagg
             else {"replicas": int(fl.replicas)})
    sim = _run(sc, pools=pools, batch=op.batch_size, requests=n_req, seed=seed)
    g = fl.gpus_per_replica
    target = sc.slo.attainment
    # The plan's minimum fleet: no utilization headroom; the simulator's smallest at its batch cap.
    lean = sc.model_copy(update={"fleet": sc.fleet.model_copy(update={"target_utilization": 1.0})})
    lp = plan(lean)
    lf, lop = lp.fleet, lp.operating_point
    min_gpus = lf.gpus_total if lop.feasible else nan
    top = ({"prefill_replicas": int(lf.prefill_replicas), "decode_replicas": int(lf.decode_replicas)} if disagg
           else {"replicas": int(lf.replicas)}) if lop.feasible else pools
    cap = lop.batch_size if lop.feasible else op.batch_size

    def ok(**kw: int) -> bool:
        return _run(sc, pools={**top, **kw}, batch=cap, requests=n_req, seed=seed).attainment >= target

    def grow(key: str) -> int:
        """A pool size the simulator accepts, doubling from the minimum plan's (at most the plan's × 4)."""
        n = top[key]
        while not ok(**{key: n}) and n < 4 * pools[key]:
            n *= 2
        return n

    if not search or sim.attainment < target:
        smallest = nan
    elif disagg:
        pre = _smallest(lambda n: ok(prefill_replicas=n), grow("prefill_replicas"))
        top = {**top, "prefill_replicas": pre}
        dec = _smallest(lambda n: ok(prefill_replicas=pre, decode_replicas=n), grow("decode_replicas"))
        smallest = float((pre + dec) * g)
    else:
        smallest = float(_smallest(lambda n: ok(replicas=n), grow("replicas")) * g)
    fleet = (f"{pools['prefill_replicas']}P+{pools['decode_replicas']}D" if disagg else f"{pools['replicas']}") + \
        f" × {g} GPU, B≤{op.batch_size}"
    planned = SimPoint(ttft_p90_s=op.ttft_p90_s, tpot_s=op.fleet_itl_percentile_s, gap_p99_s=op.fleet_itl_gap_p99_s,
                       attainment=op.fleet_slo_attainment)
    return AgreementRow(name, True, fleet, target, planned, sim, fl.gpus_total, min_gpus, smallest, g)


def _ms(x: float) -> str:
    return f"{x * 1e3:,.0f}" if x >= 0.1 else f"{x * 1e3:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=6000, help="most requests per run (default 6000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--panel", choices=("short", "existing", "all"), default="all")
    ap.add_argument("--no-search", action="store_true", help="skip the smallest-fleet search")
    args = ap.parse_args()
    chosen = {"short": SHORT_PROMPTS, "existing": EXISTING, "all": SCENARIOS}[args.panel]
    print("| scenario | fleet | TTFT p90 plan / sim (ms) | Δ | TPOT plan / sim (ms) | Δ | gap p99 plan / sim (ms) "
          "| Δ | attainment plan / sim (target) | GPUs plan (u) / plan at u = 1 / smallest sim | Δ |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, data in chosen.items():
        r = agreement(name, data, requests=args.requests, seed=args.seed, search=not args.no_search)
        if not r.feasible:
            print(f"| {name} | infeasible: {r.fleet} | | | | | | | | | |")
            continue
        print(f"| {name} | {r.fleet} | {_ms(r.plan.ttft_p90_s)} / {_ms(r.sim.ttft_p90_s)} | {r.ttft_error:+.0%} | "
              f"{_ms(r.plan.tpot_s)} / {_ms(r.sim.tpot_s)} | {r.tpot_error:+.0%} | {_ms(r.plan.gap_p99_s)} / "
              f"{_ms(r.sim.gap_p99_s)} | {r.gap_error:+.0%} | {r.plan.attainment:.3f} / {r.sim.attainment:.3f} "
              f"(≥ {r.target:g}) | {r.plan_gpus:,.0f} / {r.min_gpus:,.0f} / {r.smallest_gpus:,.0f} | "
              f"{r.fleet_excess:+.0%} |")


if __name__ == "__main__":
    main()
