"""Saved-scenario operations (the scenarios aggregate), keyword-only, over an Engine.
Probe runs are the other aggregate: ``planner.store.probe_runs``.

Every write is one transaction.  ``update_scenario`` takes the version the
caller loaded: a stale version raises :class:`ConflictError` and writes nothing
(the UPDATE is conditional on the version, so two writers cannot both win).
Every successful write appends a row to ``scenario_revisions``, so the history
holds every saved payload and any of them can be restored.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from planner.errors import ConflictError, ScenarioError
from planner.spec.scenario import SCHEMA_VERSION, Scenario, scenario_from_dict
from planner.store.common import Ref, as_utc, guarded, utc_now
from planner.store.db import writer
from planner.store.frozen import FrozenCatalog, catalog_drift, freeze_catalog, frozen_from_json, frozen_scenario
from planner.store.limits import (
    check_description,
    check_id,
    check_name,
    check_slug,
    check_tags,
    parse_ref,
)
from planner.store.listing import ScenarioSummary, list_scenarios
from planner.store.models import ScenarioRevisionRow, ScenarioRow
from planner.store.quota import check_new_revision, check_new_scenario, lock_writes

__all__ = [
    "Revision",
    "StoredScenario",
    "ScenarioSummary",
    "delete_scenario",
    "drift",
    "duplicate_scenario",
    "get_revision",
    "get_scenario",
    "list_revisions",
    "list_scenarios",
    "rename_scenario",
    "restore_revision",
    "save_scenario",
    "insert_scenario",
    "scenario_row",
    "scenario_values",
    "slugify",
    "update_scenario",
]

log = logging.getLogger(__name__)

_FROZEN = ConfigDict(frozen=True)

class StoredScenario(ScenarioSummary):
    """A saved scenario: inputs, frozen catalog entries, bookkeeping."""

    scenario: Scenario
    payload: dict[str, Any]
    schema_version: int
    frozen_catalog: FrozenCatalog | None
    created_at: datetime

    def catalog_drift(self) -> tuple[str, ...]:
        """What changed in the catalog since this was saved (empty: nothing)."""
        return catalog_drift(scenario=self.scenario, frozen=self.frozen_catalog)

    def frozen_scenario(self) -> Scenario:
        """The scenario with its saved specs and price inline (plans as saved)."""
        if self.frozen_catalog is None:
            return self.scenario
        return frozen_scenario(payload=self.payload, frozen=self.frozen_catalog)


class Revision(BaseModel):
    """One saved version of a scenario."""

    model_config = _FROZEN
    scenario_id: int
    version: int
    name: str
    description: str
    tags: tuple[str, ...]
    payload: dict[str, Any]
    frozen_catalog: FrozenCatalog | None
    note: str
    created_at: datetime


# ---------------------------------------------------------------- helpers


def slugify(text: str) -> str:
    """``"Llama 70B / H200!"`` → ``"llama-70b-h200"`` (never all digits, never empty)."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80].strip("-")
    if not slug or slug.isdigit():
        slug = f"scenario-{slug}".strip("-")
    return slug


def _where_ref(ref: Ref) -> Any:
    checked = parse_ref(ref)  # an id in range or a well-formed slug, else ScenarioError naming it
    if isinstance(checked, int):
        return ScenarioRow.id == checked
    return ScenarioRow.slug == checked


def scenario_row(session: Session, ref: Ref) -> ScenarioRow:
    row = session.scalars(select(ScenarioRow).where(_where_ref(ref))).first()
    if row is None:
        raise ScenarioError(f"no saved scenario {ref!r}: `python -m planner scenarios list` shows the saved ones")
    return row


def _payload_scenario(payload: dict[str, Any], frozen: FrozenCatalog | None, label: str) -> Scenario:
    try:
        return scenario_from_dict(payload)
    except ScenarioError as exc:
        if frozen is None:
            raise ScenarioError(f"saved scenario {label}: {exc}") from None
        # An id that left the catalog: the frozen entries still plan it.
        return frozen_scenario(payload=payload, frozen=frozen)


def _stored(row: ScenarioRow) -> StoredScenario:
    frozen = frozen_from_json(row.frozen_catalog)
    return StoredScenario(
        id=row.id, slug=row.slug, name=row.name, description=row.description, tags=tuple(row.tags or ()),
        version=row.version, updated_at=as_utc(row.updated_at), created_at=as_utc(row.created_at),
        scenario=_payload_scenario(row.payload, frozen, repr(row.slug)), payload=row.payload,
        schema_version=row.schema_version, frozen_catalog=frozen, stored_bytes=row.stored_bytes or 0,
    )


