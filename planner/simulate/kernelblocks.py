"""A compiled replica's KV blocks (planner.simulate.kernel): allocation, the prefix cache
with its LRU eviction, preemption by recompute, finishing a sequence and its runs of emissions."""

from __future__ import annotations

import numpy as np

from planner.simulate.kernellayout import (
    E_BLOCKS,
    E_REFS,
    E_STAMP,
    E_TOKENS,
    Q_ACTIVE,
    Q_ATTACHED,
    Q_BLOCKS,
    Q_DECODING,
    Q_FILL,
    Q_GEN,
    Q_KV,
    Q_PKEY,
    Q_PROMPT,
    Q_PTOK,
    Q_SEG,
    Q_SHARED,
    Q_TARGET,
    S_FREE,
    S_NPRE,
    S_NSEG,
    S_NTIMES,
    S_PREEMPT,
    S_STAMP,
    S_WHEAD,
    S_WLEN,
    _njit,
)

# Nothing here is re-exported by planner.simulate: importing numba is slow, so the compiled
# modules load only when the engine first takes the compiled path (planner.simulate.kernel).
__all__: list[str] = []


@_njit
def _close_run(st: np.ndarray, seg_j: np.ndarray, seg_a: np.ndarray, seg_b: np.ndarray, j: int, a: int,
               b: int) -> None:
    """Record sequence ``j``'s run of emissions in iterations a..b (room checked when the iteration was planned)."""
    ns = st[S_NSEG]
    seg_j[ns] = j
    seg_a[ns] = a
    seg_b[ns] = b
    st[S_NSEG] = ns + 1


@_njit
def _evict_one(st: np.ndarray, ent: np.ndarray) -> bool:
    """Drop the least recently used prefix entry no sequence references; False: none."""
    best = -1
    for k in range(ent.shape[1]):
        if ent[E_STAMP, k] >= 0 and ent[E_REFS, k] == 0 and (best < 0 or ent[E_STAMP, k] < ent[E_STAMP, best]):
            best = k
    if best < 0:
        return False
    st[S_FREE] += ent[E_BLOCKS, best]
    ent[E_STAMP, best] = -1
    ent[E_TOKENS, best] = 0
    ent[E_BLOCKS, best] = 0
    return True


