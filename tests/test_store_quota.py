"""The per-server save quota, driven past each limit on a SQLite file and the real
PostgreSQL: the save is refused with a message naming the limit, nothing is written,
and saves within the limit still work."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from planner import Scenario
from planner.errors import StoreError
from planner.spec.scenario import SCHEMA_VERSION
from planner.store import quota
from planner.store import repository as repo
from planner.store.models import ScenarioRevisionRow, ScenarioRow
from tests.store_support import db_url, engine  # noqa: F401  (fixtures)

WHEN = datetime(2026, 12, 1, tzinfo=UTC)


def _counts(eng: sa.Engine) -> tuple[int, int]:
    with eng.connect() as conn:
        return (conn.execute(sa.text("SELECT count(*) FROM scenarios")).scalar_one(),
                conn.execute(sa.text("SELECT count(*) FROM scenario_revisions")).scalar_one())


def _bulk_scenarios(eng: sa.Engine, n: int) -> None:
    """n small saved scenarios written in one statement (the quota counts rows, not how they came)."""
    payload = Scenario().model_dump(mode="json")
    rows = [{"slug": f"bulk-{i}", "name": f"bulk {i}", "description": "", "tags": [], "payload": payload,
             "schema_version": SCHEMA_VERSION, "frozen_catalog": None, "created_at": WHEN, "updated_at": WHEN,
             "version": 1, "stored_bytes": len(json.dumps(payload))} for i in range(n)]
    with eng.begin() as conn:
        conn.execute(sa.insert(ScenarioRow), rows)


def test_scenario_count_limit(engine: sa.Engine) -> None:  # noqa: F811
    _bulk_scenarios(engine, quota.SCENARIOS_MAX - 1)
    last = repo.save_scenario(engine=engine, scenario=Scenario(), name="the last one")  # reaches the limit
    assert last.version == 1
    before = _counts(engine)
    with pytest.raises(StoreError) as exc:
        repo.save_scenario(engine=engine, scenario=Scenario(), name="one too many")
    msg = str(exc.value)
    assert "SCENARIOS_MAX" in msg and f"{quota.SCENARIOS_MAX:,}" in msg and "nothing was saved" in msg
    with pytest.raises(StoreError, match="SCENARIOS_MAX"):
        repo.duplicate_scenario(engine=engine, ref=last.slug)
    assert _counts(engine) == before
    # A new version of an existing scenario is still allowed, and a delete makes room.
    repo.update_scenario(engine=engine, ref=last.slug, expected_version=1, description="still editable")
    repo.delete_scenario(engine=engine, ref="bulk-0")
    assert repo.save_scenario(engine=engine, scenario=Scenario(), name="fits again").slug == "fits-again"


def test_revision_count_limit(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=Scenario(), name="busy")
    first = repo.list_revisions(engine=engine, ref=s.slug)[0]
    extra = quota.REVISIONS_MAX - 2  # version 1 exists; one update below reaches the limit
    with engine.begin() as conn:
        conn.execute(sa.insert(ScenarioRevisionRow), [
            {"scenario_id": s.id, "version": v, "name": "busy", "description": "", "tags": [],
             "payload": first.payload, "schema_version": SCHEMA_VERSION, "frozen_catalog": None, "note": "bulk",
             "created_at": WHEN, "stored_bytes": 10} for v in range(2, extra + 2)])
        conn.execute(sa.update(ScenarioRow).where(ScenarioRow.id == s.id).values(version=extra + 1))
    at_limit = repo.update_scenario(engine=engine, ref=s.slug, expected_version=extra + 1, description="last")
    assert at_limit.version == quota.REVISIONS_MAX
    before = _counts(engine)
    with pytest.raises(StoreError) as exc:
        repo.update_scenario(engine=engine, ref=s.slug, expected_version=at_limit.version, description="over")
    assert "REVISIONS_MAX" in str(exc.value) and "save it as a copy" in str(exc.value)
    assert _counts(engine) == before
    assert repo.get_scenario(engine=engine, ref=s.slug).description == "last"
    copy = repo.duplicate_scenario(engine=engine, ref=s.slug)  # the way out the message names
    assert copy.version == 1


def test_stored_bytes_limit(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """STORED_BYTES_MAX is 2 GiB; the test lowers it to what the store holds plus a little,
    then saves a scenario with a 20k-row trace past it."""
    small = repo.save_scenario(engine=engine, scenario=Scenario(), name="small")
    with engine.connect() as conn:
        held = int(conn.execute(sa.text("SELECT sum(stored_bytes) FROM scenario_revisions")).scalar_one())
    assert held == small.stored_bytes > 0
    monkeypatch.setattr(quota, "STORED_BYTES_MAX", held + 100_000)
    traced = Scenario(name="big", workload={"distribution": "trace",
                                            "trace": tuple((1000 + k % 500, 200) for k in range(20_000))})
    before = _counts(engine)
    with pytest.raises(StoreError) as exc:
        repo.save_scenario(engine=engine, scenario=traced)
    msg = str(exc.value)
    assert "STORED_BYTES_MAX" in msg and "large traces" in msg and "nothing was saved" in msg
    with pytest.raises(StoreError, match="STORED_BYTES_MAX"):  # a new version with the trace: the same
        repo.update_scenario(engine=engine, ref=small.slug, expected_version=1, scenario=traced)
    assert _counts(engine) == before
    assert repo.save_scenario(engine=engine, scenario=Scenario(name="fits")).version == 1  # a few KB still fit


def test_stored_bytes_counts_what_is_saved(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=Scenario(), name="sized")
    with engine.connect() as conn:
        payload, frozen, size = conn.execute(sa.text(
            "SELECT payload, frozen_catalog, stored_bytes FROM scenario_revisions")).one()
    as_json = [v if isinstance(v, str) else json.dumps(v) for v in (payload, frozen)]
    assert size == s.stored_bytes == sum(len(t) for t in as_json)


def test_migration_0003_sizes_rows_saved_before(db_url: str) -> None:  # noqa: F811
    """Rows saved at 0002 get their stored_bytes from their JSON text, so the quota counts them."""
    from planner.store.db import make_engine
    from planner.store.migrate import upgrade

    upgrade(db_url, "0002")
    payload = json.dumps(Scenario(name="old").model_dump(mode="json"))
    eng = make_engine(db_url)
    try:
        with eng.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO scenarios (id, slug, name, description, tags, payload, schema_version, created_at, "
                "updated_at, version) VALUES (1, 'old', 'old', '', '[]', :p, 1, :t, :t, 1)"), {"p": payload, "t": WHEN})
            conn.execute(sa.text(
                "INSERT INTO scenario_revisions (scenario_id, version, name, description, tags, payload, "
                "schema_version, note, created_at) VALUES (1, 1, 'old', '', '[]', :p, 1, 'created', :t)"),
                {"p": payload, "t": WHEN})
        upgrade(db_url)
        with eng.connect() as conn:
            sizes = conn.execute(sa.text("SELECT stored_bytes FROM scenarios UNION ALL "
                                         "SELECT stored_bytes FROM scenario_revisions")).scalars().all()
        assert sizes == [len(payload), len(payload)]
        assert repo.list_scenarios(engine=eng)[0].stored_bytes == len(payload)
    finally:
        eng.dispose()
