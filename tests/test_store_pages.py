"""The Scenarios and Compare pages over many saved scenarios, some with 100k-row
traces (AppTest, a real SQLite file): a page run reads one page of summaries and
no payload but the one a visitor picked, and a rerun reads none again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from streamlit.testing.v1 import AppTest

from planner import Scenario
from planner.spec.scenario import MAX_TRACE_ROWS
from planner.store import LIST_PAGE_SIZE, make_engine, save_scenario
from tests.apptest_v2 import new_app_test, use_migrated_sqlite

SMALL, TRACED = 40, 4


@pytest.fixture(scope="module")
def crowded_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        db = use_migrated_sqlite(tmp_path_factory.mktemp("pages"), mp)
    engine = make_engine(f"sqlite:///{db}")
    try:
        for i in range(TRACED):
            rows = tuple((500 + (i * 11 + k) % 2000, 50 + k % 300) for k in range(MAX_TRACE_ROWS))
            save_scenario(engine=engine, scenario=Scenario(workload={"distribution": "trace", "trace": rows}),
                          name=f"traced {i}", tags=["trace"])
        for i in range(SMALL):  # newest first: the small ones lead the list
            save_scenario(engine=engine, scenario=Scenario(workload={"requests_per_s": 1.0 + i}), name=f"small {i}")
    finally:
        engine.dispose()
    return db


@pytest.fixture()
def store_db(crowded_db: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("RIDGELINE_DB", str(crowded_db))
    return crowded_db


@contextmanager
def payload_reads() -> Iterator[list[str]]:
    """Every SELECT any engine in this process runs that reads a payload column."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        low = statement.lower()
        if low.lstrip().startswith("select") and "payload" in low:
            seen.append(low)

    sa.event.listen(sa.Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(sa.Engine, "before_cursor_execute", record)


def _open(page: str) -> AppTest:
    at = new_app_test()
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_scenarios_page_lists_a_page_and_reads_one_payload(store_db: Path) -> None:
    with payload_reads() as seen:
        at = _open("scenarios")
    assert not at.error, [e.value for e in at.error]
    listed = at.dataframe[0].value
    assert len(listed) == LIST_PAGE_SIZE and listed["slug"].tolist()[0] == f"small-{SMALL - 1}"
    assert any(f"{SMALL + TRACED:,} saved" in c.value and "page 1 of 2" in c.value for c in at.caption)
    assert len(seen) == 1  # the selected scenario's (the first row's), nothing else
    with payload_reads() as seen:
        at.text_input(key="sc_desc").set_value("typing").run()  # a rerun
    assert seen == []  # the selected scenario is reused (same version), the list has no payload
    with payload_reads() as seen:
        at.number_input(key="sc_page").set_value(2).run()
    assert len(seen) == 1  # page 2 is summaries; the selection moves to page 2's first row, read once
    page2 = at.dataframe[0].value["slug"].tolist()
    assert len(page2) == SMALL + TRACED - LIST_PAGE_SIZE and "traced-0" in page2
    with payload_reads() as seen:
        at.selectbox(key="sc_pick").set_value("traced-0").run()
        at.text_input(key="sc_desc").set_value("typing more").run()
    assert len(seen) == 1  # the traced one, read once for two runs
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(e.label == "History (1 version)" for e in at.expander)


def test_compare_page_reads_payloads_of_the_picked_only(store_db: Path) -> None:
    at = _open("compare")
    with payload_reads() as seen:
        at.radio(key="cmp_source").set_value("Saved scenarios").run()
    assert not at.exception and seen == []
    options = at.multiselect(key="cmp_saved").options
    assert len(options) == LIST_PAGE_SIZE and "traced-1" not in options
    assert any(f"of {SMALL + TRACED:,} saved" in c.value for c in at.caption)
    at.text_input(key="cmp_saved_query").set_value("traced").run()
    assert sorted(at.multiselect(key="cmp_saved").options) == [f"traced-{i}" for i in range(TRACED)]
    with payload_reads() as seen:
        at.multiselect(key="cmp_saved").set_value(["traced-1", "traced-2"]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(seen) == 2
    with payload_reads() as seen:
        at.text_input(key="cmp_saved_query").set_value("").run()  # the picks stay, read no more
    assert seen == [] and at.multiselect(key="cmp_saved").value == ["traced-1", "traced-2"]
    assert {"traced-1", "traced-2"} <= set(at.table[0].value.columns)
