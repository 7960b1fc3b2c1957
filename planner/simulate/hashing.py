"""The simulator's integer hash: a pure function of a request's index drives what a run draws
for it (speculation's accepted tokens, planner.simulate.speculation; its attention-DP rank,
here), the same in the compiled replica (planner.simulate.kernelspec)."""

from __future__ import annotations

__all__: list[str] = []

MASK32 = 0xFFFFFFFF
_HASH_MUL = 0x45D9F3B  # (x ^ x >> 16) × this, twice: a 32-bit integer hash with full avalanche


def hash32(x: int) -> int:
    """A 32-bit integer hash; every product stays below 2^59 (int64 in the kernel)."""
    x &= MASK32
    x = ((x >> 16) ^ x) * _HASH_MUL & MASK32
    x = ((x >> 16) ^ x) * _HASH_MUL & MASK32
    return (x >> 16) ^ x


BALANCE_SALT = 0x2545F491  # keeps a request's attention-DP rank independent of its speculation draws


def balance_rank(request: int, ranks: int) -> int:
    """The attention-DP rank a request lands on (serving.attention_dp_balance_iters): uniform over
    ``ranks``, a pure function of the request's index, the same in the compiled replica
    (planner.simulate.kernelspec._balance_rank)."""
    return hash32(BALANCE_SALT ^ (request & MASK32)) % max(ranks, 1)
