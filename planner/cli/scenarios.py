"""``python -m planner scenarios list|show|save|update|delete|history|restore|export|import``.

The database is ``DATABASE_URL`` (any SQLAlchemy URL) or the default SQLite
file; it must be migrated first (``make migrate``).  Output is JSON (default)
or a table (``--format table``); ``list`` and ``history`` also give CSV.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from planner import store
from planner.cli.main import add_format_arg, add_scenario_args, emit, scenario_from_args
from planner.spec.scenario import apply_overrides, load_scenario_file, scenario_from_dict
from planner.store import repository as repo
from planner.store.db import make_engine
from planner.store.limits import parse_import_bytes, read_import_file
from planner.store.migrate import require_current

__all__ = ["register"]


def _engine() -> Engine:
    engine = make_engine()
    require_current(engine)
    return engine


def _stored_json(s: repo.StoredScenario) -> dict[str, Any]:
    return {
        "id": s.id, "slug": s.slug, "name": s.name, "description": s.description, "tags": list(s.tags),
        "version": s.version, "schema_version": s.schema_version, "created_at": s.created_at.isoformat(),
        "updated_at": s.updated_at.isoformat(), "scenario": s.payload,
        "frozen_catalog": s.frozen_catalog.model_dump(mode="json") if s.frozen_catalog else None,
        "catalog_drift": list(s.catalog_drift()),
    }


def _summary_row(s: repo.ScenarioSummary) -> dict[str, Any]:
    return {"id": s.id, "slug": s.slug, "name": s.name, "version": s.version, "tags": ",".join(s.tags),
            "updated_at": s.updated_at.isoformat(timespec="seconds")}


def _show(fmt: str, s: repo.StoredScenario) -> None:
    payload = _stored_json(s)
    row = {k: v for k, v in payload.items() if k not in {"scenario", "frozen_catalog", "catalog_drift"}}
    row["tags"] = ",".join(s.tags)
    row["catalog_drift"] = "; ".join(s.catalog_drift()) or "none"
    emit(fmt, payload, [row])


def _cmd_list(args: argparse.Namespace) -> int:
    items = repo.list_scenarios(engine=_engine(), query=args.query, tag=args.tag)
    emit(args.format, [_summary_row(s) | {"description": s.description} for s in items],
         [_summary_row(s) for s in items])
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    _show(args.format, repo.get_scenario(engine=_engine(), ref=args.ref))
    return 0


def _cmd_save(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    stored = repo.save_scenario(engine=_engine(), scenario=scenario, name=args.name, slug=args.slug,
                                description=args.description or "", tags=args.tags)
    _show(args.format, stored)
    return 0


def _cmd_update(args: argparse.Namespace) -> int:
    engine = _engine()
    current = repo.get_scenario(engine=engine, ref=args.ref)
    expected = args.expected_version if args.expected_version is not None else current.version
    scenario = None
    if args.scenario or args.overrides:
        base = load_scenario_file(args.scenario) if args.scenario else dict(current.payload)
        scenario = scenario_from_dict(apply_overrides(base, list(args.overrides)))
    stored = repo.update_scenario(engine=engine, ref=args.ref, expected_version=expected, scenario=scenario,
                                  name=args.name, description=args.description,
                                  tags=args.tags if args.tags else None)
    _show(args.format, stored)
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    repo.delete_scenario(engine=_engine(), ref=args.ref, expected_version=args.expected_version)
    emit(args.format, {"deleted": args.ref}, [{"deleted": args.ref}])
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    revs = repo.list_revisions(engine=_engine(), ref=args.ref)
    payload = [{"version": r.version, "name": r.name, "note": r.note, "created_at": r.created_at.isoformat(),
                "scenario": r.payload} for r in revs]
    rows = [{"version": r.version, "name": r.name, "note": r.note,
             "created_at": r.created_at.isoformat(timespec="seconds")} for r in revs]
    emit(args.format, payload, rows)
    return 0


def _cmd_restore(args: argparse.Namespace) -> int:
    engine = _engine()
    expected = args.expected_version
    if expected is None:
        expected = repo.get_scenario(engine=engine, ref=args.ref).version
    stored = repo.restore_revision(engine=engine, ref=args.ref, version=args.version, expected_version=expected)
    _show(args.format, stored)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    doc = store.export_scenario(engine=_engine(), ref=args.ref)
    text = json.dumps(doc, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    doc = parse_import_bytes(read_import_file(args.file), source=str(args.file))
    _show(args.format, store.import_scenario(engine=_engine(), document=doc, slug=args.slug))
    return 0


def _ref(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", help="scenario slug or id")


def _expected(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expected-version", type=int, default=None,
                   help="the version you loaded; a newer stored version is a conflict (exit 2)")


def _meta(p: argparse.ArgumentParser, *, new: bool) -> None:
    p.add_argument("--name", default=None)
    p.add_argument("--description", default=None)
    p.add_argument("--tag", dest="tags", action="append", default=[], help="repeatable")
    if new:
        p.add_argument("--slug", default=None, help="link name (default: made from the name)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    top = sub.add_parser("scenarios", help="saved scenarios (DATABASE_URL or the SQLite file)")
    cmds = top.add_subparsers(dest="scenarios_command", required=True)

    p = cmds.add_parser("list", help="list saved scenarios")
    p.add_argument("--query", default=None, help="match name or slug")
    p.add_argument("--tag", default=None)
    add_format_arg(p)
    p.set_defaults(func=_cmd_list)

    p = cmds.add_parser("show", help="one saved scenario")
    _ref(p)
    add_format_arg(p)
    p.set_defaults(func=_cmd_show)

    p = cmds.add_parser("save", help="save a new scenario (file and --set as for plan)")
    add_scenario_args(p)
    _meta(p, new=True)
    add_format_arg(p)
    p.set_defaults(func=_cmd_save)

    p = cmds.add_parser("update", help="save a new version (a file, or --set on the stored inputs)")
    _ref(p)
    p.add_argument("--file", dest="scenario", default=None, help="scenario JSON file replacing the inputs")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    _meta(p, new=False)
    _expected(p)
    add_format_arg(p)
    p.set_defaults(func=_cmd_update)

    p = cmds.add_parser("delete", help="delete a scenario and its history")
    _ref(p)
    _expected(p)
    add_format_arg(p)
    p.set_defaults(func=_cmd_delete)

    p = cmds.add_parser("history", help="saved versions, newest first")
    _ref(p)
    add_format_arg(p)
    p.set_defaults(func=_cmd_history)

    p = cmds.add_parser("restore", help="save an old version as the newest")
    _ref(p)
    p.add_argument("version", type=int)
    _expected(p)
    add_format_arg(p)
    p.set_defaults(func=_cmd_restore)

    p = cmds.add_parser("export", help="a JSON document that import reads back")
    _ref(p)
    p.add_argument("-o", "--output", default=None, help="file (default: stdout)")
    p.set_defaults(func=_cmd_export)

    p = cmds.add_parser("import", help="save an exported document (or a bare scenario file) as new")
    p.add_argument("file")
    p.add_argument("--slug", default=None)
    add_format_arg(p)
    p.set_defaults(func=_cmd_import)
