"""``python -m planner sweep``: the design-space sweep."""

from __future__ import annotations

import argparse

from planner.cli.main import add_format_arg, add_scenario_args, emit, scenario_from_args
from planner.errors import ScenarioError
from planner.views.sweep import DEFAULT_PP, DEFAULT_TP, MODES, sweep

__all__ = ["register"]


def _ints(text: str, flag: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ScenarioError(f"{flag}: expected comma-separated integers, got {text!r}") from None
    if not out or any(x < 1 for x in out):
        raise ScenarioError(f"{flag}: expected positive integers, got {text!r}")
    return out


def _strs(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _cmd(args: argparse.Namespace) -> int:
    base = scenario_from_args(args)
    result = sweep(base, gpus=_strs(args.gpus), dtypes=_strs(args.dtypes), tps=_ints(args.tp, "--tp"),
                   pps=_ints(args.pp, "--pp"), eps=_ints(args.ep, "--ep") if args.ep else None,
                   chunks=_ints(args.chunks, "--chunks") if args.chunks else None,
                   modes=_strs(args.modes) or list(MODES))
    emit(args.format, result, result["rows"])
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sweep", help="evaluate every GPU × dtype × layout × mode candidate")
    add_scenario_args(p)
    p.add_argument("--gpus", help="comma-separated catalog GPU ids (default: all)")
    p.add_argument("--dtypes", help="comma-separated weight dtypes (default: bf16,fp8,int8,int4,nvfp4)")
    p.add_argument("--tp", default=",".join(map(str, DEFAULT_TP)))
    p.add_argument("--pp", default=",".join(map(str, DEFAULT_PP)))
    p.add_argument("--ep", help="comma-separated expert-parallel degrees (default: 1,2,4,8 for MoE models)")
    p.add_argument("--chunks", help="comma-separated chunk sizes in tokens (default: 512,2048,8192 and the "
                                    "scenario's serving.chunk_tokens)")
    p.add_argument("--modes", default=",".join(MODES))
    add_format_arg(p)
    p.set_defaults(func=_cmd)
