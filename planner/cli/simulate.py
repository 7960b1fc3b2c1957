"""``python -m planner simulate``: the iteration-level serving simulator from the command line.

One run prints its summary; ``--rates a,b,c`` prints a ``levels`` list and the
``knee_rate_req_s`` (highest rate whose SLO attainment reaches ``--attainment``).

Without fleet flags (``--replicas``, ``--prefill-replicas``, ``--decode-replicas``) the run
is the plan's fleet: its replicas (or pools), its operating batch as the engine's cap,
the router the plan's queueing assumes (least loaded) and the peak rate it was sized
for; the output's ``fleet`` says so.
"""

from __future__ import annotations

import argparse
from typing import Any

from planner.cli.main import add_format_arg, add_scenario_args, emit, scenario_from_args
from planner.errors import ScenarioError
from planner.io.export import flatten

__all__ = ["parse_rates", "register"]


def parse_rates(text: str) -> list[float]:
    """``"1,2.5,4"`` → [1.0, 2.5, 4.0]; every rate > 0, repeats dropped, at most MAX_RATES."""
    from planner.simulate.options import MAX_RATE_REQ_S
    from planner.simulate.report import MAX_RATES

    out: dict[float, None] = {}
    for part in text.split(","):
        part = part.strip()
        try:
            if len(part) > 40:
                raise ValueError(part)
            value = float(part)
        except ValueError:
            raise ScenarioError(f"--rates: {part[:40]!r} is not a number; expected e.g. --rates 1,2,4") from None
        if not 0 < value <= MAX_RATE_REQ_S:
            raise ScenarioError(f"--rates: every rate must be > 0 and at most {MAX_RATE_REQ_S:g} req/s, got {part}")
        out[value] = None
        if len(out) > MAX_RATES:
            raise ScenarioError(f"--rates: more than {MAX_RATES} distinct rates; the limit is {MAX_RATES}")
    return list(out)


_FLAGS = {"rate_req_s": "--rate", "slo_attainment": "--attainment", "lengths": "--lengths",
          "chunked_prefill": "--no-chunking"}


def _flag_message(message: str) -> str:
    """``kv_capacity_tokens: ...`` → ``--kv-capacity-tokens: ...`` (the option the user typed)."""
    key, sep, rest = message.partition(": ")
    if not sep or " " in key:
        return message
    flag = "--" + key.replace("_", "-")
    return f"{_FLAGS[key]} ({key}): {rest}" if key in _FLAGS else f"{flag}: {rest}"