def _revision(row: ScenarioRevisionRow) -> Revision:
    return Revision(
        scenario_id=row.scenario_id, version=row.version, name=row.name, description=row.description,
        tags=tuple(row.tags or ()), payload=row.payload, frozen_catalog=frozen_from_json(row.frozen_catalog),
        note=row.note, created_at=as_utc(row.created_at),
    )


def _add_revision(session: Session, *, scenario_id: int, version: int, values: dict[str, Any], note: str,
                  when: datetime) -> None:
    session.add(ScenarioRevisionRow(
        scenario_id=scenario_id, version=version, name=values["name"], description=values["description"],
        tags=values["tags"], payload=values["payload"], schema_version=values["schema_version"],
        frozen_catalog=values["frozen_catalog"], note=note[:200], created_at=when,
        stored_bytes=values["stored_bytes"],
    ))


def _free_slug(session: Session, base: str) -> str:
    taken = set(session.scalars(select(ScenarioRow.slug).where(ScenarioRow.slug.startswith(base, autoescape=True))))
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def insert_scenario(engine: Engine, *, values: dict[str, Any], slug: str | None, note: str) -> StoredScenario:
    explicit = check_slug(slug) if slug is not None else None
    base = slugify(values["name"])
    for _attempt in range(8):
        when = utc_now()
        try:
            with Session(writer(engine)) as session, session.begin():
                lock_writes(session)  # PostgreSQL: one save at a time, so the free slug below stays free
                values = {**values, "stored_bytes": check_new_scenario(session, values)}
                if explicit is not None:
                    if session.scalars(select(ScenarioRow.id).where(ScenarioRow.slug == explicit)).first():
                        raise ConflictError(f"slug: {explicit!r} is taken; choose another or leave it out")
                    chosen = explicit
                else:
                    chosen = _free_slug(session, base)
                row = ScenarioRow(slug=chosen, created_at=when, updated_at=when, version=1, **values)
                session.add(row)
                session.flush()
                _add_revision(session, scenario_id=row.id, version=1, values=values, note=note, when=when)
                session.flush()
                return _stored(row)
        except IntegrityError:
            if explicit is not None:
                raise ConflictError(f"slug: {explicit!r} is taken; choose another or leave it out") from None
            log.info("slug race on %r, retrying", base)
    raise ConflictError(f"could not find a free slug for {base!r}; pass one explicitly")


def scenario_values(*, scenario: Scenario, name: str, description: str, tags: Sequence[str],
            frozen: FrozenCatalog | None = None) -> dict[str, Any]:
    name, description, checked_tags = check_name(name), check_description(description), check_tags(tags)
    frozen = frozen if frozen is not None else freeze_catalog(scenario)
    return {
        "name": name, "description": description, "tags": checked_tags,
        "payload": scenario.model_dump(mode="json"), "schema_version": SCHEMA_VERSION,
        "frozen_catalog": frozen.model_dump(mode="json"),
    }


# ---------------------------------------------------------------- scenarios


@guarded
def save_scenario(*, engine: Engine, scenario: Scenario, name: str | None = None, slug: str | None = None,
                  description: str = "", tags: Sequence[str] = ()) -> StoredScenario:
    """Save a new scenario (version 1), freezing the catalog entries it uses.
    The slug defaults to one made from the name (``-2``, ``-3`` ... when taken)."""
    values = scenario_values(scenario=scenario, name=name or scenario.name, description=description, tags=tags)
    return insert_scenario(engine, values=values, slug=slug, note="created")


@guarded
def get_scenario(*, engine: Engine, ref: Ref) -> StoredScenario:
    """A saved scenario by id or slug (ScenarioError when there is none)."""
    with Session(engine) as session:
        return _stored(scenario_row(session, ref))


@guarded
def update_scenario(*, engine: Engine, ref: Ref, expected_version: int, scenario: Scenario | None = None,
                    name: str | None = None, description: str | None = None, tags: Sequence[str] | None = None,
                    note: str = "update", _frozen: FrozenCatalog | None = None) -> StoredScenario:
    """Save a new version.  ``expected_version`` is the version the caller loaded;
    if the store has moved on, ConflictError and nothing is written.  A changed
    scenario re-freezes the catalog entries it uses."""
    check_id(expected_version, "expected_version")
    with Session(writer(engine)) as session, session.begin():
        lock_writes(session)
        row = scenario_row(session, ref)
        if row.version != expected_version:
            raise _conflict(row.slug, expected_version, row.version)
        current = _stored(row)
        new_scenario = scenario if scenario is not None else current.scenario
        frozen = _frozen
        if frozen is None and scenario is None and current.frozen_catalog is not None:
            frozen = current.frozen_catalog
        values = scenario_values(
            scenario=new_scenario, name=name if name is not None else row.name,
            description=description if description is not None else row.description,
            tags=tags if tags is not None else row.tags, frozen=frozen,
        )
        if scenario is None:
            values["payload"] = row.payload
        values["stored_bytes"] = check_new_revision(session, scenario_id=row.id, slug=row.slug, values=values)
        when = utc_now()
        result = session.execute(
            update(ScenarioRow)
            .where(ScenarioRow.id == row.id, ScenarioRow.version == expected_version)
            .values(version=expected_version + 1, updated_at=when, **values)
            .execution_options(synchronize_session=False)
        )
        if getattr(result, "rowcount", 0) != 1:
            raise _conflict(row.slug, expected_version, None)
        _add_revision(session, scenario_id=row.id, version=expected_version + 1, values=values, note=note, when=when)
        session.flush()
        session.expire(row)  # reread inside this transaction: exactly what was written
        return _stored(row)


