"""The fitted physics terms, as the step functions read them (:mod:`planner.spec.terms`
holds the values and the scoped override; the spec layer resolves a scenario's defaults
with them too)."""

from planner.spec.terms import TERM_NAMES, physics_terms, term

__all__ = ["TERM_NAMES", "physics_terms", "term"]
