"""The compiled replica's loop (planner.simulate.kernel): ``replica_kernel``.

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
order, draws its burst (1 + accepted draft tokens, the same integer hash, in
:mod:`planner.simulate.kernelspec`) and takes blocks for it (evict, else preempt the newest);
step 3 lands the bursts and logs each emission's tokens, from which the gaps are gathered
with their zero gaps (``gather_burst_gaps``, :mod:`planner.simulate.kernelgaps`); step
times are the planner's speculative cycle (the tables StepTimes fills).
"""

from __future__ import annotations

import numpy as np

from planner.simulate.kernelblocks import _alloc, _attach, _detach, _evict_one, _finish, _piece, _preempt, _upsert
from planner.simulate.kernellayout import (
    DONE,
    F_CW,
    F_EXACT_MARGINAL,
    F_EXACT_TIME,
    F_HOST_FLOOR,
    F_RECV_T,
    F_T,
    IDLE,
    NEED_DECODE_ROW,
    NEED_PREFILL_EXACT,
    NEED_PREFILL_ROW,
    NEED_SPACE,
    P_BALANCE,
    P_BT,
    P_CACHED_GRID,
    P_CHUNK,
    P_CHUNKED,
    P_GRID,
    P_MAX_BATCH,
    P_RECV,
    P_SPEC_K,
    P_SPEC_SEED,
    PLAN,
    PRICE,
    Q_ACC,
    Q_ACTIVE,
    Q_BLOCKS,
    Q_DECODING,
    Q_FILL,
    Q_GEN,
    Q_HIT,
    Q_KV,
    Q_OUT,
    Q_PASS,
    Q_PKEY,
    Q_PTOK,
    Q_REQ,
    Q_SEG,
    Q_SHARED,
    Q_TARGET,
    S_ASK,
    S_ASK_TOKENS,
    S_ATTEMPTS,
    S_CTX,
    S_EXACT_CACHED,
    S_EXACT_TOKENS,
    S_FREE,
    S_K,
    S_ND,
    S_NLOG,
    S_NPIECES,
    S_NPRE,
    S_NRUN,
    S_NSEG,
    S_NTIMES,
    S_NTOT,
    S_PHASE,
    S_RECV_C,
    S_VPASS,
    S_VTOK,
    S_WHEAD,
    S_WLEN,
    _njit,
)
from planner.simulate.kernelspec import _balance_rank, _spec_tokens

# Nothing here is re-exported by planner.simulate: importing numba is slow, so the compiled
# modules load only when the engine first takes the compiled path (planner.simulate.kernel).
__all__: list[str] = []


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
    recv_k = params[P_RECV]
    ranks = params[P_BALANCE]  # attention-DP balance: a pass by whose end every rank holds a new request takes them
    idle_below = ranks if ranks > 1 else 1  # fewer running than this: a rank idle, new requests taken at once
    seen = np.zeros(max(ranks, 1), np.int64)
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
            if st[S_NRUN] < idle_below:
                fst[F_RECV_T] = np.inf  # idle (a rank idle): new requests are taken in at once
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
                if q[Q_KV, s] >= q[Q_TARGET, s] or (chunked and ntot >= room) or arr[s] > fst[F_RECV_T]:
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
        if recv_k > 1:  # the scheduler's receive counter (planner.simulate.replica._Replica._recv_tick)
            if npieces:
                st[S_RECV_C] = 0
                fst[F_RECV_T] = end
            else:
                st[S_RECV_C] += 1
                if st[S_RECV_C] >= recv_k:
                    st[S_RECV_C] = 0
                    fst[F_RECV_T] = end
            if ranks > 0 and fst[F_RECV_T] < end:  # _Replica._ranks_covered
                seen[:] = 0
                covered = 0
                for i in range(st[S_WLEN]):
                    s = waiting[(st[S_WHEAD] + i) % cap_w]
                    if fst[F_RECV_T] < arr[s] <= end:
                        b = _balance_rank(q[Q_REQ, s], ranks)
                        if seen[b] == 0:
                            seen[b] = 1
                            covered += 1
                            if covered >= ranks:
                                break
                if covered >= ranks:
                    st[S_RECV_C] = 0
                    fst[F_RECV_T] = end
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
            if first_s[s] != first_s[s]:  # NaN: its first token, delivered no sooner than the hosts' floor
                first_s[s] = end + max(fst[F_HOST_FLOOR] - dt, 0.0)  # after this iteration began (host_floor_s)
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

