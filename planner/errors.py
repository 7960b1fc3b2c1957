"""The planner's error tree.

Every error a user can cause derives from :class:`PlannerError`; pages catch it
and show ``st.error``, the CLI prints one line and exits non-zero.
"""

from __future__ import annotations

__all__ = [
    "CatalogError",
    "ConflictError",
    "InsufficientMemoryError",
    "NoFeasibleConfigError",
    "PlannerError",
    "ProbeError",
    "ScenarioError",
    "StoreError",
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
