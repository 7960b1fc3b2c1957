"""Fitted physics terms beyond the efficiencies, and a scoped override for fitting them.

The values live in :data:`planner.spec.fitted.FITTED_TERMS` (written by
``bench/fit_defaults.py --write``); the step functions read them through
:func:`term`.  ``physics_terms(...)`` replaces some for the calls inside the
``with`` block only (a context variable: other threads and tasks keep theirs),
which is how the fit tries values without a module-wide change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from planner.spec.fitted import FITTED_TERMS

__all__ = ["TERM_NAMES", "physics_terms", "term"]

TERM_NAMES: tuple[str, ...] = tuple(FITTED_TERMS)
_TERMS: ContextVar[dict[str, float] | None] = ContextVar("physics_terms", default=None)


def term(name: str) -> float:
    """The value of a fitted physics term in the current context."""
    return (_TERMS.get() or FITTED_TERMS)[name]


@contextmanager
def physics_terms(**values: float) -> Iterator[None]:
    """Use ``values`` for the named terms inside the block."""
    unknown = set(values) - set(TERM_NAMES)
    if unknown:
        raise KeyError(f"unknown physics term(s): {', '.join(sorted(unknown))} (known: {', '.join(TERM_NAMES)})")
    token = _TERMS.set({**(_TERMS.get() or FITTED_TERMS), **values})
    try:
        yield
    finally:
        _TERMS.reset(token)
