"""A replica running alone, compiled (numba): the engine's fast path.

The alone path (:mod:`planner.simulate.alone`) runs each replica on its own arrivals.
This module runs such a replica as compiled code when the stream has no chat turns (no
conversation cached on finish) and at most MAX_KERNEL_PREFIX_KEYS distinct prefixes: the
same scheduler as :class:`planner.simulate.replica._Replica` (paged blocks, the prefix
cache with its LRU eviction, preemption by recompute), one iteration at a time (the order
the engine's runs of decode iterations are proven equal to), on the same step times summed
in the same order, so a run is bit-identical to the Python replica's
(tests/test_simulate_kernel.py holds the two together).  A replica's state is arrays: one
row per field and a column per sequence (``q``), one column per prefix key (``ent``).

One iteration, as the Python replica:

1. every decoding sequence gets one token; one whose KV length is a multiple of
   ``block_tokens`` takes a block (short of blocks: evict the least recently used prefix no
   sequence references, else preempt the newest sequence, by recompute);
2. the prompt tokens: in-progress prefills, then waiting requests (FCFS, each starting from
   its prefix's cached full blocks), while the token budget left after the decodes
   (``serving.chunk_tokens`` − decoding sequences), the batch cap and the blocks allow;
   a prefill that completes keeps its prefix cached;
3. its time: ``decode_step(B, mean live context) + prefill_step(chunk tokens, mean cached)``
   from the tables of :class:`planner.simulate.steptimes.StepTimes`.

With speculative decoding (``params[P_SPEC_K]`` draft tokens) step 1 is a verify pass, as
:class:`planner.simulate.speculation._SpecReplica` plans it: each decoding sequence, in batch
order, draws its burst (1 + accepted draft tokens, the same integer hash) and takes blocks
for it (evict, else preempt the newest); step 3 lands the bursts and logs each emission's
tokens, from which the gaps are gathered with their zero gaps (``gather_burst_gaps``); step
times are the planner's speculative cycle (the tables StepTimes fills).

The step-time tables are filled on demand: when the kernel meets a batch size or a cached
bucket it has no table for, it returns asking for it (its whole state lives in arrays),
the caller fills the table from ``StepTimes`` and calls it again; it resumes at the
iteration it was pricing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numba
import numpy as np

from planner.simulate.arrivals import Request
from planner.simulate.speculation import SpecDraws
from planner.simulate.steptimes import CACHED_GRID_TOKENS, CONTEXT_GRID_TOKENS, StepTimes

__all__: list[str] = []

# The most distinct prefix keys a compiled run holds (an eviction scans them); more: the Python replica.
MAX_KERNEL_PREFIX_KEYS = 1024

# Why the kernel returned.
DONE, NEED_DECODE_ROW, NEED_PREFILL_ROW, NEED_PREFILL_EXACT, NEED_SPACE = 0, 1, 2, 3, 4

# Integer state (st[...]).
S_K = 0  # arrivals taken
S_PHASE = 1  # IDLE, PLAN, PRICE
S_ATTEMPTS = 2  # plans left before giving up (the Python replica's range(len(running) + 2)), -1: not started
S_FREE = 3  # free blocks
S_NTIMES = 4  # iterations ended
S_NRUN = 5  # running sequences
S_NPRE = 6  # of which prefilling
S_WHEAD = 7  # waiting: ring buffer head
S_WLEN = 8  # waiting: length
S_ND = 9  # decoding sequences in the planned iteration
S_NPIECES = 10  # prefill pieces in the planned iteration
S_NTOT = 11  # prefill tokens in the planned iteration
S_CTX = 12  # live context of the planned iteration's decoding sequences
S_PREEMPT = 13  # preemptions
S_NSEG = 14  # emission runs closed
S_ASK = 15  # what a NEED_* return asks for: batch size, cached bucket (tokens),
S_ASK_TOKENS = 16  # prefill tokens (NEED_PREFILL_EXACT)
S_EXACT_TOKENS = 17  # the exact prefill held in fst[F_EXACT_*]: its tokens,
S_EXACT_CACHED = 18  # and its cached tokens (-1: none)
S_STAMP = 19  # prefix-cache uses so far (an entry's stamp: its last use; the oldest is evicted first)
S_NLOG = 20  # speculation: emissions logged (sequence, tokens)
S_VPASS = 21  # speculation: verify passes (sequence × iteration)
S_VTOK = 22  # speculation: tokens they emitted
N_STATE = 23

# Float state (fst[...]).
F_T = 0  # replica time
F_CW = 1  # Σ prefill tokens × cached context (the planned chunk)
F_EXACT_TIME = 2
F_EXACT_MARGINAL = 3
N_FSTATE = 4

# Parameters (params[...]).
P_CAPACITY, P_BT, P_MAX_BATCH, P_CHUNK, P_CHUNKED, P_GRID, P_CACHED_GRID, P_SPEC_K, P_SPEC_SEED = range(9)
N_PARAMS = 9  # P_SPEC_K: draft tokens (0: no speculation); P_SPEC_SEED: the hashed seed (speculation.seed_hash)

# Per sequence (q[row, sequence]), in the order handled.
Q_PROMPT = 0  # prompt tokens
Q_OUT = 1  # output tokens
Q_PKEY = 2  # its prefix: key (index into the entries; -1: none)
Q_PTOK = 3  # and tokens
Q_TARGET = 4  # tokens to hold in KV before decoding
Q_KV = 5  # tokens whose KV the replica holds
Q_FILL = 6  # kv mod block_tokens
Q_SHARED = 7  # of kv, from its prefix entry
Q_BLOCKS = 8  # private blocks
Q_GEN = 9  # tokens generated
Q_SEG = 10  # first iteration of its open run of emissions (-1: none)
Q_HIT = 11  # prefix tokens found cached when first admitted (-1: not yet)
Q_ACTIVE = 12  # in the batch
Q_DECODING = 13  # in the batch with its KV complete
Q_ATTACHED = 14  # holds a reference to its prefix's entry
Q_REQ = 15  # its request's index (speculation's draws are keyed on it)
Q_PASS = 16  # speculation: verify passes so far
Q_ACC = 17  # speculation: tokens the planned pass emits
N_Q = 18

# Prefix-cache entries (ent[row, key]), one per key.
E_TOKENS, E_BLOCKS, E_REFS, E_STAMP = range(4)  # E_STAMP -1: no entry
N_E = 4

IDLE, PLAN, PRICE = 0, 1, 2


F = TypeVar("F", bound=Callable[..., Any])


def _njit(fn: F) -> F:
    """numba.njit, typed: compiled on first call, cached on disk beside this module."""
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy")(fn))


@_njit
def _hash32(x: int) -> int:
    """planner.simulate.speculation.hash32, compiled (every product below 2^59)."""
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


@_njit
def replica_kernel(arr: np.ndarray, params: np.ndarray, st: np.ndarray, fst: np.ndarray, q: np.ndarray,
                   ent: np.ndarray, first_s: np.ndarray, finish_s: np.ndarray, waiting: np.ndarray,
                   running: np.ndarray, prefilling: np.ndarray, piece_s: np.ndarray, piece_n: np.ndarray,
                   done: np.ndarray, dec_idx: np.ndarray, dec_rows: np.ndarray, pre_idx: np.ndarray,
                   pre_time: np.ndarray, pre_marg: np.ndarray, spec_thr: np.ndarray, times: np.ndarray,
                   batch_s: np.ndarray, free_s: np.ndarray, seg_j: np.ndarray, seg_a: np.ndarray, seg_b: np.ndarray,
                   log_j: np.ndarray, log_c: np.ndarray) -> int:
    """Run until every arrival is served (DONE), a step-time table is missing or an output
    is full (NEED_*: the caller fills or grows it and calls again; it resumes where it was).

    ``arr``: arrival times in the order handled, then +inf.  Outputs: iteration end times,
    decode batch and free blocks per iteration, closed runs of emissions (sequence, first
    and last iteration); with speculation (``params[P_SPEC_K]`` > 0) every emission's tokens
    (sequence, count) in ``log_j``, ``log_c`` (planner.simulate.speculation)."""
    m = q.shape[1]
    cap_w = waiting.shape[0]
    bt = params[P_BT]
    max_batch = params[P_MAX_BATCH]
    chunk = params[P_CHUNK]
    chunked = params[P_CHUNKED] != 0
    grid = params[P_GRID]
    cgrid = params[P_CACHED_GRID]
    spec = params[P_SPEC_K] > 0
    seed_h = params[P_SPEC_SEED]
    while True:
        phase = st[S_PHASE]
        if phase == IDLE:  # the next arrival starts it
            k = st[S_K]
            if k >= m:
                return DONE
            fst[F_T] = arr[k]
            waiting[(st[S_WHEAD] + st[S_WLEN]) % cap_w] = k
            st[S_WLEN] += 1
            st[S_K] = k + 1
            st[S_PHASE] = PLAN
            st[S_ATTEMPTS] = -1
            continue
        if phase == PLAN:
            # room for this iteration and for every run it may close (no array is replaced in here:
            # the caller grows them, keeping reference counting out of the loop)
            if st[S_NTIMES] >= times.shape[0] or st[S_NSEG] + 2 * (st[S_NRUN] + st[S_WLEN]) + 2 > seg_j.shape[0]:
                return NEED_SPACE
            if spec and st[S_NLOG] + st[S_NRUN] + st[S_WLEN] + 1 > log_j.shape[0]:
                return NEED_SPACE
            if st[S_ATTEMPTS] < 0:
                st[S_ATTEMPTS] = st[S_NRUN] + 2
            # 1. one token per decoding sequence: blocks for those opening one
            nd = 0
            need = 0
            ctx = 0
            if spec:  # a verify pass: each sequence (batch order) takes blocks for its burst (_SpecReplica)
                i = 0
                while i < st[S_NRUN]:
                    j = running[i]
                    i += 1
                    if not q[Q_DECODING, j]:
                        continue
                    a = min(_spec_tokens(seed_h, q[Q_REQ, j], q[Q_PASS, j], spec_thr), q[Q_OUT, j] - q[Q_GEN, j])
                    ok = True
                    while not _alloc(st, q, ent, j, a, bt):
                        st[S_NRUN] -= 1
                        v = running[st[S_NRUN]]
                        _preempt(st, q, ent, v, waiting, prefilling, seg_j, seg_a, seg_b)
                        if v == j:
                            ok = False
                            break
                    if ok:
                        q[Q_ACC, j] = a
                        nd += 1
                        ctx += q[Q_KV, j]
            else:
                for i in range(st[S_NRUN]):
                    j = running[i]
                    if q[Q_DECODING, j]:
                        nd += 1
                        ctx += q[Q_KV, j]
                        if q[Q_FILL, j] == 0:
                            need += 1
                while st[S_FREE] < need:  # evict an unreferenced prefix, else preempt the newest
                    if _evict_one(st, ent):
                        continue
                    st[S_NRUN] -= 1
                    v = running[st[S_NRUN]]
                    if q[Q_DECODING, v]:
                        ctx -= q[Q_KV, v]
                        nd -= 1
                        if q[Q_FILL, v] == 0:
                            need -= 1
                    _preempt(st, q, ent, v, waiting, prefilling, seg_j, seg_a, seg_b)
                st[S_FREE] -= need
            nrun = st[S_NRUN]
            # 2. the prompt tokens in what the budget leaves after the decodes: in-progress
            # prefills, then waiting requests (FCFS)
            room = chunk - nd
            ntot = 0
            cw = 0.0
            npieces = 0
            for i in range(st[S_NPRE]):
                s = prefilling[i]
                n = _piece(st, q, ent, s, bt, chunked, room, ntot, npieces)
                if n <= 0:
                    break
                piece_s[npieces] = s
                piece_n[npieces] = n
                npieces += 1
                ntot += n
                cw += n * q[Q_KV, s]
            while st[S_WLEN] > 0 and nrun < max_batch:
                s = waiting[st[S_WHEAD]]
                if q[Q_KV, s] >= q[Q_TARGET, s] or (chunked and ntot >= room):
                    break
                _attach(st, q, ent, s, bt)
                n = _piece(st, q, ent, s, bt, chunked, room, ntot, npieces)
                if n <= 0:
                    _detach(q, ent, s)
                    break
                st[S_WHEAD] = (st[S_WHEAD] + 1) % cap_w
                st[S_WLEN] -= 1
                q[Q_ACTIVE, s] = 1
                running[nrun] = s
                nrun += 1
                prefilling[st[S_NPRE]] = s
                st[S_NPRE] += 1
                if q[Q_HIT, s] < 0:
                    q[Q_HIT, s] = q[Q_SHARED, s]
                piece_s[npieces] = s
                piece_n[npieces] = n
                npieces += 1
                ntot += n
                cw += n * q[Q_KV, s]
            st[S_NRUN] = nrun
            st[S_ND] = nd
            st[S_CTX] = ctx
            st[S_NPIECES] = npieces
            st[S_NTOT] = ntot
            fst[F_CW] = cw
            st[S_PHASE] = PRICE
            continue
        # PRICE: the planned iteration's time (a missing table: ask, and come back here)
        nd = st[S_ND]
        npieces = st[S_NPIECES]
        dt = 0.0
        if nd:
            r = dec_idx[nd]
            if r < 0:
                st[S_ASK] = nd
                return NEED_DECODE_ROW
            x = (st[S_CTX] / nd + 1.0) / grid
            i = int(x)
            f = x - i
            if f:
                dt += dec_rows[r, i] + f * (dec_rows[r, i + 1] - dec_rows[r, i])
            else:
                dt += dec_rows[r, i]
        if npieces:
            ntot = st[S_NTOT]
            c = int(np.rint(fst[F_CW] / ntot / cgrid)) * cgrid
            if ntot <= chunk:
                r = pre_idx[c // cgrid]
                if r < 0:
                    st[S_ASK] = c
                    return NEED_PREFILL_ROW
                dt += pre_marg[r, ntot] if nd else pre_time[r, ntot]
            else:
                if st[S_EXACT_TOKENS] != ntot or st[S_EXACT_CACHED] != c:
                    st[S_ASK] = c
                    st[S_ASK_TOKENS] = ntot
                    return NEED_PREFILL_EXACT
                dt += fst[F_EXACT_MARGINAL] if nd else fst[F_EXACT_TIME]
        st[S_ATTEMPTS] -= 1
        if not dt > 0:
            if st[S_NRUN] == 0:
                st[S_PHASE] = IDLE
                continue
            st[S_NRUN] -= 1  # prefills stuck on blocks: free the newest
            _preempt(st, q, ent, running[st[S_NRUN]], waiting, prefilling, seg_j, seg_a, seg_b)
            st[S_PHASE] = PLAN if st[S_ATTEMPTS] > 0 else IDLE
            continue
        # the iteration ends at t + dt; arrivals at or before then are seen by its end
        end = fst[F_T] + dt
        k = st[S_K]
        while arr[k] <= end:
            waiting[(st[S_WHEAD] + st[S_WLEN]) % cap_w] = k
            st[S_WLEN] += 1
            k += 1
        st[S_K] = k
        # 3. end the iteration
        idx = st[S_NTIMES]
        times[idx] = end
        nrun = st[S_NRUN]
        ndone = 0  # finished this iteration: closed after the prefills (whose prefix entries see their references)
        for i in range(nrun):
            j = running[i]
            if q[Q_DECODING, j]:
                if spec:  # its burst: the blocks were taken when planned
                    a = q[Q_ACC, j]
                    q[Q_KV, j] += a
                    q[Q_FILL, j] = q[Q_KV, j] % bt
                    q[Q_GEN, j] += a
                    q[Q_PASS, j] += 1
                    log_j[st[S_NLOG]] = j
                    log_c[st[S_NLOG]] = a
                    st[S_NLOG] += 1
                    st[S_VPASS] += 1
                    st[S_VTOK] += a
                else:
                    if q[Q_FILL, j] == 0:
                        q[Q_BLOCKS, j] += 1
                    q[Q_KV, j] += 1
                    q[Q_FILL, j] += 1
                    if q[Q_FILL, j] == bt:
                        q[Q_FILL, j] = 0
                    q[Q_GEN, j] += 1
                if q[Q_GEN, j] >= q[Q_OUT, j]:
                    q[Q_DECODING, j] = 0
                    done[ndone] = j
                    ndone += 1
        completed = False
        for p in range(npieces):
            s = piece_s[p]
            q[Q_KV, s] += piece_n[p]
            q[Q_FILL, s] = q[Q_KV, s] % bt
            if q[Q_KV, s] < q[Q_TARGET, s]:
                continue
            completed = True
            q[Q_GEN, s] += 1  # the prefill's last position samples the next token
            if spec:
                log_j[st[S_NLOG]] = s
                log_c[st[S_NLOG]] = 1
                st[S_NLOG] += 1
            if first_s[s] != first_s[s]:  # NaN: its first token
                first_s[s] = end
            if q[Q_SEG, s] < 0:
                q[Q_SEG, s] = idx
            if q[Q_PKEY, s] >= 0 and q[Q_PTOK, s] > 0:
                _upsert(st, q, ent, s, q[Q_PTOK, s], bt)
            if q[Q_GEN, s] >= q[Q_OUT, s]:
                done[ndone] = s
                ndone += 1
            else:
                q[Q_DECODING, s] = 1
        if completed:
            w = 0
            for i in range(st[S_NPRE]):
                s = prefilling[i]
                if q[Q_KV, s] < q[Q_TARGET, s]:
                    prefilling[w] = s
                    w += 1
            st[S_NPRE] = w
        for i in range(ndone):
            _finish(st, q, ent, done[i], idx, end, finish_s, seg_j, seg_a, seg_b)
        if ndone:
            w = 0
            for i in range(nrun):
                j = running[i]
                if q[Q_ACTIVE, j]:
                    running[w] = j
                    w += 1
            st[S_NRUN] = w
        batch_s[idx] = nd
        free_s[idx] = st[S_FREE]
        st[S_NTIMES] = idx + 1
        st[S_NPIECES] = 0
        fst[F_T] = end
        st[S_PHASE] = PLAN
        st[S_ATTEMPTS] = -1


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
    each repeated by its count, as planner.simulate.engine._burst_gaps takes it."""
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


