"""Many saved scenarios, some with 100k-row traces: the list reads summaries only
(no payload, no frozen catalog), one page at a time, in bounded memory; a payload
is read when one scenario is opened.  SQLite file and the real PostgreSQL."""

from __future__ import annotations

import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from planner import Scenario
from planner.spec.scenario import MAX_TRACE_ROWS
from planner.store import listing
from planner.store import repository as repo
from planner.store.db import make_engine
from planner.store.migrate import upgrade
from tests.store_support import BACKENDS, PG_URL, postgres_or_skip

SMALL = 30
TRACED = 6  # each with a MAX_TRACE_ROWS-row trace (about 1.3 MB of JSON)


@contextmanager
def statements(eng: sa.Engine) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.strip().lower() != "begin":  # SQLite's own BEGIN (planner.store.db)
            seen.append(statement.lower())

    sa.event.listen(eng, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(eng, "before_cursor_execute", record)


def peak_bytes(fn: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _traced(i: int) -> Scenario:
    rows = tuple((1000 + (i * 7 + k) % 3000, 100 + k % 400) for k in range(MAX_TRACE_ROWS))
    return Scenario(name=f"traced {i}", workload={"distribution": "trace", "trace": rows})


@pytest.fixture(scope="module", params=BACKENDS)
def crowded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    """One crowded store per backend for the module (saving the traces is the slow part)."""
    admin = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('scale') / 'store.db'}"
    else:
        postgres_or_skip()
        schema = f"rl_scale_{uuid.uuid4().hex[:16]}"
        admin = sa.create_engine(PG_URL)
        with admin.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    upgrade(url)
    engine = make_engine(url)
    try:
        _fill(engine)
        yield engine
    finally:
        engine.dispose()
        if admin is not None:
            with admin.begin() as conn:
                conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
            admin.dispose()


def _fill(engine: sa.Engine) -> None:
    for i in range(SMALL):
        repo.save_scenario(engine=engine, scenario=Scenario(name=f"small {i}"), tags=["even" if i % 2 else "odd"])
    for i in range(TRACED):
        repo.save_scenario(engine=engine, scenario=_traced(i), tags=["trace"])


def _no_payload(seen: list[str]) -> None:
    assert seen, "no statement was recorded"
    for stmt in seen:
        assert "payload" not in stmt and "frozen_catalog" not in stmt, stmt


def test_list_reads_no_payload_in_bounded_memory(crowded: sa.Engine) -> None:
    with crowded.connect() as conn:
        held = int(conn.execute(sa.text("SELECT sum(stored_bytes) FROM scenarios")).scalar_one())
    assert held > TRACED * 1_000_000  # the traces are really stored
    with statements(crowded) as seen:
        page, peak = peak_bytes(lambda: listing.scenario_page(engine=crowded, page=1))
    _no_payload(seen)
    assert len(seen) == 2  # a count and one LIMIT/OFFSET page
    assert page.total == SMALL + TRACED and len(page.items) == listing.LIST_PAGE_SIZE
    assert page.pages == -(-(SMALL + TRACED) // listing.LIST_PAGE_SIZE)
    print(f"\n[{crowded.dialect.name}] page 1 of {page.total}: peak {peak / 1e3:.0f} kB beside {held / 1e6:.1f} MB "
          "stored")
    assert peak < 2_000_000 and peak < held / 20
    with statements(crowded) as seen:
        everything, peak_all = peak_bytes(lambda: repo.list_scenarios(engine=crowded))
    _no_payload(seen)
    assert len(everything) == SMALL + TRACED and peak_all < held / 20
    # The measurement sees a payload when one is read: opening one traced scenario costs its size.
    traced_slug = next(s.slug for s in everything if "trace" in s.tags)
    with statements(crowded) as seen:
        opened, peak_one = peak_bytes(lambda: repo.get_scenario(engine=crowded, ref=traced_slug))
    assert any("payload" in s for s in seen)
    assert opened.scenario.workload.trace is not None and len(opened.scenario.workload.trace) == MAX_TRACE_ROWS
    assert peak_one > 1_000_000 > peak


def test_pages_cover_the_list_once_in_order(crowded: sa.Engine) -> None:
    size = 7
    first = listing.scenario_page(engine=crowded, page=1, page_size=size)
    seen: list[str] = []
    for n in range(1, first.pages + 1):
        page = listing.scenario_page(engine=crowded, page=n, page_size=size)
        assert page.page == n and len(page.items) == (size if n < first.pages else first.total - size * (n - 1))
        seen += [s.slug for s in page.items]
    assert seen == [s.slug for s in repo.list_scenarios(engine=crowded)]
    assert len(set(seen)) == SMALL + TRACED
    past = listing.scenario_page(engine=crowded, page=10_000, page_size=size)
    assert past.page == first.pages and past.items  # past the end: the last page, not an empty one


def test_filters_run_in_sql_and_page(crowded: sa.Engine) -> None:
    traced = listing.scenario_page(engine=crowded, tag="TRACE", page_size=4)
    assert traced.total == TRACED and len(traced.items) == 4 and all("trace" in s.tags for s in traced.items)
    odd = listing.scenario_page(engine=crowded, tag="odd")
    assert odd.total == SMALL // 2 and {s.tags for s in odd.items} == {("odd",)}
    assert listing.scenario_page(engine=crowded, tag="od").total == 0  # a tag, not a substring of one
    hits = listing.scenario_page(engine=crowded, query="SMALL 1")
    assert hits.total == len([i for i in range(SMALL) if str(i).startswith("1")])
    assert listing.scenario_page(engine=crowded, query="traced", tag="odd").total == 0


def test_summary_and_history_without_payload(crowded: sa.Engine) -> None:
    s = repo.save_scenario(engine=crowded, scenario=_traced(99), name="history", tags=["history"])
    try:
        for k in range(3):
            s2 = repo.update_scenario(engine=crowded, ref=s.slug, expected_version=s.version + k, description=f"d{k}")
        with statements(crowded) as seen:
            summary = listing.scenario_summary(engine=crowded, ref=s.slug)
            history = listing.list_revision_summaries(engine=crowded, ref=s.slug)
        _no_payload(seen)
        assert summary.version == s2.version == 4 and summary.stored_bytes == s2.stored_bytes > 1_000_000
        assert [r.version for r in history] == [4, 3, 2, 1] and all(r.stored_bytes > 1_000_000 for r in history)
        assert [r.note for r in history][-1] == "created"
    finally:  # the other tests count the crowd
        repo.delete_scenario(engine=crowded, ref=s.slug)
