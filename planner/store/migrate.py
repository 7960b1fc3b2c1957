"""Alembic, driven from Python: ``upgrade(url)``, ``downgrade(url, rev)``, ``current(url)``.

``python -m planner.store.migrate [upgrade|downgrade REV|current]`` is what
``make migrate`` runs (``DATABASE_URL`` or the default SQLite file).
"""

from __future__ import annotations

import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from planner.errors import PlannerError
from planner.store.db import make_engine

__all__ = ["MIGRATIONS_DIR", "alembic_config", "current", "downgrade", "head", "main", "require_current", "upgrade"]

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


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


def upgrade(url: str | None = None, rev: str = "head") -> None:
    """Upgrade the database at ``url`` to ``rev`` (default: head)."""
    engine = make_engine(url)
    try:
        command.upgrade(alembic_config(engine), rev)
    finally:
        engine.dispose()


def downgrade(url: str | None, rev: str) -> None:
    """Downgrade the database at ``url`` to ``rev`` (``base`` drops every table)."""
    engine = make_engine(url)
    try:
        command.downgrade(alembic_config(engine), rev)
    finally:
        engine.dispose()


def current(engine: Engine) -> str | None:
    """The revision the database is at (None: not migrated)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def require_current(engine: Engine) -> None:
    """Raise a clear PlannerError unless the database is at head."""
    at, want = current(engine), head()
    if at != want:
        where = engine.url.render_as_string(hide_password=True)
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
            print(current(engine) or "(not migrated)")
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
