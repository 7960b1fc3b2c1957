"""The per-server quota on saves, and the write lock that makes it (and free slugs) exact.

One database is one team server's store, so the quota is per database: at most
SCENARIOS_MAX saved scenarios, REVISIONS_MAX versions of one scenario, and
STORED_BYTES_MAX bytes of saved JSON (every version's payload and frozen catalog
entries).  A save past a limit is refused with a message naming the limit and
what to do; nothing is written.

On PostgreSQL every save first takes a transaction-scoped advisory lock (one
per database and schema), so saves of one server's store run one at a time: a
free slug chosen inside the lock stays free until commit (concurrent saves of
one name all succeed, with distinct slugs), and the quota counts cannot be
overtaken by a concurrent save.  SQLite writers already queue on BEGIN IMMEDIATE.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from planner.errors import StoreError
from planner.store.models import ScenarioRevisionRow, ScenarioRow

__all__ = [
    "REVISIONS_MAX",
    "SCENARIOS_MAX",
    "STORED_BYTES_MAX",
    "check_new_revision",
    "check_new_scenario",
    "lock_writes",
    "stored_bytes",
]

SCENARIOS_MAX = 5_000  # saved scenarios per server: far more than a team names, few enough to list and back up
REVISIONS_MAX = 1_000  # versions of one scenario (each a full copy of its inputs)
# Saved JSON over every version: a scenario is a few KB, one with a 100k-row trace about 1.3 MB,
# so 2 GiB holds ~1,500 versions with full traces and a visitor cannot fill the server's disk.
STORED_BYTES_MAX = 2 * 2**30
_NOTHING = "nothing was saved"
_LOCK_SQL = text("SELECT pg_advisory_xact_lock(hashtext('ridgeline.store.write:' || coalesce(current_schema(), '')))")


def stored_bytes(values: dict[str, Any]) -> int:
    """The size the quota counts for one saved version: its payload and frozen catalog as JSON text."""
    frozen = values.get("frozen_catalog")
    size = len(json.dumps(values["payload"]))
    return size + (len(json.dumps(frozen)) if frozen is not None else 0)


def lock_writes(session: Session) -> None:
    """PostgreSQL: wait for this database's store write lock (released at commit or rollback)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_LOCK_SQL)


def _bytes_left(session: Session, adding: int) -> None:
    held = int(session.scalar(select(func.coalesce(func.sum(ScenarioRevisionRow.stored_bytes), 0))) or 0)
    if held + adding > STORED_BYTES_MAX:
        raise StoreError(
            f"store quota: saved versions hold {held / 2**20:,.1f} MiB and this one {adding / 2**20:,.1f} MiB, "
            f"over this server's limit of {STORED_BYTES_MAX / 2**20:,.0f} MiB (STORED_BYTES_MAX): delete scenarios "
            f"you no longer need (large traces count most), then save again; {_NOTHING}")


def check_new_scenario(session: Session, values: dict[str, Any]) -> int:
    """Refuse a new scenario past SCENARIOS_MAX or STORED_BYTES_MAX; its size otherwise."""
    count = int(session.scalar(select(func.count()).select_from(ScenarioRow)) or 0)
    if count >= SCENARIOS_MAX:
        raise StoreError(
            f"store quota: this server holds {count:,} saved scenarios, its limit (SCENARIOS_MAX = "
            f"{SCENARIOS_MAX:,}): delete scenarios you no longer need, or save a new version of an existing "
            f"one, then save again; {_NOTHING}")
    size = stored_bytes(values)
    _bytes_left(session, size)
    return size


def check_new_revision(session: Session, *, scenario_id: int, slug: str, values: dict[str, Any]) -> int:
    """Refuse a new version past REVISIONS_MAX (for this scenario) or STORED_BYTES_MAX; its size otherwise."""
    count = int(session.scalar(select(func.count()).select_from(ScenarioRevisionRow)
                               .where(ScenarioRevisionRow.scenario_id == scenario_id)) or 0)
    if count >= REVISIONS_MAX:
        raise StoreError(
            f"store quota: scenario {slug!r} has {count:,} saved versions, the limit (REVISIONS_MAX = "
            f"{REVISIONS_MAX:,}): save it as a copy (a new scenario, its history starting again); {_NOTHING}")
    size = stored_bytes(values)
    _bytes_left(session, size)
    return size
