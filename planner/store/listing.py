"""The scenario list: summaries only, one page at a time.

A list query selects the columns a list shows (id, slug, name, description,
tags, version, time, size) and never the payload or the frozen catalog, so a
list of saved scenarios with 100k-row traces reads kilobytes, not gigabytes; a
payload is read when one scenario is opened (``get_scenario``).  The name/slug
search and the tag filter run in SQL, so a page is a LIMIT/OFFSET query.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Engine, String, cast, func, or_, select
from sqlalchemy.orm import Session

from planner.errors import ScenarioError
from planner.store.common import Ref, as_utc, guarded
from planner.store.limits import check_id, check_query, parse_ref
from planner.store.models import ScenarioRevisionRow, ScenarioRow

__all__ = [
    "LIST_MAX",
    "LIST_PAGE_SIZE",
    "SUMMARY_COLUMNS",
    "RevisionSummary",
    "ScenarioPage",
    "ScenarioSummary",
    "list_revision_summaries",
    "list_scenarios",
    "scenario_page",
    "scenario_summary",
]

LIST_PAGE_SIZE = 25  # rows per page of the Scenarios page's list (and the Compare page's choices)
LIST_MAX = 500  # most summaries one list call returns (the CLI's `scenarios list`)

_Stmt = Any  # a SELECT (sqlalchemy's Select is generic over its column types)

# What a list shows, and all a list query reads: never payload or frozen_catalog.
SUMMARY_COLUMNS = (ScenarioRow.id, ScenarioRow.slug, ScenarioRow.name, ScenarioRow.description, ScenarioRow.tags,
                   ScenarioRow.version, ScenarioRow.updated_at, ScenarioRow.stored_bytes)


class ScenarioSummary(BaseModel):
    """A row of the scenario list (no payload)."""

    model_config = ConfigDict(frozen=True)
    id: int
    slug: str
    name: str
    description: str
    tags: tuple[str, ...]
    version: int
    updated_at: datetime
    stored_bytes: int = 0  # the current version's payload + frozen catalog entries, as JSON text


class ScenarioPage(BaseModel):
    """One page of the list: its rows, how many match in all, and where it is."""

    model_config = ConfigDict(frozen=True)
    items: tuple[ScenarioSummary, ...]
    total: int
    page: int  # 1-based, clamped to the last page
    page_size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))


def _summary(row: Any) -> ScenarioSummary:
    return ScenarioSummary(
        id=row.id, slug=row.slug, name=row.name, description=row.description, tags=tuple(row.tags or ()),
        version=row.version, updated_at=as_utc(row.updated_at), stored_bytes=row.stored_bytes or 0,
    )


def _filtered(stmt: _Stmt, query: str | None, tag: str | None) -> tuple[_Stmt, str | None]:
    """``query`` matches name or slug (any case, literally: ``%`` and ``_`` are not patterns);
    ``tag`` one of the tags.  Tags are a JSON array of JSON strings, so the tag's own JSON text
    (quotes included) occurs in the array's text exactly when the tag is an element."""
    if query:
        q = check_query(query.strip().lower())
        stmt = stmt.where(or_(func.lower(ScenarioRow.name).contains(q, autoescape=True),
                              ScenarioRow.slug.contains(q, autoescape=True)))
    wanted = check_query(tag.strip().lower(), "tag") if tag else None
    if wanted:
        stmt = stmt.where(cast(ScenarioRow.tags, String).contains(json.dumps(wanted), autoescape=True))
    return stmt, wanted


def _rows(session: Session, stmt: _Stmt, wanted: str | None) -> list[ScenarioSummary]:
    rows = [_summary(r) for r in session.execute(stmt)]
    return [r for r in rows if wanted is None or wanted in r.tags]  # the SQL filter is exact; this re-checks it


def _ordered(stmt: _Stmt) -> _Stmt:
    return stmt.order_by(ScenarioRow.updated_at.desc(), ScenarioRow.id.desc())


@guarded
def list_scenarios(*, engine: Engine, query: str | None = None, tag: str | None = None,
                   limit: int = LIST_MAX, offset: int = 0) -> list[ScenarioSummary]:
    """Saved scenarios, newest first, at most ``limit`` (≤ LIST_MAX) after skipping ``offset``;
    ``query`` matches name or slug (any case), ``tag`` one of the tags.  Reads no payload."""
    if not 1 <= limit <= LIST_MAX:
        raise ScenarioError(f"limit: {limit} is out of range (1 to {LIST_MAX})")
    if offset < 0:
        raise ScenarioError(f"offset: {offset} is negative")
    stmt, wanted = _filtered(select(*SUMMARY_COLUMNS), query, tag)
    with Session(engine) as session:
        return _rows(session, _ordered(stmt).limit(limit).offset(offset), wanted)


@guarded
def scenario_page(*, engine: Engine, query: str | None = None, tag: str | None = None, page: int = 1,
                  page_size: int = LIST_PAGE_SIZE) -> ScenarioPage:
    """Page ``page`` (1-based; past the end: the last page) of the list, and the match count."""
    check_id(page, "page")
    if not 1 <= page_size <= LIST_MAX:
        raise ScenarioError(f"page_size: {page_size} is out of range (1 to {LIST_MAX})")
    counted, wanted = _filtered(select(func.count()).select_from(ScenarioRow), query, tag)
    stmt, _ = _filtered(select(*SUMMARY_COLUMNS), query, tag)
    with Session(engine) as session:
        total = int(session.execute(counted).scalar_one())
        last = max(1, -(-total // page_size))
        page = min(page, last)
        items = _rows(session, _ordered(stmt).limit(page_size).offset((page - 1) * page_size), wanted)
    return ScenarioPage(items=tuple(items), total=total, page=page, page_size=page_size)


@guarded
def scenario_summary(*, engine: Engine, ref: Ref) -> ScenarioSummary:
    """One scenario's list row by id or slug (no payload): what a page checks before
    reusing a payload it already holds (same version: same payload)."""
    checked = parse_ref(ref)
    where = ScenarioRow.id == checked if isinstance(checked, int) else ScenarioRow.slug == checked
    with Session(engine) as session:
        row = session.execute(select(*SUMMARY_COLUMNS).where(where)).first()
    if row is None:
        raise ScenarioError(f"no saved scenario {ref!r}: `python -m planner scenarios list` shows the saved ones")
    return _summary(row)


class RevisionSummary(BaseModel):
    """A row of a scenario's history (no payload: ``get_revision`` reads one version's)."""

    model_config = ConfigDict(frozen=True)
    scenario_id: int
    version: int
    name: str
    note: str
    created_at: datetime
    stored_bytes: int = 0


@guarded
def list_revision_summaries(*, engine: Engine, ref: Ref) -> list[RevisionSummary]:
    """Every saved version of one scenario, newest first, without payloads (at most
    REVISIONS_MAX rows: the quota bounds them)."""
    sid = scenario_summary(engine=engine, ref=ref).id
    cols = (ScenarioRevisionRow.scenario_id, ScenarioRevisionRow.version, ScenarioRevisionRow.name,
            ScenarioRevisionRow.note, ScenarioRevisionRow.created_at, ScenarioRevisionRow.stored_bytes)
    with Session(engine) as session:
        rows = session.execute(select(*cols).where(ScenarioRevisionRow.scenario_id == sid)
                               .order_by(ScenarioRevisionRow.version.desc()))
        return [RevisionSummary(scenario_id=r.scenario_id, version=r.version, name=r.name, note=r.note,
                                created_at=as_utc(r.created_at), stored_bytes=r.stored_bytes or 0) for r in rows]
