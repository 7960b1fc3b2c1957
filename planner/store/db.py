"""Engine setup: ``DATABASE_URL`` or a SQLite file in WAL mode with a busy timeout.

SQLite is the default store (``RIDGELINE_DB``, default ``ridgeline.db`` at the
repository root).  Write transactions on SQLite start with ``BEGIN IMMEDIATE``
so that concurrent writers queue on the busy timeout instead of failing on a
stale read snapshot; PostgreSQL (psycopg 3) is the team server.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from planner.errors import PlannerError

__all__ = [
    "BUSY_TIMEOUT_MS",
    "WRITE_OPTION",
    "database_url",
    "default_sqlite_path",
    "make_engine",
    "writer",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000  # how long a SQLite writer waits for the lock before failing
WRITE_OPTION = "ridgeline_write"


def default_sqlite_path() -> Path:
    """``RIDGELINE_DB`` or ``ridgeline.db`` beside ``planner/``."""
    env = os.environ.get("RIDGELINE_DB")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "ridgeline.db"


def database_url() -> str:
    """``DATABASE_URL`` when set, else the default SQLite file."""
    url = os.environ.get("DATABASE_URL", "").strip()
    return url or f"sqlite:///{default_sqlite_path()}"


def _sqlite_events(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def make_engine(url: str | None = None) -> Engine:
    """An engine for ``url`` (default :func:`database_url`)."""
    text = url or database_url()
    try:
        parsed = make_url(text)
    except ArgumentError:
        raise PlannerError(f"DATABASE_URL: not a database URL: {text!r}") from None
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False})
        _sqlite_events(engine)
        return engine
    try:
        return create_engine(parsed, pool_pre_ping=True)
    except Exception as exc:  # missing driver, bad dialect name
        raise PlannerError(f"DATABASE_URL: cannot use {parsed.render_as_string(hide_password=True)}: {exc}") from None


def writer(engine: Engine) -> Engine:
    """The same engine, marked so SQLite transactions begin IMMEDIATE (write lock first)."""
    return engine.execution_options(**{WRITE_OPTION: True})