class Tables:
    """The kernel's step-time tables, filled from a StepTimes as the kernel asks (shared by
    the replicas of one run)."""

    def __init__(self, steps: StepTimes, *, max_batch: int, max_context_tokens: int) -> None:
        self.steps = steps
        self.dec_idx = np.full(max_batch + 1, -1, dtype=np.int64)
        self.dec_rows = np.zeros((0, len(steps.decode_row(1))), dtype=np.float64)
        self.n_dec = 0
        self.pre_idx = np.full(max_context_tokens // CACHED_GRID_TOKENS + 2, -1, dtype=np.int64)
        self.pre_time = np.zeros((0, steps.chunk_tokens + 1), dtype=np.float64)
        self.pre_marg = np.zeros((0, steps.chunk_tokens + 1), dtype=np.float64)
        self.n_pre = 0

    def add_decode_row(self, batch_size: int) -> None:
        if self.n_dec == self.dec_rows.shape[0]:
            self.dec_rows = _doubled(self.dec_rows)
        self.dec_rows[self.n_dec] = self.steps.decode_row(batch_size)
        self.dec_idx[batch_size] = self.n_dec
        self.n_dec += 1

    def add_prefill_row(self, cached_tokens: int) -> None:
        if self.n_pre == self.pre_time.shape[0]:
            self.pre_time, self.pre_marg = _doubled(self.pre_time), _doubled(self.pre_marg)
        time_s, marginal_s = self.steps.prefill_rows(cached_tokens)
        self.pre_time[self.n_pre] = time_s
        self.pre_marg[self.n_pre] = marginal_s
        self.pre_idx[cached_tokens // CACHED_GRID_TOKENS] = self.n_pre
        self.n_pre += 1


def _doubled(rows: np.ndarray) -> np.ndarray:
    out = np.zeros((max(2 * rows.shape[0], 4), rows.shape[1]), dtype=rows.dtype)
    out[:rows.shape[0]] = rows
    return out


@dataclass(frozen=True)
class ReplicaRun:
    """One replica's compiled run: per iteration (end time, decode batch, free blocks after it),
    per sequence in the order handled (first token, finish, prefix tokens found cached), its
    closed runs of emissions (sequence, first and last iteration), preemptions, and its
    blocks at the end."""

    times: np.ndarray
    batch_size: np.ndarray
    free_blocks: np.ndarray
    first_s: np.ndarray
    finish_s: np.ndarray
    hit_tokens: np.ndarray
    seg_seq: np.ndarray
    seg_first: np.ndarray
    seg_last: np.ndarray
    preemptions: int
    free: int
    cached_blocks: int  # held by prefix entries no sequence references
    referenced_blocks: int  # held by referenced prefix entries or by sequences' private blocks
    # speculation: every emission's (sequence, tokens) in the order emitted; passes and their tokens
    log_seq: np.ndarray
    log_count: np.ndarray
    verify_passes: int
    verify_tokens: int


def run_replica(tables: Tables, arrival_s: np.ndarray, prompt_tokens: np.ndarray, output_tokens: np.ndarray,
                prefix_key: np.ndarray, prefix_tokens: np.ndarray, *, keys: int, capacity_blocks: int,
                block_tokens: int, max_batch: int, chunk_tokens: int, chunked: bool,
                request_index: np.ndarray | None = None, draws: SpecDraws | None = None) -> ReplicaRun:
    """Serve one replica's requests (arrival order) alone, compiled.  ``prefix_key``: an index
    below ``keys`` per request (-1: none); ``draws``: speculation (``request_index`` keys them)."""
    m = int(prompt_tokens.size)
    arr = np.append(np.asarray(arrival_s, dtype=np.float64), math.inf)
    params = np.zeros(N_PARAMS, dtype=np.int64)
    params[[P_CAPACITY, P_BT, P_MAX_BATCH, P_CHUNK, P_CHUNKED, P_GRID, P_CACHED_GRID]] = (
        capacity_blocks, block_tokens, max_batch, chunk_tokens, int(chunked), CONTEXT_GRID_TOKENS, CACHED_GRID_TOKENS)
    if draws is not None:
        params[P_SPEC_K], params[P_SPEC_SEED] = draws.draft_tokens, draws.seed_h
    thresholds = np.array(draws.thresholds if draws is not None else (0,), dtype=np.int64)
    st = np.zeros(N_STATE, dtype=np.int64)
    st[S_FREE] = capacity_blocks
    st[S_EXACT_TOKENS] = st[S_EXACT_CACHED] = -1
    fst = np.zeros(N_FSTATE, dtype=np.float64)
    q = np.zeros((N_Q, m), dtype=np.int64)
    q[Q_PROMPT] = q[Q_TARGET] = prompt_tokens
    q[Q_OUT] = output_tokens
    q[Q_PKEY] = prefix_key
    q[Q_PTOK] = prefix_tokens
    q[Q_SEG] = q[Q_HIT] = -1
    q[Q_REQ] = np.arange(m) if request_index is None else request_index
    ent = np.zeros((N_E, max(keys, 1)), dtype=np.int64)
    ent[E_STAMP] = -1
    first_s, finish_s = np.full(m, math.nan), np.full(m, math.nan)
    n = max(m, 1)
    outs = [np.empty(max(16, 32 * m), np.float64), np.empty(max(16, 32 * m), np.int64),
            np.empty(max(16, 32 * m), np.int64), np.empty(2 * m + 16, np.int64), np.empty(2 * m + 16, np.int64),
            np.empty(2 * m + 16, np.int64)]
    n_log = max(16, 32 * m) if draws is not None else 16
    outs += [np.empty(n_log, np.int64), np.empty(n_log, np.int64)]
    waiting, running, prefilling, piece_s, piece_n, done = (np.zeros(n, np.int64) for _ in range(6))
    while True:
        code = replica_kernel(arr, params, st, fst, q, ent, first_s, finish_s, waiting, running, prefilling, piece_s,
                              piece_n, done, tables.dec_idx, tables.dec_rows, tables.pre_idx, tables.pre_time,
                              tables.pre_marg, thresholds, *outs)
        if code == DONE:
            break
        if code == NEED_SPACE:
            outs = [np.concatenate([a, np.empty_like(a)]) for a in outs]
        elif code == NEED_DECODE_ROW:
            tables.add_decode_row(int(st[S_ASK]))
        elif code == NEED_PREFILL_ROW:
            tables.add_prefill_row(int(st[S_ASK]))
        else:
            tokens, cached = int(st[S_ASK_TOKENS]), int(st[S_ASK])
            fst[F_EXACT_TIME] = tables.steps.prefill_s(tokens, cached)
            fst[F_EXACT_MARGINAL] = tables.steps.prefill_s(tokens, cached, riding=True)
            st[S_EXACT_TOKENS], st[S_EXACT_CACHED] = tokens, cached
    ni, ns, nl = int(st[S_NTIMES]), int(st[S_NSEG]), int(st[S_NLOG])
    times, batch, free_series, seg_j, seg_a, seg_b, log_j, log_c = outs
    live = ent[E_STAMP] >= 0
    unreferenced = live & (ent[E_REFS] == 0)
    return ReplicaRun(times=times[:ni].copy(), batch_size=batch[:ni].copy(), free_blocks=free_series[:ni].copy(),
                      first_s=first_s, finish_s=finish_s, hit_tokens=np.maximum(q[Q_HIT], 0),
                      seg_seq=seg_j[:ns].copy(), seg_first=seg_a[:ns].copy(), seg_last=seg_b[:ns].copy(),
                      preemptions=int(st[S_PREEMPT]), free=int(st[S_FREE]),
                      cached_blocks=int(ent[E_BLOCKS][unreferenced].sum()),
                      referenced_blocks=int(q[Q_BLOCKS].sum() + ent[E_BLOCKS][live & ~unreferenced].sum()),
                      log_seq=log_j[:nl].copy(), log_count=log_c[:nl].copy(), verify_passes=int(st[S_VPASS]),
                      verify_tokens=int(st[S_VTOK]))


@dataclass(frozen=True)
class Stream:
    """A request stream as arrays (request order), its prefixes as key indices."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_key: np.ndarray  # index into the stream's distinct keys, -1: none
    prefix_tokens: np.ndarray
    keys: int  # distinct prefix keys


def stream_arrays(requests: Sequence[Request]) -> Stream:
    n = len(requests)
    index: dict[str, int] = {}
    pkey = np.fromiter((-1 if q.prefix_key is None else index.setdefault(q.prefix_key, len(index)) for q in requests),
                       dtype=np.int64, count=n)
    return Stream(arrival_s=np.fromiter((q.arrival_s for q in requests), dtype=np.float64, count=n),
                  prompt_tokens=np.fromiter((q.prompt_tokens for q in requests), dtype=np.int64, count=n),
                  output_tokens=np.fromiter((q.output_tokens for q in requests), dtype=np.int64, count=n),
                  prefix_key=pkey,
                  prefix_tokens=np.fromiter((q.prefix_tokens for q in requests), dtype=np.int64, count=n),
                  keys=len(index))


@dataclass(frozen=True)
class Compiled:
    """The replicas' compiled runs and what they give per request (request order)."""

    stream: Stream
    replicas: tuple[ReplicaRun, ...]
    first_s: np.ndarray
    finish_s: np.ndarray
    hit_tokens: np.ndarray
    itl_s: np.ndarray


def run_compiled(tables: Tables, stream: Stream, *, replicas: int, capacity_blocks: int, block_tokens: int,
                 max_batch: int, chunk_tokens: int, chunked: bool, draws: SpecDraws | None = None) -> Compiled:
    """Each of ``replicas`` replicas serves every replicas-th request in the order arrivals are
    handled (by time, then index: round robin), alone and compiled."""
    n_req = stream.arrival_s.size
    order = np.argsort(stream.arrival_s, kind="stable")
    first = np.full(n_req, math.nan)
    finish = np.full(n_req, math.nan)
    hit = np.zeros(n_req, dtype=np.int64)
    runs: list[ReplicaRun] = []
    seg_req, seg_a, seg_b, log_req, log_count = [], [], [], [], []
    offset = 0
    for ri in range(replicas):
        idx = order[ri::replicas]
        run = run_replica(tables, stream.arrival_s[idx], stream.prompt_tokens[idx], stream.output_tokens[idx],
                          stream.prefix_key[idx], stream.prefix_tokens[idx], keys=stream.keys,
                          capacity_blocks=capacity_blocks, block_tokens=block_tokens, max_batch=max_batch,
                          chunk_tokens=chunk_tokens, chunked=chunked, request_index=idx, draws=draws)
        runs.append(run)
        log_req.append(idx[run.log_seq])
        log_count.append(run.log_count)
        first[idx] = run.first_s
        finish[idx] = run.finish_s
        hit[idx] = run.hit_tokens
        seg_req.append(idx[run.seg_seq])
        seg_a.append(run.seg_first + offset)
        seg_b.append(run.seg_last + offset)
        offset += run.times.size
    req = np.concatenate(seg_req)
    by_req = np.argsort(req, kind="stable")  # a request's runs stay in the order they closed
    a, b = np.concatenate(seg_a)[by_req], np.concatenate(seg_b)[by_req]
    per_req = np.bincount(req, minlength=n_req)
    ptr = np.zeros(n_req + 1, dtype=np.int64)
    np.cumsum(per_req, out=ptr[1:])
    times = np.concatenate([r.times for r in runs])
    if draws is not None:  # bursts: each request's emissions' tokens, in the order emitted
        lreq = np.concatenate(log_req)
        by_lreq = np.argsort(lreq, kind="stable")
        counts = np.concatenate(log_count)[by_lreq]
        cptr = np.zeros(n_req + 1, dtype=np.int64)
        np.cumsum(np.bincount(lreq, minlength=n_req), out=cptr[1:])
        total = int(counts.sum() - (np.diff(cptr) > 0).sum())
        itl = gather_burst_gaps(times, ptr, a, b, cptr, counts, total)
    else:
        total = int((b - a).sum() + np.maximum(per_req - 1, 0).sum())
        itl = gather_gaps(times, ptr, a, b, total)
    return Compiled(stream=stream, replicas=tuple(runs), first_s=first, finish_s=finish, hit_tokens=hit, itl_s=itl)


def warm() -> None:
    """Compile the kernels now (or load them from numba's cache beside this module): a tiny
    run, so that the first simulation a user asks for does not wait for the compiler."""
    from planner.simulate.engine import simulate
    from planner.simulate.options import sim_options
    from planner.spec.scenario import Scenario

    simulate(Scenario(), sim_options(requests=20, rate_req_s=1.0, seed=0))
