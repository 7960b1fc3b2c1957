"""``python -m planner``: plan (and the subcommands other modules register).

Output is JSON (default), CSV or a table.  Every PlannerError becomes one line
on stderr and exit status 2; nothing prints a traceback for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import logging
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from planner.errors import PlannerError
from planner.io.export import REASON_COLUMN, csv_text, finite_row, flatten, plan_infeasible_reason, plan_row
from planner.io.formatting import format_value
from planner.io.output import OutputError, flush_stream, whole_stdout, write_text
from planner.spec.scenario import Scenario, apply_overrides, load_scenario_file, scenario_from_dict

__all__ = ["main", "one_line", "scenario_from_args", "add_scenario_args", "emit", "plan_row"]

# Subcommand modules; each defines register(subparsers) -> None.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "planner.cli.main",
    "planner.cli.sweep",
    "planner.cli.validate",
    "planner.cli.simulate",
    "planner.cli.autoscale",
    "planner.cli.scenarios",
    "planner.cli.probe",
    "planner.cli.report",
    "planner.cli.benchimport",
    "planner.cli.deploy",
)


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    """The scenario inputs every command shares: a file and --set overrides."""
    p.add_argument("scenario", nargs="?", help="scenario JSON file (optional)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario field by its dotted key, e.g. parallel.tp=2")


def add_format_arg(p: argparse.ArgumentParser, default: str = "json") -> None:
    p.add_argument("--format", choices=("json", "csv", "table"), default=default)


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario a local user names: a file and/or ``--set`` overrides.  Only
    here may ``model`` be a config.json path (read with the size cap)."""
    data: dict[str, Any] = load_scenario_file(args.scenario) if getattr(args, "scenario", None) else {}
    return scenario_from_dict(apply_overrides(data, list(getattr(args, "overrides", []))), allow_local_files=True)


def _table(rows: list[dict[str, Any]]) -> str:
    if len(rows) == 1:
        row = rows[0]
        if row.get(REASON_COLUMN):  # say first why some values show "—"
            row = {REASON_COLUMN: row[REASON_COLUMN], **row}
        width = max((len(k) for k in row), default=0)
        return "\n".join(f"{k.ljust(width)}  {format_value(k, v)}" for k, v in row.items())
    cols = list(rows[0]) if rows else []
    cells = [[format_value(c, r.get(c)) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _finite(value: Any) -> Any:
    """NaN/inf (an infeasible candidate's cost, say) become null: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def emit(fmt: str, payload: Any, rows: list[dict[str, Any]] | None = None) -> None:
    """Print ``payload`` as JSON, or ``rows`` (flat dicts) as CSV or a table: written
    whole (``planner.io.output.write_text``), or an OutputError says how much went out."""
    if fmt == "json":
        write_text(sys.stdout, json.dumps(_finite(payload), indent=2, default=str, allow_nan=False) + "\n")
        return
    rows = [finite_row(r) for r in (rows if rows is not None else [flatten(payload)])]
    write_text(sys.stdout, csv_text(rows) if fmt == "csv" else _table(rows) + "\n")


def _cmd_plan(args: argparse.Namespace) -> int:
    from planner.sizing.plan import plan

    scenario = scenario_from_args(args)
    result = plan(scenario).to_json_dict()
    if args.format == "table":
        reason = plan_infeasible_reason(result)
        rows = [finite_row(flatten(result), reason)]
        emit("table", result, rows)
        print("derivations:")
        for dv in result["derivations"].values():
            print(f"  {dv['name']} = {dv['formula']} = {dv['substituted']} = "
                  f"{format_value(dv['name'], dv['value'])} [{dv['origin']}]")
        return 0
    emit(args.format, result, [plan_row(scenario, result)])
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plan", help="plan one scenario")
    add_scenario_args(p)
    add_format_arg(p)
    p.set_defaults(func=_cmd_plan)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(text: str) -> str:
    """``text`` on one line: line breaks and other control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m planner", description="Ridgeline capacity planner")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMAND_MODULES:
        module = importlib.import_module(name)
        reg: Callable[[Any], None] = module.register
        reg(sub)
    return parser


def _say(line: str) -> None:
    """One line on stderr, if stderr is still there."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _quiet_stdout() -> None:
    """Send what stdout still buffers nowhere, so the exit does not fail again on it."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with whole_stdout():  # every print() to a pipe goes out whole, or OutputError says it did not
            status = int(args.func(args))
            flush_stream(sys.stdout)
        return status
    except OutputError as exc:  # the output was cut: never exit 0 with part of it
        _say(f"error: {one_line(str(exc))}")
        _quiet_stdout()
        return 1
    except PlannerError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head`: the reader left before the end
        _say("error: the reader closed the pipe; the output is incomplete")
        _quiet_stdout()
        return 1
    except (RecursionError, MemoryError) as exc:
        print(f"error: the input is too large or too deeply nested ({type(exc).__name__})", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug, still one line and no traceback for the user
        logging.getLogger("planner").debug("unexpected error", exc_info=True)
        print(f"error: internal error ({type(exc).__name__}: {one_line(str(exc))[:300]}); please report it",
              file=sys.stderr)
        return 1
