"""``python -m planner autoscale``: replicas per control interval over a day, GPU-hours, $ and savings.

    python -m planner autoscale [SCENARIO.json] [--set ...] [--profile FILE | --shape diurnal:peak=R,trough=R,peak_hour=H]
        [--policy static|reactive|predictive] [--simulate] --format json|csv|table

JSON: ``steps`` (one per interval) and ``summary``, plus ``derivations``; CSV: one row
per step; table: the steps, then the summary and the derivations.  ``--simulate``
runs each interval through the simulator (progress on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from planner.cli.main import add_format_arg, add_scenario_args, emit
from planner.io.formatting import format_value

__all__ = ["STEP_COLUMNS", "register"]

# The public per-step keys, in the order (the CSV and table columns).
STEP_COLUMNS = ("t_s", "requests_per_s", "prefill_replicas", "decode_replicas", "replicas", "gpus", "ttft_p90_s",
                "itl_p90_s", "slo_attainment", "needed_replicas", "covered_fraction", "meets_slo")


def _scenario(args: argparse.Namespace) -> Any:
    from planner.io.jsonfile import read_text_file
    from planner.spec.profile import MAX_PROFILE_CSV_BYTES, parse_profile_csv, parse_shape
    from planner.spec.scenario import apply_overrides, load_scenario_file, scenario_from_dict

    data: dict[str, Any] = load_scenario_file(args.scenario) if args.scenario else {}
    data = apply_overrides(data, list(args.overrides))
    points = None
    if args.profile:
        points = parse_profile_csv(read_text_file(args.profile, max_bytes=MAX_PROFILE_CSV_BYTES, what="--profile"))
    elif args.shape:
        points = parse_shape(args.shape)
    if points is not None:
        data.setdefault("workload", {})["profile"] = [p.model_dump() for p in points]
    if args.policy:
        data.setdefault("fleet", {})["policy"] = args.policy
    return scenario_from_dict(data, allow_local_files=True)


def _progress(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\rsimulating intervals [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _cmd_autoscale(args: argparse.Namespace) -> int:
    from planner.sizing.autoscale import autoscale

    scenario = _scenario(args)
    result = autoscale(scenario)
    if args.simulate:
        from planner.simulate.day import simulate_day

        result = simulate_day(scenario, result, requests_per_step=args.requests_per_step, seed=args.seed,
                              workers=args.workers, progress=_progress if sys.stderr.isatty() or args.progress
                              else None)
    payload = result.to_json_dict()
    rows = [{k: st[k] for k in STEP_COLUMNS} for st in payload["steps"]]
    if args.format == "table":
        emit("table", payload, rows)
        print("summary:")
        for k, v in payload["summary"].items():
            print(f"  {k}  {format_value(k, v)}")
        print("derivations:")
        for dv in payload["derivations"].values():
            print(f"  {dv['name']} = {dv['formula']} = {dv['substituted']} = "
                  f"{format_value(dv['name'], dv['value'])} [{dv['origin']}]")
        return 0
    emit(args.format, payload, rows)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("autoscale", help="replicas per interval over a day under an autoscaling policy")
    add_scenario_args(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--profile", metavar="FILE", help="CSV with columns t_s,requests_per_s (a day, repeating)")
    src.add_argument("--shape", metavar="diurnal:peak=R,trough=R,peak_hour=H", help="a named traffic shape")
    p.add_argument("--policy", choices=("static", "reactive", "predictive"), help="default: fleet.policy")
    p.add_argument("--simulate", action="store_true", help="simulate each interval (SLO attainment per step)")
    p.add_argument("--requests-per-step", type=int, default=2000, help="requests simulated per interval (2000)")
    p.add_argument("--workers", type=int, help="processes for --simulate (default: every core)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--progress", action="store_true", help="progress on stderr even when it is not a terminal")
    add_format_arg(p)
    p.set_defaults(func=_cmd_autoscale)
