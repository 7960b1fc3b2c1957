"""Inter-token gaps of compiled runs (planner.simulate.kernel), gathered compiled: per request,
the differences of its emission times across its runs of iterations."""

from __future__ import annotations

import numpy as np

from planner.simulate.kernellayout import _njit

# Nothing here is re-exported by planner.simulate: importing numba is slow, so the compiled
# modules load only when the engine first takes the compiled path (planner.simulate.kernel).
__all__: list[str] = []


@_njit
def gather_gaps(times: np.ndarray, ptr: np.ndarray, seg_a: np.ndarray, seg_b: np.ndarray, total: int) -> np.ndarray:
    """Every request's inter-token gaps, request by request: the differences of its emission
    times (its runs of iterations ``seg_a[g]..seg_b[g]`` in ``times``, for g in
    ``ptr[i]..ptr[i + 1]``, concatenated), the subtractions np.diff of them does."""
    gaps = np.empty(total, dtype=np.float64)
    pos = 0
    for i in range(ptr.shape[0] - 1):
        last = -1
        for g in range(ptr[i], ptr[i + 1]):
            a = seg_a[g]
            b = seg_b[g]
            if last >= 0:  # from the previous run's last emission to this one's first
                gaps[pos] = times[a] - times[last]
                pos += 1
            for e in range(a, b):
                gaps[pos + e - a] = times[e + 1] - times[e]
            pos += b - a
            last = b
    return gaps


@_njit
def gather_burst_gaps(times: np.ndarray, ptr: np.ndarray, seg_a: np.ndarray, seg_b: np.ndarray, cptr: np.ndarray,
                      counts: np.ndarray, total: int) -> np.ndarray:
    """Speculation: every request's gaps when each emission carries ``counts`` tokens (its
    emissions' tokens in order, ``cptr[i]..cptr[i + 1]``): np.diff of its emission times
    each repeated by its count, as planner.simulate.simresult._burst_gaps takes it."""
    gaps = np.empty(total, dtype=np.float64)
    pos = 0
    for i in range(ptr.shape[0] - 1):
        c = cptr[i]
        have = False
        last_t = 0.0
        for g in range(ptr[i], ptr[i + 1]):
            for e in range(seg_a[g], seg_b[g] + 1):
                t = times[e]
                if have:
                    gaps[pos] = t - last_t
                    pos += 1
                for _ in range(counts[c] - 1):
                    gaps[pos] = 0.0
                    pos += 1
                c += 1
                have = True
                last_t = t
    return gaps
