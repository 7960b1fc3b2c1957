"""The mean prompt prefilled alone (a prefix-cache miss, a hit and warm), computed once
for the Plan's prefill and routing sections.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from planner.physics.step import PrefillStep, prefill_step
from planner.spec.context import Resolved

__all__ = ["MeanPrefill", "mean_prefill"]


@dataclass(frozen=True)
class MeanPrefill:
    """The mean prompt prefilled alone, computed once (one array call) for the Plan's
    prefill and routing sections: a miss (nothing cached), a hit (the prefix cached, at
    most prompt − 1 tokens) and warm (the routing comparison: the whole prefix cached)."""

    hit_cached_tokens: float
    miss: PrefillStep
    hit: PrefillStep
    warm: PrefillStep


def mean_prefill(r: Resolved) -> MeanPrefill:
    """Miss, hit and warm prefills of ``workload.prompt_tokens`` on the scenario's layout."""
    w = r.scenario.workload
    hit_cached = float(min(w.prefix_tokens, w.prompt_tokens - 1))
    st = prefill_step(tokens=w.prompt_tokens, cached_tokens=np.array([0.0, hit_cached, float(w.prefix_tokens)]),
                      **r.step_kwargs())
    shape = np.shape(st.time_s)

    def at(i: int) -> PrefillStep:
        def f(a: ArrayLike) -> float:
            return float(np.broadcast_to(np.asarray(a, float), shape)[i])

        # Every field at prompt i (the kernel groups' times too): floats, the flag a bool.
        values: dict[str, Any] = {k.name: f(getattr(st, k.name)) for k in fields(PrefillStep)}
        values["compute_bound"] = bool(np.broadcast_to(st.compute_bound, shape)[i])
        return PrefillStep(**values)

    return MeanPrefill(hit_cached_tokens=hit_cached, miss=at(0), hit=at(1), warm=at(2))
