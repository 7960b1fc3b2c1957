"""A replica running alone, compiled (numba): the engine's fast path for plain request streams.

The alone path (:mod:`planner.simulate.alone`) runs each replica on its own arrivals.
When no request names a prefix (no prefix cache, no conversation cached on finish) a
replica's state is a few integers per sequence, and this module runs it as compiled code:
the same scheduler as :class:`planner.simulate.replica._Replica`, one iteration at a time
(the order the engine's runs of decode iterations are proven equal to), on the same step
times summed in the same order, so a run is bit-identical to the Python replica's
(tests/test_simulate_kernel.py holds the two together).

One iteration, as the Python replica:

1. every decoding sequence gets one token; one whose KV length is a multiple of
   ``block_tokens`` takes a block (short of blocks: preempt the newest sequence, by recompute);
2. one prefill chunk: in-progress prefills, then waiting requests (FCFS), while the chunk
   budget, the batch cap and the blocks allow;
3. its time: ``decode_step(B, mean live context) + prefill_step(chunk tokens, mean cached)``
   from the tables of :class:`planner.simulate.steptimes.StepTimes`.

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
from planner.simulate.steptimes import CACHED_GRID_TOKENS, CONTEXT_GRID_TOKENS, StepTimes

__all__: list[str] = []

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
N_STATE = 19

# Float state (fst[...]).
F_T = 0  # replica time
F_CW = 1  # Σ prefill tokens × cached context (the planned chunk)
F_EXACT_TIME = 2
F_EXACT_MARGINAL = 3
N_FSTATE = 4

# Parameters (params[...]).
P_CAPACITY, P_BT, P_MAX_BATCH, P_CHUNK, P_CHUNKED, P_GRID, P_CACHED_GRID = range(7)
N_PARAMS = 7

IDLE, PLAN, PRICE = 0, 1, 2


F = TypeVar("F", bound=Callable[..., Any])


def _njit(fn: F) -> F:
    """numba.njit, typed: compiled on first call, cached on disk beside this module."""
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy")(fn))


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
def _piece(st: np.ndarray, s: int, kv: np.ndarray, target: np.ndarray, blocks: np.ndarray, bt: int, chunked: bool,
           chunk: int, ntot: int, npieces: int) -> int:
    """How many of ``s``'s prefill tokens join this iteration's chunk (its blocks taken), or 0:
    none left, the chunk full (or a whole prefill that does not fit it), blocks short."""
    n = target[s] - kv[s]
    if chunked:
        n = min(n, chunk - ntot)
    elif npieces and ntot + n > chunk:
        return 0
    if n <= 0:
        return 0
    nb = -(-(kv[s] + n) // bt) - blocks[s]
    if st[S_FREE] < nb:
        return 0
    st[S_FREE] -= nb
    blocks[s] += nb
    return int(n)


@_njit
def _finish(st: np.ndarray, j: int, idx: int, end: float, seg_start: np.ndarray, finish_s: np.ndarray,
            blocks: np.ndarray, active: np.ndarray, seg_j: np.ndarray, seg_a: np.ndarray, seg_b: np.ndarray) -> None:
    """Sequence ``j`` finished in iteration ``idx`` (ending at ``end``): close its run, free its blocks."""
    _close_run(st, seg_j, seg_a, seg_b, j, seg_start[j], idx)
    seg_start[j] = -1
    finish_s[j] = end
    st[S_FREE] += blocks[j]
    blocks[j] = 0
    active[j] = False


@_njit
def _preempt(st: np.ndarray, v: int, prompt: np.ndarray, kv: np.ndarray, fill: np.ndarray, target: np.ndarray,
             blocks: np.ndarray,
             generated: np.ndarray, seg_start: np.ndarray, active: np.ndarray, decoding: np.ndarray,
             waiting: np.ndarray, prefilling: np.ndarray, seg_j: np.ndarray, seg_a: np.ndarray,
             seg_b: np.ndarray) -> None:
    """Preempt running sequence ``v`` (already off the running list) by recompute: it goes back to
    the head of the queue with prompt + generated tokens to prefill; its blocks are freed."""
    if decoding[v]:
        decoding[v] = False
    else:
        w = 0
        for q in range(st[S_NPRE]):
            if prefilling[q] != v:
                prefilling[w] = prefilling[q]
                w += 1
        st[S_NPRE] = w
    if seg_start[v] >= 0:
        _close_run(st, seg_j, seg_a, seg_b, v, seg_start[v], st[S_NTIMES] - 1)
    seg_start[v] = -1
    st[S_FREE] += blocks[v]
    blocks[v] = 0
    kv[v] = 0
    fill[v] = 0
    target[v] = prompt[v] + generated[v]
    st[S_PREEMPT] += 1
    active[v] = False
    cap_w = waiting.shape[0]
    st[S_WHEAD] = (st[S_WHEAD] - 1 + cap_w) % cap_w
    waiting[st[S_WHEAD]] = v
    st[S_WLEN] += 1


@_njit
def replica_kernel(arr: np.ndarray, prompt: np.ndarray, out: np.ndarray, params: np.ndarray, st: np.ndarray,
                   fst: np.ndarray, kv: np.ndarray, fill: np.ndarray, target: np.ndarray, blocks: np.ndarray,
                   generated: np.ndarray, seg_start: np.ndarray, active: np.ndarray, decoding: np.ndarray, first_s: np.ndarray,
                   finish_s: np.ndarray, waiting: np.ndarray, running: np.ndarray, prefilling: np.ndarray,
                   piece_s: np.ndarray, piece_n: np.ndarray, dec_idx: np.ndarray, dec_rows: np.ndarray,
                   pre_idx: np.ndarray, pre_time: np.ndarray, pre_marg: np.ndarray, times: np.ndarray,
                   batch_s: np.ndarray, free_s: np.ndarray, seg_j: np.ndarray, seg_a: np.ndarray,
                   seg_b: np.ndarray) -> int:
    """Run until every arrival is served (DONE), a step-time table is missing or an output
    is full (NEED_*: the caller fills or grows it and calls again; it resumes where it was).

    ``arr``: arrival times in the order handled, then +inf.  Outputs: iteration end times,
    decode batch and free blocks per iteration, closed runs of emissions (sequence, first
    and last iteration)."""
    m = prompt.shape[0]
    cap_w = waiting.shape[0]
    bt = params[P_BT]
    max_batch = params[P_MAX_BATCH]
    chunk = params[P_CHUNK]
    chunked = params[P_CHUNKED] != 0
    grid = params[P_GRID]
    cgrid = params[P_CACHED_GRID]
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
            if st[S_ATTEMPTS] < 0:
                st[S_ATTEMPTS] = st[S_NRUN] + 2
            # 1. one token per decoding sequence: blocks for those opening one
            nd = 0
            need = 0
            ctx = 0
            for q in range(st[S_NRUN]):
                j = running[q]
                if decoding[j]:
                    nd += 1
                    ctx += kv[j]
                    if fill[j] == 0:
                        need += 1
            while st[S_FREE] < need:  # no cached prefix to evict: preempt the newest
                st[S_NRUN] -= 1
                v = running[st[S_NRUN]]
                if decoding[v]:
                    ctx -= kv[v]
                    nd -= 1
                    if fill[v] == 0:
                        need -= 1
                _preempt(st, v, prompt, kv, fill, target, blocks, generated, seg_start, active,
                                               decoding, waiting, prefilling, seg_j, seg_a, seg_b)
            st[S_FREE] -= need
            nrun = st[S_NRUN]
            # 2. one prefill chunk: in-progress prefills, then waiting requests (FCFS)
            ntot = 0
            cw = 0.0
            npieces = 0
            for q in range(st[S_NPRE]):
                s = prefilling[q]
                n = _piece(st, s, kv, target, blocks, bt, chunked, chunk, ntot, npieces)
                if n <= 0:
                    break
                piece_s[npieces] = s
                piece_n[npieces] = n
                npieces += 1
                ntot += n
                cw += n * kv[s]
            while st[S_WLEN] > 0 and nrun < max_batch:
                s = waiting[st[S_WHEAD]]
                n = _piece(st, s, kv, target, blocks, bt, chunked, chunk, ntot, npieces)
                if n <= 0:
                    break
                st[S_WHEAD] = (st[S_WHEAD] + 1) % cap_w
                st[S_WLEN] -= 1
                active[s] = True
                running[nrun] = s
                nrun += 1
                prefilling[st[S_NPRE]] = s
                st[S_NPRE] += 1
                piece_s[npieces] = s
                piece_n[npieces] = n
                npieces += 1
                ntot += n
                cw += n * kv[s]
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
            _preempt(st, running[st[S_NRUN]], prompt, kv, fill, target, blocks, generated,
                                           seg_start, active, decoding, waiting, prefilling, seg_j, seg_a, seg_b)
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
        finished = False
        for q in range(nrun):
            j = running[q]
            if decoding[j]:
                if fill[j] == 0:
                    blocks[j] += 1
                kv[j] += 1
                fill[j] += 1
                if fill[j] == bt:
                    fill[j] = 0
                generated[j] += 1
                if generated[j] >= out[j]:
                    decoding[j] = False
                    _finish(st, j, idx, end, seg_start, finish_s, blocks, active, seg_j, seg_a, seg_b)
                    finished = True
        completed = False
        for p in range(npieces):
            s = piece_s[p]
            kv[s] += piece_n[p]
            fill[s] = kv[s] % bt
            if kv[s] < target[s]:
                continue
            completed = True
            generated[s] += 1  # the prefill's last position samples the next token
            if first_s[s] != first_s[s]:  # NaN: its first token
                first_s[s] = end
            if seg_start[s] < 0:
                seg_start[s] = idx
            if generated[s] >= out[s]:
                _finish(st, s, idx, end, seg_start, finish_s, blocks, active, seg_j, seg_a, seg_b)
                finished = True
            else:
                decoding[s] = True
        if completed:
            w = 0
            for q in range(st[S_NPRE]):
                s = prefilling[q]
                if kv[s] < target[s]:
                    prefilling[w] = s
                    w += 1
            st[S_NPRE] = w
        if finished:
            w = 0
            for q in range(nrun):
                j = running[q]
                if active[j]:
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
    per sequence in the order handled (first token, finish), its closed runs of emissions
    (sequence, first and last iteration), preemptions, and its blocks at the end."""

    times: np.ndarray
    batch_size: np.ndarray
    free_blocks: np.ndarray
    first_s: np.ndarray
    finish_s: np.ndarray
    seg_seq: np.ndarray
    seg_first: np.ndarray
    seg_last: np.ndarray
    preemptions: int
    free: int
    held_blocks: int  # by sequences (none once every request finished)


