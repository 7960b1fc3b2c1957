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

The step-time tables (:mod:`planner.simulate.kerneltables`) are filled on demand: when the
kernel meets a batch size or a cached bucket it has no table for, it returns asking for it
(its whole state lives in arrays), the caller fills the table from ``StepTimes`` and calls
it again; it resumes at the iteration it was pricing.

Its parts: the state's layout (:mod:`planner.simulate.kernellayout`), the blocks and the
prefix cache (:mod:`planner.simulate.kernelblocks`), speculation's draws
(:mod:`planner.simulate.kernelspec`), the loop (:mod:`planner.simulate.kernelloop`), the
gaps (:mod:`planner.simulate.kernelgaps`), the stream as arrays
(:mod:`planner.simulate.kernelstream`); here, the runs that drive them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Imported here, not only by the modules below, so that where numba cannot be imported this
# module cannot be either (the engine then runs the Python replica), however it is reloaded.
import numba  # noqa: F401
import numpy as np

# The parts, re-exported: every name this module held before it was split is importable from here.
from planner.simulate.kernelgaps import gather_burst_gaps as gather_burst_gaps
from planner.simulate.kernelgaps import gather_gaps as gather_gaps
from planner.simulate.kernellayout import DONE as DONE
from planner.simulate.kernellayout import E_BLOCKS as E_BLOCKS
from planner.simulate.kernellayout import E_REFS as E_REFS
from planner.simulate.kernellayout import E_STAMP as E_STAMP
from planner.simulate.kernellayout import E_TOKENS as E_TOKENS
from planner.simulate.kernellayout import F_CW as F_CW
from planner.simulate.kernellayout import F_EXACT_MARGINAL as F_EXACT_MARGINAL
from planner.simulate.kernellayout import F_EXACT_TIME as F_EXACT_TIME
from planner.simulate.kernellayout import F_HOST_FLOOR as F_HOST_FLOOR
from planner.simulate.kernellayout import F_RECV_T as F_RECV_T
from planner.simulate.kernellayout import F_T as F_T
from planner.simulate.kernellayout import IDLE as IDLE
from planner.simulate.kernellayout import N_E as N_E
from planner.simulate.kernellayout import N_FSTATE as N_FSTATE
from planner.simulate.kernellayout import N_PARAMS as N_PARAMS
from planner.simulate.kernellayout import N_Q as N_Q
from planner.simulate.kernellayout import N_STATE as N_STATE
from planner.simulate.kernellayout import NEED_DECODE_ROW as NEED_DECODE_ROW
from planner.simulate.kernellayout import NEED_PREFILL_EXACT as NEED_PREFILL_EXACT
from planner.simulate.kernellayout import NEED_PREFILL_ROW as NEED_PREFILL_ROW
from planner.simulate.kernellayout import NEED_SPACE as NEED_SPACE
from planner.simulate.kernellayout import P_BALANCE as P_BALANCE
from planner.simulate.kernellayout import P_BT as P_BT
from planner.simulate.kernellayout import P_CACHED_GRID as P_CACHED_GRID
from planner.simulate.kernellayout import P_CAPACITY as P_CAPACITY
from planner.simulate.kernellayout import P_CHUNK as P_CHUNK
from planner.simulate.kernellayout import P_CHUNKED as P_CHUNKED
from planner.simulate.kernellayout import P_GRID as P_GRID
from planner.simulate.kernellayout import P_MAX_BATCH as P_MAX_BATCH
from planner.simulate.kernellayout import P_RECV as P_RECV
from planner.simulate.kernellayout import P_SPEC_K as P_SPEC_K
from planner.simulate.kernellayout import P_SPEC_SEED as P_SPEC_SEED
from planner.simulate.kernellayout import PLAN as PLAN
from planner.simulate.kernellayout import PRICE as PRICE
from planner.simulate.kernellayout import Q_ACC as Q_ACC
from planner.simulate.kernellayout import Q_ACTIVE as Q_ACTIVE
from planner.simulate.kernellayout import Q_ATTACHED as Q_ATTACHED
from planner.simulate.kernellayout import Q_BLOCKS as Q_BLOCKS
from planner.simulate.kernellayout import Q_DECODING as Q_DECODING
from planner.simulate.kernellayout import Q_FILL as Q_FILL
from planner.simulate.kernellayout import Q_GEN as Q_GEN
from planner.simulate.kernellayout import Q_HIT as Q_HIT
from planner.simulate.kernellayout import Q_KV as Q_KV
from planner.simulate.kernellayout import Q_OUT as Q_OUT
from planner.simulate.kernellayout import Q_PASS as Q_PASS
from planner.simulate.kernellayout import Q_PKEY as Q_PKEY
from planner.simulate.kernellayout import Q_PROMPT as Q_PROMPT
from planner.simulate.kernellayout import Q_PTOK as Q_PTOK
from planner.simulate.kernellayout import Q_REQ as Q_REQ
from planner.simulate.kernellayout import Q_SEG as Q_SEG
from planner.simulate.kernellayout import Q_SHARED as Q_SHARED
from planner.simulate.kernellayout import Q_TARGET as Q_TARGET
from planner.simulate.kernellayout import S_ASK as S_ASK
from planner.simulate.kernellayout import S_ASK_TOKENS as S_ASK_TOKENS
from planner.simulate.kernellayout import S_ATTEMPTS as S_ATTEMPTS
from planner.simulate.kernellayout import S_CTX as S_CTX
from planner.simulate.kernellayout import S_EXACT_CACHED as S_EXACT_CACHED
from planner.simulate.kernellayout import S_EXACT_TOKENS as S_EXACT_TOKENS
from planner.simulate.kernellayout import S_FREE as S_FREE
from planner.simulate.kernellayout import S_K as S_K
from planner.simulate.kernellayout import S_ND as S_ND
from planner.simulate.kernellayout import S_NLOG as S_NLOG
from planner.simulate.kernellayout import S_NPIECES as S_NPIECES
from planner.simulate.kernellayout import S_NPRE as S_NPRE
from planner.simulate.kernellayout import S_NRUN as S_NRUN
from planner.simulate.kernellayout import S_NSEG as S_NSEG
from planner.simulate.kernellayout import S_NTIMES as S_NTIMES
from planner.simulate.kernellayout import S_NTOT as S_NTOT
from planner.simulate.kernellayout import S_PHASE as S_PHASE
from planner.simulate.kernellayout import S_PREEMPT as S_PREEMPT
from planner.simulate.kernellayout import S_STAMP as S_STAMP
from planner.simulate.kernellayout import S_VPASS as S_VPASS
from planner.simulate.kernellayout import S_VTOK as S_VTOK
from planner.simulate.kernellayout import S_WHEAD as S_WHEAD
from planner.simulate.kernellayout import S_WLEN as S_WLEN
from planner.simulate.kernellayout import F as F
from planner.simulate.kernelloop import replica_kernel as replica_kernel
from planner.simulate.kernelstream import Stream as Stream
from planner.simulate.kernelstream import stream_arrays as stream_arrays
from planner.simulate.kerneltables import Tables as Tables
from planner.simulate.speculation import SpecDraws
from planner.simulate.steptimes import CACHED_GRID_TOKENS, CONTEXT_GRID_TOKENS

