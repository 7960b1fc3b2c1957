"""The planner's error tree.

Every error a user can cause derives from :class:`PlannerError`; pages catch it
and show ``st.error``, the CLI prints one line and exits non-zero.
"""

from __future__ import annotations

from pydantic import ValidationError

__all__ = [
    "CatalogError",
    "ConflictError",
    "InsufficientMemoryError",
    "NoFeasibleConfigError",
    "PlannerError",
    "ProbeError",
    "ScenarioError",
    "StoreError",
    "validation_message",
]


class PlannerError(Exception):
    """Base class: a message that says what failed and how to fix it."""


class CatalogError(PlannerError):
    """A catalog entry (or imported config) is missing, malformed or contradictory."""


class ScenarioError(PlannerError):
    """A scenario field is unknown or out of range; the message names the field."""


class InsufficientMemoryError(PlannerError):
    """The model does not fit in the memory of the chosen layout."""


class NoFeasibleConfigError(PlannerError):
    """No candidate meets the constraints."""


class ConflictError(PlannerError):
    """A save was based on a stale version of a stored scenario."""


class ProbeError(PlannerError):
    """The live probe could not run (bad URL, host not allowed, ...)."""


class StoreError(PlannerError):
    """The scenario store cannot be used: unreachable, not a database, or at an unknown revision."""


def validation_message(exc: ValidationError, *, prefix: str = "") -> str:
    """One line naming the dotted field: ``parallel.tp: must be >= 1`` (the one place a
    pydantic error becomes a user's message)."""
    parts = []
    errors = [e for e in exc.errors() if not (e["type"] == "string_type" and isinstance(e.get("input"), dict))]
    for err in (errors or exc.errors())[:3]:
        loc = [str(p) for p in err["loc"] if not str(p).startswith(("str", "function-"))]
        # Drop union-branch names pydantic inserts (GpuSpec, ModelSpec ...).
        loc = [p for p in loc if not p[:1].isupper()]
        key = ".".join(([prefix] if prefix else []) + loc)
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        if err["type"] == "literal_error" or err["type"] == "enum":
            msg = f"{msg}, got {err.get('input')!r}"
        parts.append(f"{key}: {msg}" if key else msg)
    return "; ".join(dict.fromkeys(parts))