def run_replica(tables: Tables, arrival_s: np.ndarray, prompt_tokens: np.ndarray, output_tokens: np.ndarray, *,
                capacity_blocks: int, block_tokens: int, max_batch: int, chunk_tokens: int,
                chunked: bool) -> ReplicaRun:
    """Serve one replica's requests (arrival order) alone, compiled."""
    m = int(prompt_tokens.size)
    arr = np.append(np.asarray(arrival_s, dtype=np.float64), math.inf)
    prompt = np.ascontiguousarray(prompt_tokens, dtype=np.int64)
    out = np.ascontiguousarray(output_tokens, dtype=np.int64)
    params = np.zeros(N_PARAMS, dtype=np.int64)
    params[[P_CAPACITY, P_BT, P_MAX_BATCH, P_CHUNK, P_CHUNKED, P_GRID, P_CACHED_GRID]] = (
        capacity_blocks, block_tokens, max_batch, chunk_tokens, int(chunked), CONTEXT_GRID_TOKENS, CACHED_GRID_TOKENS)
    st = np.zeros(N_STATE, dtype=np.int64)
    st[S_FREE] = capacity_blocks
    st[S_EXACT_TOKENS] = st[S_EXACT_CACHED] = -1
    fst = np.zeros(N_FSTATE, dtype=np.float64)
    n = max(m, 1)
    per_seq = [prompt.copy(), np.zeros(m, np.int64), np.zeros(m, np.int64), np.full(m, -1, np.int64),
               np.zeros(m, np.bool_), np.zeros(m, np.bool_), np.full(m, math.nan), np.full(m, math.nan)]
    target, kv, generated, seg_start, active, decoding, first_s, finish_s = per_seq
    blocks = np.zeros(m, np.int64)
    fill = np.zeros(m, np.int64)  # kv mod block_tokens
    outs = [np.empty(max(16, 32 * m), np.float64), np.empty(max(16, 32 * m), np.int64),
            np.empty(max(16, 32 * m), np.int64), np.empty(2 * m + 16, np.int64), np.empty(2 * m + 16, np.int64),
            np.empty(2 * m + 16, np.int64)]
    waiting, running, prefilling, piece_s, piece_n = (np.zeros(n, np.int64) for _ in range(5))
    while True:
        code = replica_kernel(
            arr, prompt, out, params, st, fst, kv, fill, target, blocks, generated, seg_start, active, decoding, first_s,
            finish_s, waiting, running, prefilling, piece_s, piece_n, tables.dec_idx, tables.dec_rows, tables.pre_idx,
            tables.pre_time, tables.pre_marg, *outs)
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
    ni, ns = int(st[S_NTIMES]), int(st[S_NSEG])
    times, batch, free_series, seg_j, seg_a, seg_b = outs
    return ReplicaRun(times=times[:ni].copy(), batch_size=batch[:ni].copy(), free_blocks=free_series[:ni].copy(),
                      first_s=first_s, finish_s=finish_s, seg_seq=seg_j[:ns].copy(), seg_first=seg_a[:ns].copy(),
                      seg_last=seg_b[:ns].copy(), preemptions=int(st[S_PREEMPT]), free=int(st[S_FREE]),
                      held_blocks=int(blocks.sum()))


