"""Store fixtures: every store test runs on a temporary SQLite file AND on the
real PostgreSQL at 127.0.0.1:5432 (database ``test``), each PostgreSQL test in
its own schema (dropped afterwards) since other runs share the server.

``RIDGELINE_REQUIRE_POSTGRES=1`` (set by .ci/run) turns a missing PostgreSQL
into a failure; otherwise only the postgresql parametrization is skipped.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from planner.store.db import make_engine
from planner.store.migrate import upgrade

__all__ = ["PG_URL", "db_url", "engine", "postgres_or_skip"]

PG_URL = os.environ.get("RIDGELINE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BACKENDS = ["sqlite", "postgresql"]


def postgres_or_skip() -> None:
    """Fail (CI) or skip (laptop) when the PostgreSQL server cannot be reached."""
    probe = sa.create_engine(PG_URL, connect_args={"connect_timeout": 3})
    try:
        with probe.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except Exception as exc:
        reason = f"PostgreSQL at {PG_URL} unreachable ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        if os.environ.get("RIDGELINE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason}; RIDGELINE_REQUIRE_POSTGRES=1 makes this a failure")
        pytest.skip(f"{reason}; set RIDGELINE_REQUIRE_POSTGRES=1 to make this a failure")
    finally:
        probe.dispose()


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """An empty, unmigrated database URL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    postgres_or_skip()
    schema = f"rl_test_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


@pytest.fixture()
def engine(db_url: str) -> Iterator[sa.Engine]:
    """A database migrated to head with Alembic (never create_all)."""
    upgrade(db_url)
    eng = make_engine(db_url)
    try:
        yield eng
    finally:
        eng.dispose()
