"""Alembic migrations on a real SQLite file and the real PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from planner import PlannerError, Scenario
from planner.store import repository as repo
from planner.store.db import make_engine
from planner.store.migrate import current, downgrade, head, require_current, upgrade
from planner.store.models import Base
from tests.store_support import db_url  # noqa: F401  (fixture)

TABLES = {"scenarios", "scenario_revisions", "probe_runs", "probe_samples"}


def _tables(url: str) -> set[str]:
    eng = make_engine(url)
    try:
        return set(sa.inspect(eng).get_table_names())
    finally:
        eng.dispose()


def test_upgrade_head_on_empty_database(db_url: str) -> None:  # noqa: F811
    assert _tables(db_url) == set()
    eng = make_engine(db_url)
    with pytest.raises(PlannerError, match="not migrated: run `make migrate`"):
        require_current(eng)
    upgrade(db_url)
    assert _tables(db_url) == TABLES | {"alembic_version"}
    assert current(eng) == head() == "0003"
    require_current(eng)
    upgrade(db_url)  # idempotent
    assert current(eng) == "0003"
    eng.dispose()


def test_first_revision_rows_survive_upgrade(db_url: str) -> None:  # noqa: F811
    upgrade(db_url, "0001")
    assert _tables(db_url) == {"scenarios", "scenario_revisions", "alembic_version"}
    payload = Scenario(name="old", parallel={"tp": 2}).model_dump(mode="json")
    when = datetime(2025, 6, 1, tzinfo=UTC)
    eng = make_engine(db_url)
    with eng.begin() as conn:  # rows written by a 0001-era app, in plain SQL
        for i, slug in enumerate(["old-one", "old-two"], start=1):
            conn.execute(sa.text(
                "INSERT INTO scenarios (id, slug, name, description, tags, payload, schema_version, created_at, "
                "updated_at, version) VALUES (:id, :slug, :name, '', :tags, :payload, 1, :t, :t, 1)"),
                {"id": i, "slug": slug, "name": slug.title(), "tags": json.dumps(["legacy"]),
                 "payload": json.dumps(payload), "t": when})
            conn.execute(sa.text(
                "INSERT INTO scenario_revisions (scenario_id, version, name, description, tags, payload, "
                "schema_version, note, created_at) VALUES (:id, 1, :name, '', '[]', :payload, 1, 'created', :t)"),
                {"id": i, "name": slug.title(), "payload": json.dumps(payload), "t": when})
    upgrade(db_url)
    assert current(eng) == "0003"
    with eng.connect() as conn:
        rows = conn.execute(sa.text("SELECT slug, name, frozen_catalog FROM scenarios ORDER BY id")).all()
        n_revs = conn.execute(sa.text("SELECT count(*) FROM scenario_revisions")).scalar_one()
    assert [(r[0], r[1], r[2]) for r in rows] == [("old-one", "Old-One", None), ("old-two", "Old-Two", None)]
    assert n_revs == 2
    # The repository reads the old rows; the next save freezes the catalog.
    old = repo.get_scenario(engine=eng, ref="old-one")
    assert old.scenario.parallel.tp == 2 and old.frozen_catalog is None and old.catalog_drift() == ()
    assert old.created_at == when and old.tags == ("legacy",)
    new = repo.update_scenario(engine=eng, ref="old-one", expected_version=1, name="Old One")
    assert new.version == 2 and new.frozen_catalog is not None
    assert [r.version for r in repo.list_revisions(engine=eng, ref="old-one")] == [2, 1]
    # Back down to 0001 keeps the rows too.
    eng.dispose()
    downgrade(db_url, "0001")
    eng = make_engine(db_url)
    with eng.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM scenarios")).scalar_one() == 2
        assert conn.execute(sa.text("SELECT count(*) FROM scenario_revisions")).scalar_one() == 3
    eng.dispose()


def test_downgrade_base(db_url: str) -> None:  # noqa: F811
    upgrade(db_url)
    eng = make_engine(db_url)
    repo.save_scenario(engine=eng, scenario=Scenario(), name="x")
    eng.dispose()
    downgrade(db_url, "base")
    assert _tables(db_url) == {"alembic_version"}
    eng = make_engine(db_url)
    assert current(eng) is None
    eng.dispose()
    upgrade(db_url)  # and back up again
    assert TABLES <= _tables(db_url)


def test_models_match_migrations_no_drift(db_url: str) -> None:  # noqa: F811
    upgrade(db_url)
    eng = make_engine(db_url)
    try:
        with eng.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
            diff = compare_metadata(ctx, Base.metadata)
    finally:
        eng.dispose()
    assert diff == []


def test_cli_migrate_module(tmp_path, monkeypatch, capsys) -> None:
    from planner.store.migrate import main

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("RIDGELINE_DB", str(tmp_path / "m.db"))
    assert main(["current"]) == 0 and "(not migrated)" in capsys.readouterr().out
    assert main(["upgrade"]) == 0
    assert main(["current"]) == 0 and capsys.readouterr().out.strip() == "0003"
    assert main(["sideways"]) == 2
