"""``python -m planner deploy [SCENARIO.json] [--set ...] --target vllm|sglang|trtllm|kserve|llm-d|dynamo
[--out DIR] [--force] [--weights REPO_OR_PATH] [--revision N]``: the engine commands or Kubernetes
manifests that run the plan.  Without --out the files go to stdout, each after a ``# ===== NAME =====``
line; a plan the target cannot express is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys

from planner.cli.main import add_scenario_args, scenario_from_args
from planner.io.output import write_text

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from planner.deploy import deploy, deployment_text, write_deployment

    d = deploy(scenario_from_args(args), args.target, revision=args.revision, weights=args.weights)
    if args.out:
        for path in write_deployment(d, args.out, overwrite=args.force):
            print(path)
        return 0
    write_text(sys.stdout, deployment_text(d))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from planner.deploy import TARGETS

    p = sub.add_parser("deploy", help="write the engine command or Kubernetes manifests that run the plan")
    add_scenario_args(p)
    p.add_argument("--target", required=True, choices=TARGETS)
    p.add_argument("--out", metavar="DIR", help="write the files into DIR (default: print them)")
    p.add_argument("--force", action="store_true", help="overwrite files already in DIR")
    p.add_argument("--weights", metavar="REPO_OR_PATH",
                   help="a pre-quantized checkpoint to load instead of the catalog model's repository")
    p.add_argument("--revision", help="the stored scenario's revision, for the files' header (default: unsaved)")
    p.set_defaults(func=_cmd)