def _conflict(slug: str, loaded: int, now: int | None) -> ConflictError:
    have = f"the store has version {now}" if now is not None else "another save got there first"
    return ConflictError(
        f"scenario {slug!r} changed since you loaded it (you had version {loaded}; {have}): "
        "reload it and apply your change again; nothing was saved"
    )


@guarded
def rename_scenario(*, engine: Engine, ref: Ref, name: str, expected_version: int) -> StoredScenario:
    """Change the display name (the slug, and so share links, stay)."""
    return update_scenario(engine=engine, ref=ref, expected_version=expected_version, name=name, note="rename")


@guarded
def duplicate_scenario(*, engine: Engine, ref: Ref, name: str | None = None,
                       slug: str | None = None) -> StoredScenario:
    """A new scenario with the same inputs and frozen catalog entries."""
    src = get_scenario(engine=engine, ref=ref)
    values = scenario_values(scenario=src.scenario, name=name or f"{src.name} (copy)", description=src.description,
                     tags=src.tags, frozen=src.frozen_catalog)
    values["payload"] = src.payload
    return insert_scenario(engine, values=values, slug=slug, note=f"duplicate of {src.slug} v{src.version}")


@guarded
def delete_scenario(*, engine: Engine, ref: Ref, expected_version: int | None = None) -> None:
    """Delete a scenario and its history (only at ``expected_version`` if given)."""
    if expected_version is not None:
        check_id(expected_version, "expected_version")
    with Session(writer(engine)) as session, session.begin():
        row = scenario_row(session, ref)
        if expected_version is not None and row.version != expected_version:
            raise _conflict(row.slug, expected_version, row.version)
        stmt = delete(ScenarioRow).where(ScenarioRow.id == row.id)
        if expected_version is not None:
            stmt = stmt.where(ScenarioRow.version == expected_version)
        session.execute(delete(ScenarioRevisionRow).where(ScenarioRevisionRow.scenario_id == row.id))
        result = session.execute(stmt.execution_options(synchronize_session=False))
        if getattr(result, "rowcount", 0) != 1:
            raise _conflict(row.slug, expected_version or row.version, None)


@guarded
def list_revisions(*, engine: Engine, ref: Ref) -> list[Revision]:
    """Every saved version, newest first."""
    with Session(engine) as session:
        row = scenario_row(session, ref)
        revs = session.scalars(select(ScenarioRevisionRow).where(ScenarioRevisionRow.scenario_id == row.id)
                               .order_by(ScenarioRevisionRow.version.desc()))
        return [_revision(r) for r in revs]


@guarded
def get_revision(*, engine: Engine, ref: Ref, version: int) -> Revision:
    """One saved version (ScenarioError when there is none)."""
    check_id(version, "version")
    with Session(engine) as session:
        row = scenario_row(session, ref)
        rev = session.scalars(select(ScenarioRevisionRow).where(
            ScenarioRevisionRow.scenario_id == row.id, ScenarioRevisionRow.version == version)).first()
        if rev is None:
            raise ScenarioError(f"scenario {row.slug!r} has no version {version} (it is at version {row.version})")
        return _revision(rev)


@guarded
def restore_revision(*, engine: Engine, ref: Ref, version: int, expected_version: int) -> StoredScenario:
    """Save an old version's inputs (and frozen catalog) as a new version."""
    rev = get_revision(engine=engine, ref=ref, version=version)
    scenario = _payload_scenario(rev.payload, rev.frozen_catalog, f"{ref!r} version {version}")
    frozen = rev.frozen_catalog if rev.frozen_catalog is not None else freeze_catalog(scenario)
    return update_scenario(engine=engine, ref=ref, expected_version=expected_version, scenario=scenario,
                           name=rev.name, description=rev.description, tags=rev.tags,
                           note=f"restore of version {version}", _frozen=frozen)


@guarded
def drift(*, engine: Engine, ref: Ref) -> tuple[str, ...]:
    """What changed in the catalog since the scenario was saved (empty: nothing)."""
    return get_scenario(engine=engine, ref=ref).catalog_drift()


# ---------------------------------------------------------------- export / import
