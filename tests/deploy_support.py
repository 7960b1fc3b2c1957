"""The three golden plans of issue 27 and helpers the deploy tests share."""

from __future__ import annotations

import argparse
import shlex
from functools import cache
from typing import Any

from planner import plan
from planner.deploy import ENGINE_FLAGS, flags_of
from planner.sizing.plan import Plan
from planner.spec.catalog import load_catalog
from planner.spec.scenario import Scenario, scenario_from_dict

LLAMA_FP8_TP2: dict[str, Any] = {
    "name": "llama-70b-fp8-tp2", "model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8",
    "kv_dtype": "fp8", "parallel": {"tp": 2}}
# Disaggregated 70B: 11 prefill and 3 decode replicas of TP 4 (4000-token prompts, 500-token outputs, 40 req/s)
LLAMA_DISAGG: dict[str, Any] = {
    "name": "llama-70b-disagg", "model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8",
    "kv_dtype": "fp8", "parallel": {"tp": 4}, "serving": {"mode": "disaggregated"},
    "workload": {"prompt_tokens": 4000, "output_tokens": 500, "requests_per_s": 40}}


def deepseek_dict() -> dict[str, Any]:
    """DeepSeek-R1 (DeepSeek-V3's shape until the catalog has R1) TP 8 · EP 8 with DP attention and MTP.
    """
    model = "deepseek-r1" if "deepseek-r1" in load_catalog().models else "deepseek-v3"
    par: dict[str, Any] = {"tp": 8, "ep": 8, "dp_attention": True}
    spec: dict[str, Any] = {"draft_tokens": 1, "method": "mtp"}
    return {"name": "deepseek-tp8-ep8-dpa-mtp", "model": model, "gpu": "h200-sxm", "weights_dtype": "fp8",
            "kv_dtype": "fp8", "parallel": par, "speculative": spec,
            "workload": {"prompt_tokens": 2000, "output_tokens": 500, "requests_per_s": 20}}


@cache
def golden(name: str) -> tuple[Scenario, Plan]:
    data = {"llama": LLAMA_FP8_TP2, "disagg": LLAMA_DISAGG, "deepseek": deepseek_dict()}[name]
    s = scenario_from_dict(data)
    return s, plan(s)


def engine_parser(engine: str) -> argparse.ArgumentParser:
    """An argparse parser with exactly the flags the table documents for ``engine``."""
    parser = argparse.ArgumentParser(prog=engine, add_help=False, exit_on_error=False)
    parser.add_argument("positional", nargs="*")
    for f in flags_of(engine):
        if f.is_cli:
            if f.takes_value:
                parser.add_argument(f.name)
            else:
                parser.add_argument(f.name, action="store_true")
    return parser


def parse_command(engine: str, argv: tuple[str, ...] | list[str]) -> argparse.Namespace:
    """Parse an emitted command with the documented names; unknown flags fail.  A ``python -m
    MODULE`` launcher is kept as the first positionals."""
    args = list(argv)
    launcher = args[:3] if args[:2] == ["python", "-m"] else []
    ns = engine_parser(engine).parse_args(args[len(launcher):])
    ns.positional = launcher + ns.positional
    return ns


def parse_line(engine: str, line: str) -> argparse.Namespace:
    return parse_command(engine, shlex.split(line))


def cli_flags(argv: tuple[str, ...]) -> list[str]:
    return [a for a in argv if a.startswith("--")]


__all__ = ["ENGINE_FLAGS", "LLAMA_DISAGG", "LLAMA_FP8_TP2", "cli_flags", "deepseek_dict", "engine_parser",
           "golden", "parse_command", "parse_line"]
