"""``python -m planner report``: the review report as a file (.html, or .pdf
printed by headless Chromium), the same document the Plan page downloads, with the
simulated check of the plan's fleet and the refereed colocated/disaggregated verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from planner.cli.main import add_format_arg, add_scenario_args, emit, scenario_from_args
from planner.deploy import TARGETS
from planner.errors import PlannerError, ScenarioError
from planner.io.atomic import write_bytes_atomic
from planner.io.pdf import chromium_path, html_to_pdf, no_chromium_message
from planner.views.report import DEFAULT_APP_URL

__all__ = ["APP_URL_MAX_CHARS", "register"]

APP_URL_MAX_CHARS = 2_000  # an address, not a document
SUFFIXES = {".html": "html", ".htm": "html", ".pdf": "pdf"}


def _app_url(text: str) -> str:
    if len(text) > APP_URL_MAX_CHARS or not text.lower().startswith(("http://", "https://")):
        raise ScenarioError(f"--app-url: expected an http(s) address of the app (at most {APP_URL_MAX_CHARS:,} "
                            f"characters), e.g. {DEFAULT_APP_URL}")
    return text


def _cmd(args: argparse.Namespace) -> int:
    out = Path(args.out)
    kind = SUFFIXES.get(out.suffix.lower())
    if out.is_dir():
        raise PlannerError(f"--out: {out} is a directory; give a file name ending in .html or .pdf")
    if kind is None:
        raise ScenarioError(f"--out: {out.name!r} must end in .html or .pdf")
    if kind == "pdf" and chromium_path() is None:
        raise PlannerError(no_chromium_message())
    from planner.simulate.referee import checked_report_html

    scenario = scenario_from_args(args)
    html = checked_report_html(scenario, app_url=_app_url(args.app_url), deploy_target=args.deploy_target)
    data = html_to_pdf(html) if kind == "pdf" else html.encode()
    write_bytes_atomic(out, data)
    emit(args.format, {"path": str(out), "format": kind, "bytes": len(data)})
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="write the review report (.html, or .pdf via headless Chromium)")
    add_scenario_args(p)
    p.add_argument("--out", required=True, metavar="FILE.html|FILE.pdf", help="the report file to write")
    p.add_argument("--app-url", default=DEFAULT_APP_URL,
                   help=f"the app's address for the report's share link (default {DEFAULT_APP_URL})")
    p.add_argument("--deploy-target", choices=TARGETS, help="list this deploy target's commands in the report")
    add_format_arg(p)
    p.set_defaults(func=_cmd)