@_njit
def _alloc(st: np.ndarray, q: np.ndarray, ent: np.ndarray, s: int, n: int, bt: int) -> bool:
    """Blocks for ``n`` more tokens of ``s`` (evicting unreferenced prefixes when short); False: short."""
    need = -(-(q[Q_KV, s] + n - q[Q_SHARED, s]) // bt) - q[Q_BLOCKS, s]
    while st[S_FREE] < need:
        if not _evict_one(st, ent):
            return False
    st[S_FREE] -= need
    q[Q_BLOCKS, s] += need
    return True


@_njit
def _attach(st: np.ndarray, q: np.ndarray, ent: np.ndarray, s: int, bt: int) -> None:
    """``s`` starts from its prefix's cached full blocks, if any (a reference; the entry's use)."""
    k = q[Q_PKEY, s]
    if k < 0 or ent[E_STAMP, k] < 0:
        return
    hit = min(ent[E_TOKENS, k], q[Q_PTOK, s], q[Q_TARGET, s] - 1) // bt * bt
    if hit > 0:
        ent[E_REFS, k] += 1
        st[S_STAMP] += 1
        ent[E_STAMP, k] = st[S_STAMP]
        q[Q_ATTACHED, s] = 1
        q[Q_SHARED, s] = hit
        q[Q_KV, s] = hit
        q[Q_FILL, s] = 0


@_njit
def _detach(q: np.ndarray, ent: np.ndarray, s: int) -> None:
    if q[Q_ATTACHED, s]:
        ent[E_REFS, q[Q_PKEY, s]] -= 1
    q[Q_ATTACHED, s] = 0
    q[Q_SHARED, s] = 0
    q[Q_KV, s] = 0
    q[Q_FILL, s] = 0


@_njit
def _release(st: np.ndarray, q: np.ndarray, ent: np.ndarray, s: int) -> None:
    """Free ``s``'s private blocks and its reference to its prefix entry."""
    st[S_FREE] += q[Q_BLOCKS, s]
    q[Q_BLOCKS, s] = 0
    if q[Q_ATTACHED, s]:
        ent[E_REFS, q[Q_PKEY, s]] -= 1
        q[Q_ATTACHED, s] = 0
    q[Q_SHARED, s] = 0


@_njit
def _upsert(st: np.ndarray, q: np.ndarray, ent: np.ndarray, s: int, tokens: int, bt: int) -> None:
    """Keep ``s``'s first ``tokens`` (full blocks) as its prefix's cached entry."""
    k = q[Q_PKEY, s]
    tokens = min(tokens, q[Q_KV, s]) // bt * bt
    if k < 0 or tokens <= 0:
        return
    keep = q[Q_SHARED, s] // bt if q[Q_ATTACHED, s] else 0
    if ent[E_STAMP, k] >= 0:
        if ent[E_TOKENS, k] >= tokens or ent[E_REFS, k] > (1 if q[Q_ATTACHED, s] else 0):
            return
        st[S_FREE] += ent[E_BLOCKS, k] - keep
    take = min(tokens // bt - keep, q[Q_BLOCKS, s])
    q[Q_BLOCKS, s] -= take
    ent[E_TOKENS, k] = (keep + take) * bt
    ent[E_BLOCKS, k] = keep + take
    ent[E_REFS, k] = 1
    st[S_STAMP] += 1
    ent[E_STAMP, k] = st[S_STAMP]
    q[Q_ATTACHED, s] = 1
    q[Q_SHARED, s] = ent[E_TOKENS, k]


@_njit
def _piece(st: np.ndarray, q: np.ndarray, ent: np.ndarray, s: int, bt: int, chunked: bool, chunk: int, ntot: int,
           npieces: int) -> int:
    """How many of ``s``'s prefill tokens join this iteration's chunk (its blocks taken), or 0:
    none left, the chunk full (or a whole prefill that does not fit it), blocks short."""
    n = q[Q_TARGET, s] - q[Q_KV, s]
    if chunked:
        n = min(n, chunk - ntot)
    elif npieces and ntot + n > chunk:
        return 0
    if n <= 0 or not _alloc(st, q, ent, s, n, bt):
        return 0
    return int(n)


@_njit
def _finish(st: np.ndarray, q: np.ndarray, ent: np.ndarray, j: int, idx: int, end: float, finish_s: np.ndarray,
            seg_j: np.ndarray, seg_a: np.ndarray, seg_b: np.ndarray) -> None:
    """Sequence ``j`` finished in iteration ``idx`` (ending at ``end``): close its run, free its blocks."""
    _close_run(st, seg_j, seg_a, seg_b, j, q[Q_SEG, j], idx)
    q[Q_SEG, j] = -1
    finish_s[j] = end
    _release(st, q, ent, j)
    q[Q_ACTIVE, j] = 0


@_njit
def _preempt(st: np.ndarray, q: np.ndarray, ent: np.ndarray, v: int, waiting: np.ndarray, prefilling: np.ndarray,
             seg_j: np.ndarray, seg_a: np.ndarray, seg_b: np.ndarray) -> None:
    """Preempt running sequence ``v`` (already off the running list) by recompute: it goes back to
    the head of the queue with prompt + generated tokens to prefill; its blocks are freed."""
    if q[Q_DECODING, v]:
        q[Q_DECODING, v] = 0
    else:
        w = 0
        for i in range(st[S_NPRE]):
            if prefilling[i] != v:
                prefilling[w] = prefilling[i]
                w += 1
        st[S_NPRE] = w
    if q[Q_SEG, v] >= 0:
        _close_run(st, seg_j, seg_a, seg_b, v, q[Q_SEG, v], st[S_NTIMES] - 1)
    q[Q_SEG, v] = -1
    _release(st, q, ent, v)
    q[Q_KV, v] = 0
    q[Q_FILL, v] = 0
    q[Q_TARGET, v] = q[Q_PROMPT, v] + q[Q_GEN, v]
    st[S_PREEMPT] += 1
    q[Q_ACTIVE, v] = 0
    cap_w = waiting.shape[0]
    st[S_WHEAD] = (st[S_WHEAD] - 1 + cap_w) % cap_w
    waiting[st[S_WHEAD]] = v
    st[S_WLEN] += 1

