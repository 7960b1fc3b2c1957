"""The compiled replica's state as arrays (planner.simulate.kernel): what each row and slot holds.

A replica's state is arrays: one row per field and a column per sequence (``q``), one
column per prefix key (``ent``); integer and float scalars in ``st`` and ``fst``; the run's
parameters in ``params``.  ``_njit`` compiles the kernel's functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba

# Nothing here is re-exported by planner.simulate: importing numba is slow, so the compiled
# modules load only when the engine first takes the compiled path (planner.simulate.kernel).
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
S_STAMP = 19  # prefix-cache uses so far (an entry's stamp: its last use; the oldest is evicted first)
S_NLOG = 20  # speculation: emissions logged (sequence, tokens)
S_VPASS = 21  # speculation: verify passes (sequence × iteration)
S_VTOK = 22  # speculation: tokens they emitted
S_RECV_C = 23  # the scheduler's receive counter (serving.scheduler_recv_interval)
N_STATE = 24

# Float state (fst[...]).
F_T = 0  # replica time
F_CW = 1  # Σ prefill tokens × cached context (the planned chunk)
F_EXACT_TIME = 2
F_EXACT_MARGINAL = 3
F_RECV_T = 4  # arrivals up to here are taken in (+inf: all; the interval is 1 or the replica idle)
F_HOST_FLOOR = 5  # a first token no sooner than this after its prefill iteration began (StepTimes.host_floor_s)
N_FSTATE = 6

# Parameters (params[...]).
(P_CAPACITY, P_BT, P_MAX_BATCH, P_CHUNK, P_CHUNKED, P_GRID, P_CACHED_GRID, P_SPEC_K, P_SPEC_SEED, P_RECV,
 P_BALANCE) = range(11)
N_PARAMS = 11  # P_SPEC_K: draft tokens (0: no speculation); P_SPEC_SEED: the hashed seed (speculation.seed_hash)
# P_RECV: the scheduler's receive interval (planner.simulate.replica._Replica.recv_interval)
# P_BALANCE: attention-DP ranks whose balance takes early (_Replica.balance_ranks; 0: none)

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
    """numba.njit, typed: compiled on first call, cached on disk beside the module defining it."""
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy")(fn))
