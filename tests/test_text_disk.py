"""A read-only or full disk says so (issue 23, item 6): reads still work on a
read-only store, a save says the disk is read-only or full, and no message sends
the user to ``make migrate`` when the disk is the problem."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from sqlalchemy import event

from planner import PlannerError, Scenario
from planner.errors import StoreError
from planner.io.atomic import write_bytes_atomic
from planner.store import get_scenario, list_scenarios, make_engine, save_scenario
from planner.store.migrate import upgrade


@pytest.fixture()
def stored(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "s.db"
    upgrade(f"sqlite:///{db}")
    engine = make_engine(f"sqlite:///{db}")
    slug = save_scenario(engine=engine, scenario=Scenario(), name="kept").slug
    engine.dispose()
    return db, slug


def test_a_read_only_store_reads_and_says_why_it_cannot_save(stored: tuple[Path, str]) -> None:
    db, slug = stored
    ro = make_engine(f"sqlite:///file:{db}?mode=ro&uri=true")  # as a read-only disk opens it (root ignores chmod)
    assert [s.slug for s in list_scenarios(engine=ro)] == [slug]
    assert get_scenario(engine=ro, ref=slug).name == "kept"
    with pytest.raises(StoreError) as caught:
        save_scenario(engine=ro, scenario=Scenario(), name="new")
    msg = str(caught.value)
    assert "is read-only" in msg and "nothing was saved" in msg and "make migrate" not in msg
    ro.dispose()


def test_a_full_disk_says_it_is_full_and_keeps_what_was_saved(stored: tuple[Path, str]) -> None:
    db, slug = stored
    engine = make_engine(f"sqlite:///{db}")

    @event.listens_for(engine, "connect")
    def _no_more_pages(dbapi_conn: object, _record: object) -> None:  # SQLite's own "disk full" at its page cap
        cur = dbapi_conn.cursor()  # type: ignore[attr-defined]
        pages = cur.execute("PRAGMA page_count").fetchone()[0]
        cur.execute(f"PRAGMA max_page_count = {pages}")
        cur.close()

    big = "x" * 2000
    with pytest.raises(StoreError) as caught:
        for i in range(50):  # fills the last pages, then one save cannot get a page
            save_scenario(engine=engine, scenario=Scenario(), name=f"n{i}", description=big)
    msg = str(caught.value)
    assert "the disk is full" in msg and "nothing was saved" in msg and "make migrate" not in msg
    assert slug in [s.slug for s in list_scenarios(engine=engine)]
    engine.dispose()


@pytest.mark.parametrize(("code", "words"), [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "the disk is read-only")])
def test_a_report_file_on_a_full_or_read_only_disk_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           code: int, words: str) -> None:
    target = tmp_path / "r.html"
    target.write_bytes(b"old")

    def fail(_fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(PlannerError, match=rf"^--out: cannot write {target}: {words}"):
        write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["r.html"]