def _plan_fleet(args: argparse.Namespace, scenario: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(option defaults, the ``fleet`` note): the plan's fleet when no fleet flag is given."""
    from planner.simulate.fleetcheck import PLAN_ROUTER
    from planner.sizing.plan import plan

    if any(v is not None for v in (args.replicas, args.prefill_replicas, args.decode_replicas)):
        return {}, {"source": "flags", "note": "the fleet the flags give"}
    p = plan(scenario)
    f, op = p.fleet, p.operating_point
    if not op.feasible:
        return {}, {"source": "default", "note": f"the plan has no fleet ({op.reason}): one replica, "
                                                 "round robin"}
    disagg = f.mode == "disaggregated"
    pools = ({"prefill_replicas": int(f.prefill_replicas), "decode_replicas": int(f.decode_replicas)} if disagg
             else {"replicas": int(f.replicas)})
    defaults: dict[str, Any] = {**pools, "router": PLAN_ROUTER, "max_batch": max(op.batch_size, 1),
                                "rate_req_s": scenario.workload.peak_rate}
    size = (f"{pools['prefill_replicas']} prefill + {pools['decode_replicas']} decode replicas" if disagg
            else f"{pools['replicas']} replicas")
    note = (f"the plan's fleet: {size}, batch cap {op.batch_size}, {PLAN_ROUTER.replace('_', ' ')} router (the "
            f"plan's M/G/c queue), at the peak rate it was sized for; flags override each")
    return defaults, {"source": "plan", **pools, "router": PLAN_ROUTER, "max_batch": op.batch_size, "note": note}


def _options(args: argparse.Namespace, defaults: dict[str, Any] | None = None) -> Any:
    from planner.simulate import sim_options

    fields = {
        "rate_req_s": args.rate, "requests": args.requests, "router": args.router, "seed": args.seed,
        "replicas": args.replicas, "arrival": args.arrival, "burstiness": args.burstiness,
        "lengths": args.lengths, "length_sigma": args.length_sigma, "multi_turn": args.multi_turn,
        "think_s": args.think_s, "concurrency": args.concurrency, "chunked_prefill": not args.no_chunking,
        "prefill_replicas": args.prefill_replicas, "decode_replicas": args.decode_replicas,
        "kv_capacity_tokens": args.kv_capacity_tokens, "max_batch": args.max_batch,
        "slo_attainment": args.attainment,
    }
    if args.length_sigma is not None and args.lengths is None:
        fields["lengths"] = "lognormal"  # a sigma only means something for lognormal lengths
    if args.concurrency is not None or args.trace:
        defaults = {k: v for k, v in (defaults or {}).items() if k != "rate_req_s"}
    given = {k: v for k, v in fields.items() if v is not None}
    try:
        return sim_options(**{**(defaults or {}), **given})
    except ScenarioError as exc:
        raise ScenarioError(_flag_message(str(exc))) from None


def _cmd_simulate(args: argparse.Namespace) -> int:
    from planner.simulate import load_trace, rate_sweep, simulate, summarize

    scenario = scenario_from_args(args)
    defaults, fleet = _plan_fleet(args, scenario)
    options = _options(args, defaults)
    slo = scenario.slo
    if args.rates is not None:
        if args.trace:
            raise ScenarioError("--rates: cannot be combined with --trace (the trace fixes the arrival times)")
        sweep = rate_sweep(scenario, options, parse_rates(args.rates))
        result = sweep.to_json_dict()
        rows = [flatten(lv) for lv in result["levels"]]
        if args.format == "json":
            emit("json", result)
        else:
            emit(args.format, result, rows)
            if args.format == "table":
                print(f"knee_rate_req_s  {sweep.knee_rate_req_s}")
        return 0
    if args.compare_routers:
        by_router: dict[str, dict[str, Any]] = {}
        for policy in ("round_robin", "least_loaded", "prefix_affinity"):
            run = simulate(scenario, options.model_copy(update={"router": policy}))
            by_router[policy] = summarize(run, slo_ttft_s=slo.ttft_s, slo_itl_s=slo.itl_s).to_json_dict()
        emit(args.format, by_router, [{"router": k, **flatten(v)} for k, v in by_router.items()])
        return 0
    requests = load_trace(args.trace) if args.trace else None
    run = simulate(scenario, options, requests)
    rate = None if requests is not None else (options.rate_req_s or scenario.workload.requests_per_s)
    summary = summarize(run, slo_ttft_s=slo.ttft_s, slo_itl_s=slo.itl_s, offered_rate_req_s=rate,
                        timeline=args.timeline and args.format == "json").to_json_dict()
    summary["fleet"] = fleet
    emit(args.format, summary, [flatten(summary)])
    if args.format == "table":
        print(f"fleet  {fleet['note']}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("simulate", help="simulate serving a request stream, iteration by iteration")
    add_scenario_args(p)
    rate = p.add_mutually_exclusive_group()
    rate.add_argument("--rate", type=float, help="offered requests/s (default: workload.requests_per_s)")
    rate.add_argument("--rates", help="comma-separated rates to sweep; reports levels and the knee")
    p.add_argument("--requests", type=int, help="requests to simulate (default 1000)")
    p.add_argument("--router", choices=("round_robin", "least_loaded", "prefix_affinity"))
    p.add_argument("--compare-routers", action="store_true", help="run every router on the same stream")
    p.add_argument("--seed", type=int)
    p.add_argument("--replicas", type=int, help="colocated replicas (default: the plan's fleet)")
    p.add_argument("--prefill-replicas", type=int, help="serving.mode=disaggregated: prefill pool size")
    p.add_argument("--decode-replicas", type=int, help="serving.mode=disaggregated: decode pool size")
    p.add_argument("--arrival", choices=("poisson", "gamma"))
    p.add_argument("--burstiness", type=float, help="gamma shape: 1 = Poisson, < 1 burstier")
    p.add_argument("--lengths", choices=("scenario", "lognormal", "fixed"),
                   help="length distribution: the scenario's workload.distribution (default), or lognormal/fixed "
                        "around workload.prompt_tokens/output_tokens")
    p.add_argument("--length-sigma", type=float, help="lognormal sigma (default 0.5)")
    p.add_argument("--multi-turn", type=int, metavar="TURNS", help="chat sessions of TURNS turns")
    p.add_argument("--think-s", type=float, help="mean think time between turns (default 5 s)")
    p.add_argument("--concurrency", type=int, help="closed loop: keep this many requests in flight")
    p.add_argument("--trace", help="CSV of arrival_s,prompt_tokens,output_tokens[,prefix_key,prefix_tokens]")
    p.add_argument("--no-chunking", action="store_true", help="prefill whole prompts in one iteration")
    p.add_argument("--kv-capacity-tokens", type=int, help="override the KV capacity per replica")
    p.add_argument("--max-batch", type=int, help="cap on running sequences per replica")
    p.add_argument("--attainment", type=float, help="SLO attainment target for the knee (default 0.99)")
    p.add_argument("--timeline", action="store_true", help="include KV occupancy and batch size over time (json)")
    add_format_arg(p)
    p.set_defaults(func=_cmd_simulate)
