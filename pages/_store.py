"""The scenario store for the pages: one cached engine per database URL, and a
clear message (never a traceback, never the database password) when the
database cannot be used or is not migrated."""

from __future__ import annotations

import logging
from collections.abc import Callable

import streamlit as st
from sqlalchemy import Engine

from planner import PlannerError
from planner.store import database_url, display_url, make_engine, require_current

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
