"""Races on the real PostgreSQL (and the SQLite file): concurrent saves of one name
all succeed with distinct slugs; two processes migrating one empty database (a
fresh schema) at once both end at head."""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections import Counter

import sqlalchemy as sa

from planner import Scenario
from planner.store import repository as repo
from planner.store.db import make_engine
from planner.store.migrate import current, head, upgrade
from tests.store_support import db_url, engine  # noqa: F401  (fixtures)

WRITERS, SAVES = 8, 40
MIGRATORS, ROUNDS = 2, 4


def test_concurrent_saves_of_one_name_all_succeed(engine: sa.Engine, db_url: str) -> None:  # noqa: F811
    """8 writers, each with its own engine (its own connections), 40 saves each of one name."""
    engines = [make_engine(db_url) for _ in range(WRITERS)]
    barrier = threading.Barrier(WRITERS)
    slugs: list[str] = []
    failures: list[str] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        barrier.wait()
        for k in range(SAVES):
            try:
                saved = repo.save_scenario(engine=engines[i], scenario=Scenario(name="same name"),
                                           description=f"writer {i} save {k}")
            except Exception as exc:  # noqa: BLE001 - counted and shown below
                with lock:
                    failures.append(f"{type(exc).__name__}: {exc}")
                continue
            with lock:
                slugs.append(saved.slug)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
            assert not t.is_alive(), "a writer hung"
    finally:
        for e in engines:
            e.dispose()
    print(f"\n[{engine.dialect.name}] {WRITERS}x{SAVES} saves of one name: {len(slugs)} saved, "
          f"{len(failures)} failed {Counter(failures).most_common(2)}")
    assert failures == []
    assert len(slugs) == WRITERS * SAVES == len(set(slugs))
    assert set(slugs) == {"same-name", *(f"same-name-{n}" for n in range(2, WRITERS * SAVES + 1))}
    listed = repo.list_scenarios(engine=engine, query="same name")
    assert len(listed) == WRITERS * SAVES and all(s.version == 1 for s in listed)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM scenario_revisions")).scalar_one() == WRITERS * SAVES


def _migrate(url: str, start: object, out: object) -> None:
    try:
        start.wait(timeout=60)  # type: ignore[attr-defined]
        upgrade(url)
        out.put("ok")  # type: ignore[attr-defined]
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        out.put(f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


def test_concurrent_migrations_of_an_empty_database(db_url: str) -> None:  # noqa: F811
    """Two processes upgrade one empty database at once, three rounds (downgraded to
    empty between them): every upgrade succeeds and the database is at head."""
    ctx = mp.get_context("fork")
    for round_ in range(ROUNDS):
        start, out = ctx.Barrier(MIGRATORS), ctx.Queue()
        procs = [ctx.Process(target=_migrate, args=(db_url, start, out)) for _ in range(MIGRATORS)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
            assert p.exitcode == 0, f"round {round_}: a migrator exited {p.exitcode}"
        results = [out.get(timeout=5) for _ in procs]
        assert results == ["ok"] * MIGRATORS, f"round {round_}: {results}"
        eng = make_engine(db_url)
        try:
            assert current(eng) == head()
            repo.save_scenario(engine=eng, scenario=Scenario(), name=f"round {round_}")  # the schema works
            with eng.connect() as conn:
                assert conn.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
        finally:
            eng.dispose()
        _empty(db_url)


def _empty(url: str) -> None:
    """Back to an empty database: every table dropped (not a downgrade: the next round starts from nothing)."""
    eng = make_engine(url)
    try:
        meta = sa.MetaData()
        meta.reflect(eng)
        meta.drop_all(eng)
        with eng.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []
    finally:
        eng.dispose()
