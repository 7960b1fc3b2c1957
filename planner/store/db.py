"""Engine setup: ``DATABASE_URL`` or a SQLite file in WAL mode with a busy timeout.

SQLite is the default store (``RIDGELINE_DB``, default ``ridgeline.db`` at the
repository root).  Write transactions on SQLite start with ``BEGIN IMMEDIATE``
so that concurrent writers queue on the busy timeout instead of failing on a
stale read snapshot; PostgreSQL (psycopg 3) is the team server.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from planner.errors import StoreError

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CONNECT_TIMEOUT_S",
    "DETAIL_MAX_CHARS",
    "WRITE_OPTION",
    "database_url",
    "default_sqlite_path",
    "display_url",
    "make_engine",
    "store_error",
    "store_errors",
    "writer",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000  # how long a SQLite writer waits for the lock before failing
# A driver's first line says why (refused, not a database, locked); the rest can quote SQL or parameters.
DETAIL_MAX_CHARS = 200
# A PostgreSQL server that drops packets would otherwise hold a page (or the CLI) until the OS gives up
# (minutes); 10 s is ample for a reachable server on a LAN. A connect_timeout in the URL wins.
CONNECT_TIMEOUT_S = 10
_UNPARSEABLE = "DATABASE_URL (not a valid URL; not shown, it may hold a password)"
WRITE_OPTION = "ridgeline_write"


def default_sqlite_path() -> Path:
    """``RIDGELINE_DB`` or ``ridgeline.db`` beside ``planner/``."""
    env = os.environ.get("RIDGELINE_DB")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "ridgeline.db"


def database_url() -> str:
    """``DATABASE_URL`` when set, else the default SQLite file."""
    url = os.environ.get("DATABASE_URL", "").strip()
    return url or f"sqlite:///{default_sqlite_path()}"


def display_url(url: str | URL | None = None) -> str:
    """The database URL for a message, its password masked; never the raw text
    (an unparseable URL is not shown at all)."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url if url is not None else database_url()).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return _UNPARSEABLE


def _detail(exc: BaseException, url: URL | None) -> str:
    """The driver's first line, with the password (and the raw URL) scrubbed, capped."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    text = lines[0] if lines else type(orig).__name__
    if url is not None:
        raw = url.render_as_string(hide_password=False)
        text = text.replace(raw, url.render_as_string(hide_password=True))
        if url.password:
            text = text.replace(str(url.password), "***")
    return text[:DETAIL_MAX_CHARS]


def store_error(exc: BaseException, url: str | URL | None = None) -> StoreError:
    """One line for a database failure: which database (password masked) and
    why, in words; never the SQL text or its parameters."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url if url is not None else database_url())
    except (ArgumentError, ValueError):
        parsed = None
    where = display_url(parsed) if parsed is not None else _UNPARSEABLE
    detail = _detail(exc, parsed)
    low = detail.lower()
    if "file is not a database" in low:
        return StoreError(f"database {where} is not a SQLite database (the file holds something else): "
                          "point RIDGELINE_DB or DATABASE_URL at a Ridgeline store")
    if "unable to open database file" in low:
        return StoreError(f"database {where} cannot be opened (is it a directory, or in a folder that does "
                          "not exist?): point RIDGELINE_DB or DATABASE_URL at a database file")
    if "readonly database" in low or "read-only file system" in low or "attempt to write a read" in low:
        return StoreError(f"database {where} is read-only (the file, its folder or the disk cannot be written): "
                          "nothing was saved; make it writable, or point RIDGELINE_DB or DATABASE_URL at a "
                          "writable store")
    if "database or disk is full" in low or "no space left" in low or "disk full" in low or "quota" in low:
        return StoreError(f"database {where}: the disk is full: nothing was saved; free some space and try again")
    if "disk i/o error" in low:
        return StoreError(f"database {where}: the disk reported an I/O error (full, read-only or failing): "
                          "nothing was saved; check the disk and try again")
    if "database is locked" in low:
        return StoreError(f"database {where} stayed locked by another writer for {BUSY_TIMEOUT_MS / 1000:g} s: "
                          "try again")
    if parsed is not None and parsed.get_backend_name() != "sqlite" and type(exc).__name__ == "OperationalError":
        return StoreError(f"database {where} cannot be reached: {detail}; check DATABASE_URL")
    name = type(getattr(exc, "orig", None) or exc).__name__
    return StoreError(f"database {where}: {name}: {detail}; check DATABASE_URL and run `make migrate`")


@contextmanager
def store_errors(url: str | URL | None = None) -> Iterator[None]:
    """Turn any SQLAlchemy error inside the block into one :class:`StoreError` line."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise store_error(exc, url) from None


def _sqlite_events(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:  # a read-only file or disk cannot switch its journal: reads still work without it
            cur.execute("PRAGMA journal_mode = WAL")
        except Exception:  # noqa: BLE001 - sqlite3.OperationalError; the driver's class is not imported here
            pass
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
    except (ArgumentError, ValueError):  # the text is never echoed: it may hold a password
        raise StoreError("DATABASE_URL: not a database URL (expected dialect+driver://user:password@host/database "
                         "or sqlite:///path)") from None
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False})
        _sqlite_events(engine)
        return engine
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    try:
        return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
    except Exception as exc:  # missing driver, bad dialect name
        raise StoreError(f"DATABASE_URL: cannot use {display_url(parsed)}: {_detail(exc, parsed)}") from None


def writer(engine: Engine) -> Engine:
    """The same engine, marked so SQLite transactions begin IMMEDIATE (write lock first)."""
    return engine.execution_options(**{WRITE_OPTION: True})
