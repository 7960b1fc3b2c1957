"""The scenario store for the pages: one cached engine per database URL, and a
clear message (never a traceback, never the database password) when the
database cannot be used or is not migrated."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import streamlit as st
from sqlalchemy import Engine

from planner import PlannerError
from planner.store import (
    Revision,
    StoredScenario,
    database_url,
    display_url,
    get_revision,
    get_scenario,
    make_engine,
    require_current,
    scenario_summary,
)

__all__ = ["STORED_CACHE_MAX", "load_revision", "load_stored", "store_engine"]

log = logging.getLogger(__name__)


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    return make_engine(url)


def store_engine(*, on_error: Callable[[str], object] | None = None) -> Engine | None:
    """The engine for DATABASE_URL / RIDGELINE_DB, or None after showing an
    st.error (or ``on_error(message)``) when it is unusable or not at head."""
    error = on_error or st.error
    try:
        engine = _engine(database_url())
        require_current(engine)
        return engine
    except PlannerError as exc:  # the store's messages mask the password and never quote SQL
        error(str(exc))
    except Exception as exc:  # noqa: BLE001 - anything else: the type only (its text may quote SQL)
        log.exception("store unusable")
        error(f"database {display_url()} cannot be used ({type(exc).__name__}): "
              "check DATABASE_URL and run `make migrate`")
    return None


# Saved scenarios (and revisions) this session holds parsed: the one selected on the Scenarios page,
# the Compare picks.  A rerun reuses them while the store has the same version: a payload is read
# when a scenario is opened, not on every rerun.
STORED_CACHE_MAX = 6
_STORED = "_stored_cache"
_REVISIONS = "_revision_cache"


def _remember(name: str, key: Any, value: Any) -> Any:
    cache: OrderedDict[Any, Any] = st.session_state.setdefault(name, OrderedDict())
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > STORED_CACHE_MAX:
        cache.popitem(last=False)
    return value


def load_stored(engine: Engine, slug: str) -> StoredScenario:
    """The saved scenario ``slug``: its payload read only when this session does not hold
    its current version (a summary query, no payload, says which version that is)."""
    summary = scenario_summary(engine=engine, ref=slug)
    cache: OrderedDict[Any, Any] = st.session_state.setdefault(_STORED, OrderedDict())
    held = cache.get(slug)
    if held is not None and (held.id, held.version, held.updated_at) == (summary.id, summary.version,
                                                                         summary.updated_at):
        cache.move_to_end(slug)
        return held  # type: ignore[no-any-return]
    return _remember(_STORED, slug, get_scenario(engine=engine, ref=slug))  # type: ignore[no-any-return]


def load_revision(engine: Engine, *, owner: StoredScenario, version: int) -> Revision:
    """One saved version of ``owner`` (a version never changes once written: cached by the
    scenario's id and creation time, which a deleted one's reused id does not share, and the version)."""
    key = (owner.id, owner.created_at, version)
    cache: OrderedDict[Any, Any] = st.session_state.setdefault(_REVISIONS, OrderedDict())
    if key in cache:
        cache.move_to_end(key)
        return cache[key]  # type: ignore[no-any-return]
    revision = get_revision(engine=engine, ref=owner.slug, version=version)
    return _remember(_REVISIONS, key, revision)  # type: ignore[no-any-return]
