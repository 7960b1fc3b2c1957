"""Concurrent writers on a real SQLite file and the real PostgreSQL: no write is
lost silently; a stale writer gets ConflictError."""

from __future__ import annotations

import threading
from collections import Counter

import sqlalchemy as sa

from planner import ConflictError, Scenario
from planner.store import repository as repo
from tests.store_support import db_url, engine  # noqa: F401  (fixtures)

WRITERS = 8


def _rate(value: float) -> Scenario:
    return Scenario(name="contended", workload={"requests_per_s": value})


def _run(workers: list[threading.Thread]) -> None:
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert not w.is_alive(), "a writer hung"


def test_eight_writers_same_version_one_wins(engine: sa.Engine, db_url: str) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=_rate(1.0), slug="contended")
    barrier = threading.Barrier(WRITERS)
    outcome: dict[int, str] = {}

    def writer(i: int) -> None:
        barrier.wait()
        try:
            repo.update_scenario(engine=engine, ref=s.id, expected_version=1, scenario=_rate(100.0 + i))
            outcome[i] = "won"
        except ConflictError:
            outcome[i] = "conflict"

    _run([threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)])
    counts = Counter(outcome.values())
    print(f"\n[{engine.dialect.name}] 8 writers from version 1: {counts['won']} won, {counts['conflict']} conflict")
    assert len(outcome) == WRITERS and counts == {"won": 1, "conflict": WRITERS - 1}
    winner = next(i for i, o in outcome.items() if o == "won")
    now = repo.get_scenario(engine=engine, ref=s.id)
    assert now.version == 2 and now.scenario.workload.requests_per_s == 100.0 + winner
    revs = repo.list_revisions(engine=engine, ref=s.id)
    assert [r.payload["workload"]["requests_per_s"] for r in revs] == [100.0 + winner, 1.0]


def test_eight_writers_retrying_lose_nothing(engine: sa.Engine) -> None:  # noqa: F811
    """Each writer reloads and retries on conflict until its 3 writes land: every
    successful write must appear in the history exactly once, in version order."""
    s = repo.save_scenario(engine=engine, scenario=_rate(1.0), slug="retrying")
    per_writer = 3
    barrier = threading.Barrier(WRITERS)
    won: list[tuple[int, float]] = []  # (version written, value)
    conflicts = Counter[int]()
    lock = threading.Lock()

    def writer(i: int) -> None:
        barrier.wait()
        for k in range(per_writer):
            value = 1000.0 * (i + 1) + k
            while True:
                loaded = repo.get_scenario(engine=engine, ref=s.id)
                try:
                    out = repo.update_scenario(engine=engine, ref=s.id, expected_version=loaded.version,
                                               scenario=_rate(value))
                except ConflictError:
                    with lock:
                        conflicts[i] += 1
                    continue
                with lock:
                    won.append((out.version, value))
                break

    _run([threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)])
    total = WRITERS * per_writer
    print(f"\n[{engine.dialect.name}] 8 writers x {per_writer} writes with reload-and-retry: "
          f"{len(won)} writes won, {sum(conflicts.values())} stale attempts got ConflictError")
    assert len(won) == total
    revs = repo.list_revisions(engine=engine, ref=s.id)
    history = {r.version: r.payload["workload"]["requests_per_s"] for r in revs}
    assert sorted(history) == list(range(1, total + 2))  # version 1 (created) .. 1 + total
    assert {v: history[v] for v, _ in won} == dict(won)  # each winner's payload at the version it got
    assert sorted(history.values()) == sorted([1.0] + [v for _, v in won])
    assert repo.get_scenario(engine=engine, ref=s.id).version == total + 1


def test_eight_creators_all_saved(engine: sa.Engine) -> None:  # noqa: F811
    barrier = threading.Barrier(WRITERS)
    errors: list[BaseException] = []
    slugs: list[str] = []
    lock = threading.Lock()

    def creator(i: int) -> None:
        barrier.wait()
        try:
            # Half with distinct names, half racing for the same name (slug suffixes).
            name = f"writer {i}" if i % 2 else "same name"
            out = repo.save_scenario(engine=engine, scenario=_rate(float(i + 1)), name=name)
            with lock:
                slugs.append(out.slug)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    _run([threading.Thread(target=creator, args=(i,)) for i in range(WRITERS)])
    assert errors == []
    print(f"\n[{engine.dialect.name}] 8 concurrent creates: {len(slugs)} saved")
    assert len(set(slugs)) == WRITERS
    assert {"same-name", "same-name-2", "same-name-3", "same-name-4"} <= set(slugs)
    listed = repo.list_scenarios(engine=engine)
    assert sorted(x.slug for x in listed) == sorted(slugs)
    rates = sorted(repo.get_scenario(engine=engine, ref=x.slug).scenario.workload.requests_per_s for x in listed)
    assert rates == [float(i + 1) for i in range(WRITERS)]