@dataclass(frozen=True)
class Compiled:
    """The replicas' compiled runs and what they give per request (request order)."""

    replicas: tuple[ReplicaRun, ...]
    first_s: np.ndarray
    finish_s: np.ndarray
    itl_s: np.ndarray


def run_compiled(tables: Tables, requests: Sequence[Request], order: np.ndarray, *, replicas: int,
                 capacity_blocks: int, block_tokens: int, max_batch: int, chunk_tokens: int,
                 chunked: bool) -> Compiled:
    """Each of ``replicas`` replicas serves every replicas-th request of ``order`` (the order
    arrivals are handled: round robin), alone and compiled."""
    n_req = len(requests)
    arrival = np.fromiter((q.arrival_s for q in requests), dtype=np.float64, count=n_req)
    prompt = np.fromiter((q.prompt_tokens for q in requests), dtype=np.int64, count=n_req)
    output = np.fromiter((q.output_tokens for q in requests), dtype=np.int64, count=n_req)
    first = np.full(n_req, math.nan)
    finish = np.full(n_req, math.nan)
    runs: list[ReplicaRun] = []
    seg_req, seg_a, seg_b = [], [], []
    offset = 0
    for ri in range(replicas):
        idx = order[ri::replicas]
        run = run_replica(tables, arrival[idx], prompt[idx], output[idx], capacity_blocks=capacity_blocks,
                          block_tokens=block_tokens, max_batch=max_batch, chunk_tokens=chunk_tokens, chunked=chunked)
        runs.append(run)
        first[idx] = run.first_s
        finish[idx] = run.finish_s
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
    total = int((b - a).sum() + np.maximum(per_req - 1, 0).sum())
    times = np.concatenate([r.times for r in runs])
    itl = gather_gaps(times, ptr, a, b, total)
    return Compiled(replicas=tuple(runs), first_s=first, finish_s=finish, itl_s=itl)


def warm() -> None:
    """Compile the kernels now (or load them from numba's cache beside this module): a tiny
    plain run, so that the first simulation a user asks for does not wait for the compiler."""
    from planner.simulate.engine import simulate
    from planner.simulate.options import sim_options
    from planner.spec.scenario import Scenario

    simulate(Scenario(), sim_options(requests=20, rate_req_s=1.0, seed=0))
