"""What the store's two aggregates share: the reference type, the error guard, UTC times."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import ParamSpec, TypeVar

from sqlalchemy import Engine

from planner.store.db import store_errors

__all__ = ["Ref", "as_utc", "guarded", "utc_now"]

Ref = int | str  # a scenario id or slug
_P = ParamSpec("_P")
_R = TypeVar("_R")


def guarded(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """A public operation: any database failure inside is one StoreError line
    naming the database (password masked), never the driver's traceback or SQL."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        engine = kwargs.get("engine")
        with store_errors(engine.url if isinstance(engine, Engine) else None):
            return fn(*args, **kwargs)

    return wrapper


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
