"""Alembic, driven from Python: ``upgrade(url)``, ``downgrade(url, rev)``, ``current(url)``.

``python -m planner.store.migrate [upgrade|downgrade REV|current]`` is what
``make migrate`` runs (``DATABASE_URL`` or the default SQLite file).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util import CommandError
from sqlalchemy import Engine, text

from planner.errors import PlannerError, StoreError
from planner.store.db import display_url, make_engine, store_errors

__all__ = [
    "MIGRATE_LOCK_SQL",
    "MIGRATE_UNLOCK_SQL",
    "MIGRATIONS_DIR",
    "alembic_config",
    "current",
    "downgrade",
    "head",
    "known_revisions",
    "require_current",
    "require_known",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
# PostgreSQL: migrations/env.py holds this session lock while it migrates (per database and schema),
# so concurrent upgrades of one empty database run in turn and both end at head.
_LOCK_KEY = "hashtext('ridgeline.store.migrate:' || coalesce(current_schema(), ''))"
MIGRATE_LOCK_SQL = text(f"SELECT pg_advisory_lock({_LOCK_KEY})")
MIGRATE_UNLOCK_SQL = text(f"SELECT pg_advisory_unlock({_LOCK_KEY})")


def alembic_config(engine: Engine | None = None) -> Config:
    """An Alembic Config built in code (``migrations/`` as script location)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if engine is not None:
        cfg.attributes["engine"] = engine
    return cfg


def head() -> str:
    """The newest revision id in ``migrations/versions``."""
    rev = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if rev is None:
        raise PlannerError("migrations/versions holds no revision")
    return rev


def known_revisions() -> list[str]:
    """Every revision id in ``migrations/versions``, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def _check_target(rev: str) -> None:
    """An unknown target (``upgrade zzz``) is one line listing what is known.
    Relative targets (``+1``, ``-1``, ``0001+1``) are left to Alembic."""
    if "+" in rev or "-" in rev:
        return
    script = ScriptDirectory.from_config(alembic_config())
    try:
        script.get_revisions(rev)
    except (CommandError, RevisionError):
        known = ", ".join([*known_revisions(), "head", "base"])
        raise StoreError(f"migrate: unknown revision {rev[:40]!r} (known: {known})") from None


def _run(command_fn: Callable[[Config, str], None], url: str | None, rev: str) -> None:
    _check_target(rev)
    engine = make_engine(url)
    try:
        require_known(engine)
        with store_errors(engine.url):
            try:
                command_fn(alembic_config(engine), rev)
            except (CommandError, RevisionError) as exc:
                raise StoreError(f"migrate: {str(exc).splitlines()[0][:200]}") from None
    finally:
        engine.dispose()


def upgrade(url: str | None = None, rev: str = "head") -> None:
    """Upgrade the database at ``url`` to ``rev`` (default: head)."""
    _run(command.upgrade, url, rev)


def downgrade(url: str | None, rev: str) -> None:
    """Downgrade the database at ``url`` to ``rev`` (``base`` drops every table)."""
    _run(command.downgrade, url, rev)


def current(engine: Engine) -> str | None:
    """The revision the database is at (None: not migrated); a database that
    cannot be opened is a StoreError, never a driver traceback."""
    with store_errors(engine.url), engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def require_known(engine: Engine) -> str | None:
    """The database's revision, or a StoreError when this app does not know it
    (the database was migrated by a newer Ridgeline)."""
    at = current(engine)
    if at is not None and at not in known_revisions():
        raise StoreError(
            f"database {display_url(engine.url)} is at revision {at[:40]!r}, which this app does not know: "
            f"the app is older than the database (it knows revisions up to {head()}); "
            "run a newer Ridgeline, or point DATABASE_URL at another database")
    return at


def require_current(engine: Engine) -> None:
    """Raise a clear PlannerError unless the database is at head."""
    at, want = require_known(engine), head()
    if at != want:
        where = display_url(engine.url)
        state = "not migrated" if at is None else f"at revision {at}, not {want}"
        raise PlannerError(f"database {where} is {state}: run `make migrate` (python -m planner.store.migrate upgrade)")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv) or ["upgrade"]
    try:
        if args[0] == "upgrade":
            upgrade(None, args[1] if len(args) > 1 else "head")
        elif args[0] == "downgrade" and len(args) == 2:
            downgrade(None, args[1])
        elif args[0] == "current":
            engine = make_engine()
            try:
                print(current(engine) or "(not migrated)")
            finally:
                engine.dispose()
        else:
            print("usage: python -m planner.store.migrate [upgrade [REV] | downgrade REV | current]", file=sys.stderr)
            return 2
    except PlannerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
