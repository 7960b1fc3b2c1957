"""The scenario store for the pages: one cached engine per database URL, and a
clear message (never a traceback) when the database is not migrated."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from planner import PlannerError
from planner.store import database_url, make_engine, require_current


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    return make_engine(url)


def store_engine(*, where: object = None) -> Engine | None:
    """The engine for DATABASE_URL / RIDGELINE_DB, or None after showing an
    st.error (in ``where`` if given) when it is unusable or not at head."""
    try:
        engine = _engine(database_url())
        require_current(engine)
        return engine
    except PlannerError as exc:
        (where or st).error(str(exc))  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - an unreachable server: a message, not a traceback
        (where or st).error(f"database {database_url()!r} cannot be used: {type(exc).__name__}: "  # type: ignore[attr-defined]
                            f"{str(exc).splitlines()[0] if str(exc) else ''}; check DATABASE_URL and run `make migrate`")
    return None
