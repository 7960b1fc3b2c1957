"""Speculation's draws, compiled (planner.simulate.kernel): the same integer hash as
:mod:`planner.simulate.speculation`, so a compiled verify pass accepts what the Python one does."""

from __future__ import annotations

import numpy as np

from planner.simulate.hashing import BALANCE_SALT
from planner.simulate.kernellayout import _njit

# Nothing here is re-exported by planner.simulate: importing numba is slow, so the compiled
# modules load only when the engine first takes the compiled path (planner.simulate.kernel).
__all__: list[str] = []


@_njit
def _hash32(x: int) -> int:
    """planner.simulate.hashing.hash32, compiled (every product below 2^59)."""
    x = x & 0xFFFFFFFF
    x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
    x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
    return (x >> 16) ^ x


@_njit
def _spec_tokens(seed_h: int, request: int, passes: int, thresholds: np.ndarray) -> int:
    """planner.simulate.speculation.SpecDraws.tokens, compiled: 1 + draft tokens accepted."""
    h = _hash32(_hash32(seed_h ^ (request & 0xFFFFFFFF)) ^ (passes & 0xFFFFFFFF))
    a = 1
    for i in range(thresholds.shape[0]):
        if h >= thresholds[i]:
            break
        a += 1
    return a


@_njit
def _balance_rank(request: int, ranks: int) -> int:
    """planner.simulate.hashing.balance_rank, compiled."""
    return _hash32(BALANCE_SALT ^ (request & 0xFFFFFFFF)) % max(ranks, 1)