__all__: list[str] = []

# The most distinct prefix keys a compiled run holds (an eviction scans them); more: the Python replica.
MAX_KERNEL_PREFIX_KEYS = 1024


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
                request_index: np.ndarray | None = None, draws: SpecDraws | None = None,
                recv_interval: int = 1, balance_ranks: int = 0) -> ReplicaRun:
    """Serve one replica's requests (arrival order) alone, compiled.  ``prefix_key``: an index
    below ``keys`` per request (-1: none); ``draws``: speculation (``request_index`` keys them)."""
    m = int(prompt_tokens.size)
    arr = np.append(np.asarray(arrival_s, dtype=np.float64), math.inf)
    params = np.zeros(N_PARAMS, dtype=np.int64)
    params[[P_CAPACITY, P_BT, P_MAX_BATCH, P_CHUNK, P_CHUNKED, P_GRID, P_CACHED_GRID]] = (
        capacity_blocks, block_tokens, max_batch, chunk_tokens, int(chunked), CONTEXT_GRID_TOKENS, CACHED_GRID_TOKENS)
    if draws is not None:
        params[P_SPEC_K], params[P_SPEC_SEED] = draws.draft_tokens, draws.seed_h
    params[P_RECV] = recv_interval
    params[P_BALANCE] = balance_ranks
    thresholds = np.array(draws.thresholds if draws is not None else (0,), dtype=np.int64)
    st = np.zeros(N_STATE, dtype=np.int64)
    st[S_FREE] = capacity_blocks
    st[S_EXACT_TOKENS] = st[S_EXACT_CACHED] = -1
    fst = np.zeros(N_FSTATE, dtype=np.float64)
    fst[F_RECV_T] = math.inf if recv_interval <= 1 else -math.inf
    fst[F_HOST_FLOOR] = tables.steps.host_floor_s
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
class Compiled:
    """The replicas' compiled runs and what they give per request (request order)."""

    stream: Stream
    replicas: tuple[ReplicaRun, ...]
    first_s: np.ndarray
    finish_s: np.ndarray
    hit_tokens: np.ndarray
    itl_s: np.ndarray


def run_compiled(tables: Tables, stream: Stream, *, replicas: int, capacity_blocks: int, block_tokens: int,
                 max_batch: int, chunk_tokens: int, chunked: bool, draws: SpecDraws | None = None,
                 recv_interval: int = 1, balance_ranks: int = 0) -> Compiled:
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
                          chunk_tokens=chunk_tokens, chunked=chunked, request_index=idx, draws=draws,
                          recv_interval=recv_interval, balance_ranks=balance_ranks)
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
    """Compile the kernels now (or load them from numba's cache beside their modules): a tiny
    run, so that the first simulation a user asks for does not wait for the compiler."""
    from planner.simulate.engine import simulate
    from planner.simulate.options import sim_options
    from planner.spec.scenario import Scenario

    simulate(Scenario(), sim_options(requests=20, rate_req_s=1.0, seed=0))
