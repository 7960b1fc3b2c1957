"""Numerical settings the load model shares (``planner.physics.queueing`` and
``planner.physics.queueing_decode``): the bisection depth, the round-off margin,
and float arrays."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BISECTION_STEPS",
    "ROUNDING_MARGIN",
]

# Bisection steps for a latency quantile: 2^-48 of the bracket, far below any
# displayed digit.
BISECTION_STEPS = 48
# Relative margin keeping floating-point round-off from flipping a comparison at
# an exact boundary (offered load at capacity, a quantile level at a step of the
# cumulative weights): far below any physical difference.
ROUNDING_MARGIN = 1e-12

Arr = NDArray[np.float64]


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)
