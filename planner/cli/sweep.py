"""``python -m planner sweep``: the design-space sweep; its ``cheapest`` is refereed by the
simulator (the cheapest candidate whose short simulation meets ``slo.attainment``; the
candidates simulated are in ``simulated``, each row's in ``simulated_attainment``)."""

from __future__ import annotations

import argparse

from planner.cli.main import add_format_arg, add_scenario_args, emit, scenario_from_args
from planner.errors import ScenarioError
from planner.spec.scenario import MAX_EP, MAX_PP, MAX_SEQUENCE_TOKENS, MAX_TP
from planner.views.referee import REFEREE_MAX_SIMULATED
from planner.views.sweep import DEFAULT_PP, DEFAULT_TP, MODES, MOE_MULTI_NODE_TP, sweep

__all__ = ["MAX_SIMULATE", "register"]

MAX_SIMULATE = 50  # candidates one sweep may simulate (each a short run, under a second)


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def _ints(text: str, flag: str, top: int) -> list[int]:
    """Comma-separated integers from 1 to ``top``, repeats dropped."""
    out: dict[int, None] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not (part.isascii() and part.isdigit()) or len(part) > 6:
            raise ScenarioError(f"{flag}: expected comma-separated integers from 1 to {top}, got {_shown(part)}")
        value = int(part)
        if not 1 <= value <= top:
            raise ScenarioError(f"{flag}: every value must be from 1 to {top}, got {value}")
        out[value] = None
    if not out:
        raise ScenarioError(f"{flag}: expected comma-separated integers from 1 to {top}, got {_shown(text)}")
    return list(out)


def _strs(text: str | None) -> list[str] | None:
    return list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip())) if text else None


def _bools(text: str) -> list[bool]:
    """Comma-separated off/on (or false/true) values, repeats dropped."""
    out: dict[bool, None] = {}
    for part in (x.strip().lower() for x in text.split(",")):
        if part in ("on", "true"):
            out[True] = None
        elif part in ("off", "false"):
            out[False] = None
        elif part:
            raise ScenarioError(f"--dp-attention: expected off, on or off,on, got {_shown(part)}")
    if not out:
        raise ScenarioError(f"--dp-attention: expected off, on or off,on, got {_shown(text)}")
    return list(out)


def _cmd(args: argparse.Namespace) -> int:
    base = scenario_from_args(args)
    from planner.simulate.referee import simulated_attainment

    if not 0 <= args.simulate_max <= MAX_SIMULATE:
        raise ScenarioError(f"--simulate-max: expected 0 to {MAX_SIMULATE}, got {args.simulate_max}")
    result = sweep(base, gpus=_strs(args.gpus), dtypes=_strs(args.dtypes),
                   tps=_ints(args.tp, "--tp", MAX_TP) if args.tp is not None else None,
                   dp_attentions=_bools(args.dp_attention) if args.dp_attention is not None else None,
                   pps=_ints(args.pp, "--pp", MAX_PP), eps=_ints(args.ep, "--ep", MAX_EP) if args.ep else None,
                   chunks=_ints(args.chunks, "--chunks", MAX_SEQUENCE_TOKENS) if args.chunks else None,
                   modes=_strs(args.modes) or list(MODES),
                   referee=simulated_attainment if args.simulate_max else None, referee_cap=args.simulate_max)
    emit(args.format, result, result["rows"])
    if args.format == "table" and result["referee"]:
        print(f"cheapest  {result['referee']['note']}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sweep", help="evaluate every GPU × dtype × layout × mode candidate")
    add_scenario_args(p)
    p.add_argument("--gpus", help="comma-separated catalog GPU ids (default: all)")
    p.add_argument("--dtypes", help="comma-separated weight dtypes (default: bf16,fp8,int8,int4,nvfp4)")
    p.add_argument("--tp", help=f"comma-separated tensor-parallel degrees (default: {','.join(map(str, DEFAULT_TP))}, "
                                f"and {','.join(map(str, MOE_MULTI_NODE_TP))} over several nodes for MoE models)")
    p.add_argument("--pp", default=",".join(map(str, DEFAULT_PP)))
    p.add_argument("--ep", help="comma-separated expert-parallel degrees, each dividing TP (default for MoE "
                                "models: 1,2,4,8 where they divide TP, and EP = TP for the multi-node TPs)")
    p.add_argument("--dp-attention", help="data-parallel attention: off, on or off,on (default: off,on for MoE "
                                          "models, else the scenario's)")
    p.add_argument("--chunks", help="comma-separated chunk sizes in tokens (default: 512,2048,8192 and the "
                                    "scenario's serving.chunk_tokens)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--simulate-max", type=int, default=REFEREE_MAX_SIMULATED, metavar="N",
                   help=f"simulate at most N candidates, cheapest first, to referee the cheapest (default "
                        f"{REFEREE_MAX_SIMULATED}; 0: the analytic cheapest, not simulated)")
    add_format_arg(p)
    p.set_defaults(func=_cmd)
