"""One replica of the iteration-level simulator: paged KV blocks, prefix cache, one iteration.

Each replica runs iterations back to back while it has work; :mod:`planner.simulate.engine`
drives the replicas on one event queue (see its docstring for the iteration).  Step times
come from :mod:`planner.physics.step`, tabulated by :class:`StepTimes`
(:mod:`planner.simulate.steptimes`).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Protocol

from planner.simulate.arrivals import Request
from planner.simulate.decoderuns import _DecodeRuns
from planner.simulate.router import ReplicaLoad
from planner.simulate.steptimes import CACHED_GRID_TOKENS, CONTEXT_GRID_TOKENS, StepTimes
from planner.simulate.takein import _TakeIn

__all__ = ["CACHED_GRID_TOKENS", "CONTEXT_GRID_TOKENS", "StepTimes"]


class _Host(Protocol):
    """What a replica reports to the simulation when an iteration ends."""

    def finished(self, s: _Seq, t: float) -> None: ...

    def transfer(self, s: _Seq, t: float) -> None: ...


@dataclass(slots=True)
class _Entry:
    tokens: int
    blocks: int
    refs: int


class _Seq:
    __slots__ = ("idx", "req", "out", "arrival_s", "target", "kv", "shared", "entry", "blocks", "generated",
                 "first_s", "finish_s", "segs", "seg_start", "hit", "preemptions", "active", "decoding", "clock0",
                 "admitted", "passes", "counts", "held_s")

    def __init__(self, idx: int, req: Request, arrival_s: float) -> None:
        self.idx = idx
        self.req = req
        self.out = req.output_tokens
        self.arrival_s = arrival_s
        self.target = req.prompt_tokens  # tokens to hold in KV before decoding
        self.kv = 0  # tokens whose KV this replica holds
        self.shared = 0  # of which from a cached prefix entry
        self.entry: _Entry | None = None
        self.blocks = 0  # private blocks
        self.generated = 0
        self.first_s = math.nan  # when its first token was sampled (a handed-off one: reached the decode pool)
        self.held_s = 0.0  # how long the hosts' floor holds that token's delivery beyond it (host_floor_s)
        self.finish_s = math.nan
        self.segs: list[tuple[list[float], int, int]] = []  # runs of emissions: (iteration times, first, last)
        self.seg_start = -1
        self.hit = -1
        self.preemptions = 0
        self.active = False  # in the batch
        self.decoding = False  # in the batch with its KV complete (the replica's token clock runs it)
        self.clock0 = 0  # the replica's clock when kv, generated and blocks were last brought up to date
        self.admitted = -1  # the replica's admission count when it last joined the batch
        self.passes = 0  # speculative verify passes so far (planner.simulate.speculation)
        self.counts: list[int] = []  # speculation: tokens emitted at each emission, in order


class _Replica(_DecodeRuns, _TakeIn):
    speculative = False  # one token per decoding sequence per iteration (planner.simulate.speculation: bursts)

    def __init__(self, *, role: str, capacity_blocks: int, block_tokens: int, max_batch: int,
                 chunk_tokens: int, chunked: bool, steps: StepTimes, recv_interval: int = 1,
                 balance_ranks: int = 0) -> None:
        self.role = role
        self._init_take_in(recv_interval, balance_ranks)  # the scheduler's take-in (planner.simulate.takein)
        # A prompt's first token reaches the client no sooner than this after the iteration that
        # prefills it began (planner.physics.prefill.host_floor_s; colocated replicas: a prefill
        # pool's first token goes with its hand-off, which has its own setup).
        self.host_floor_s = steps.host_floor_s if role == "colocated" else 0.0
        self._plan_dt = 0.0  # the planned iteration's duration
        self.capacity = capacity_blocks
        self.free = capacity_blocks
        self.bt = block_tokens
        self.max_batch = max_batch
        self.chunk_tokens = chunk_tokens
        self.chunked = chunked
        self.steps: StepTimes = steps
        self.waiting: deque[_Seq] = deque()
        self.running: list[_Seq] = []
        self.entries: OrderedDict[str, _Entry] = OrderedDict()
        self.times: list[float] = []
        self.batch_series: list[int] = []
        self.free_series: list[int] = []  # free blocks after each iteration (KV utilization: 1 − free / capacity)
        self.busy = False
        self.preemptions = 0
        self.join_s = 0.0  # when it starts taking requests (a replica added mid-run)
        self.prefilling: list[_Seq] = []  # running sequences whose KV is incomplete, in batch order
        self._ndec = 0  # sequences decoding in the planned iteration
        self._pieces: list[tuple[_Seq, int]] = []
        self._init_runs()

    # -- KV blocks ---------------------------------------------------------
    def _evict_one(self) -> bool:
        for key, e in self.entries.items():
            if e.refs == 0:
                del self.entries[key]
                self.free += e.blocks
                return True
        return False

    def _alloc(self, s: _Seq, n: int) -> bool:
        need = -(-(s.kv + n - s.shared) // self.bt) - s.blocks
        while self.free < need:
            if not self._evict_one():
                return False
        self.free -= need
        s.blocks += need
        return True

    def _release(self, s: _Seq) -> None:
        self.free += s.blocks
        s.blocks = 0
        if s.entry is not None:
            s.entry.refs -= 1
            s.entry = None
        s.shared = 0

    def _preempt(self, s: _Seq) -> None:
        if s.decoding:
            self._leave(s)
        else:
            self.prefilling.remove(s)
        if 0 <= s.seg_start < len(self.times):  # (a transferred sequence's first emission may be still to come)
            s.segs.append((self.times, s.seg_start, len(self.times) - 1))
        s.seg_start = -1
        self._release(s)
        s.kv = 0
        s.target = s.req.prompt_tokens + s.generated  # recompute prompt + tokens generated so far
        s.preemptions += 1
        self.preemptions += 1
        s.active = False
        self.waiting.appendleft(s)

    def cached_tokens(self, req: Request, target: int) -> int:
        e = self.entries.get(req.prefix_key) if req.prefix_key is not None else None
        if e is None:
            return 0
        return min(e.tokens, req.prefix_tokens, target - 1) // self.bt * self.bt

    def _attach(self, s: _Seq) -> None:
        hit = self.cached_tokens(s.req, s.target)
        if hit > 0 and s.req.prefix_key is not None:
            e = self.entries[s.req.prefix_key]
            e.refs += 1
            self.entries.move_to_end(s.req.prefix_key)
            s.entry, s.shared, s.kv = e, hit, hit

    def _detach(self, s: _Seq) -> None:
        if s.entry is not None:
            s.entry.refs -= 1
        s.entry, s.shared, s.kv = None, 0, 0

    def _upsert(self, s: _Seq, tokens: int) -> None:
        """Keep ``s``'s first ``tokens`` (full blocks) as the cached prefix of its key."""
        key = s.req.prefix_key
        bt = self.bt
        tokens = min(tokens, s.kv) // bt * bt
        if key is None or tokens <= 0:
            return
        keep = s.shared // bt if s.entry is not None else 0
        e = self.entries.get(key)
        if e is not None:
            if e.tokens >= tokens or e.refs > (1 if e is s.entry else 0):
                return
            self.free += e.blocks - keep
            del self.entries[key]
        take = min(tokens // bt - keep, s.blocks)
        s.blocks -= take
        ne = _Entry(tokens=(keep + take) * bt, blocks=keep + take, refs=1)
        s.entry, s.shared = ne, ne.tokens
        self.entries[key] = ne

    # -- load seen by routers ------------------------------------------------
    def load(self, req: Request, t: float = 0.0, pushed: float = -math.inf) -> ReplicaLoad:
        free = self.free_at(t, pushed)
        pending = sum(s.target - s.kv for s in self.waiting) + sum(s.target - s.kv for s in self.prefilling)
        return ReplicaLoad(in_flight=len(self.waiting) + len(self.running), pending_tokens=pending,
                           kv_utilization=1.0 - free / self.capacity,
                           cached_prefix_tokens=self.cached_tokens(req, req.prompt_tokens))

    # -- one iteration -------------------------------------------------------
    def plan(self) -> float:
        """Schedule the next iteration; its duration in seconds (0: nothing to do)."""
        for _ in range(len(self.running) + 2):
            dt = self._plan_once()
            if dt > 0 or not self.running:
                return dt
            self._preempt(self.running.pop())  # prefills stuck on blocks: free the newest
        return 0.0

    def _plan_once(self) -> float:
        """Plan one iteration (decode step + the prompt tokens riding on it); its duration."""
        self._take_in_idle()
        self._admit_transferred()
        nd, ctx = self._reserve_decode()
        pieces, ntot, cw = self._plan_prefill_chunk(nd)
        dt = 0.0
        if nd:
            dt += self.steps.decode_s(nd, ctx / nd + 1.0)
        if pieces:
            dt += self.steps.prefill_s(ntot, cw / ntot, riding=bool(nd))
        self._plan_dt = dt
        self._ndec, self._pieces = nd, pieces
        return dt

    def _admit_transferred(self) -> None:
        """0. Sequences whose KV arrived by transfer join the batch."""
        running, waiting = self.running, self.waiting
        while waiting and waiting[0].kv >= waiting[0].target and len(running) < self.max_batch:
            s = waiting[0]
            if not self._alloc(s, 0):
                break
            waiting.popleft()
            s.active = True
            s.admitted = self.admitted
            self.admitted += 1
            running.append(s)
            if s.seg_start < 0:
                s.seg_start = len(self.times)  # its first emission: the iteration being planned
            self._join(s)

    def _reserve_decode(self) -> tuple[int, int]:
        """1. One token per decoding sequence: blocks for new tokens (evict cached prefixes, then
        preempt the newest sequences when short).  How many decode, and their context.  The
        blocks come out of ``free`` now; each sequence counts its own when brought up to date."""
        bt, c = self.bt, self.clock
        if not self.ndec:
            return 0, 0
        need = self.dec_mod[-c % bt]  # decoding sequences whose next token opens a new block
        ctx = self.dec_sum + self.ndec * c
        if self.free < need:
            running = self.running
            while self.free < need:
                if self._evict_one():
                    continue
                victim = running.pop()
                if victim.decoding:
                    self._sync(victim)
                    ctx -= victim.kv
                    if victim.kv % bt == 0:
                        need -= 1
                self._preempt(victim)
        self.free -= need
        return self.ndec, ctx

    def _plan_prefill_chunk(self, decoding: int) -> tuple[list[tuple[_Seq, int]], int, float]:
        """2. The prompt tokens: in-progress prefills, then waiting requests (FCFS), in what the
        iteration's token budget (serving.chunk_tokens) leaves after its ``decoding`` sequences."""
        running, waiting = self.running, self.waiting
        budget = self.chunk_tokens - decoding
        pieces: list[tuple[_Seq, int]] = []
        ntot = 0
        cw = 0.0
        for s in self.prefilling:
            n = s.target - s.kv
            if self.chunked:
                n = min(n, budget - ntot)
            elif pieces and ntot + n > budget:
                break
            if n <= 0 or not self._alloc(s, n):
                break
            pieces.append((s, n))
            ntot += n
            cw += n * s.kv
        taken = self.recv_t
        while waiting and len(running) < self.max_batch:
            s = waiting[0]
            if s.kv >= s.target or (self.chunked and ntot >= budget) or s.arrival_s > taken:
                break
            self._attach(s)
            n = s.target - s.kv
            if self.chunked:
                n = min(n, budget - ntot)
            elif pieces and ntot + n > budget:
                self._detach(s)
                break
            if not self._alloc(s, n):
                self._detach(s)
                break
            waiting.popleft()
            s.active = True
            s.admitted = self.admitted
            self.admitted += 1
            running.append(s)
            self.prefilling.append(s)
            if s.hit < 0:
                s.hit = s.shared
            pieces.append((s, n))
            ntot += n
            cw += n * s.kv
        return pieces, ntot, cw

    def apply(self, t: float, sim: _Host) -> None:
        """End the planned iteration at time ``t``."""
        k = self._apply_run() if self.seg_t else 1
        idx = len(self.times)
        self.times.append(t)
        self._take_in_tick(k, t)
        self.clock = c = self.clock + k
        fin = self.dec_fin
        done = self._finishing() if fin and fin[0][0] <= c else []
        if not done and not self._pieces:  # decode only, nothing finishing
            self.batch_series.append(self._ndec)
            self.free_series.append(self.free)
            self._ndec = 0
            return
        self._settle(t, sim, idx, done)

    def _settle(self, t: float, sim: _Host, idx: int, done: list[_Seq]) -> None:
        """End iteration ``idx`` at ``t``: decoders in ``done`` reached their output; the
        prefill pieces land (a completed prefill samples its first token)."""
        for s in done:
            self._leave(s)
        handoff: list[_Seq] = []
        completed = False
        for s, n in self._pieces:
            s.kv += n
            if s.kv < s.target:
                continue
            completed = True
            s.generated += 1  # the prefill's last position samples the next token
            if self.speculative:
                s.counts.append(1)
            # NaN: first token (a prefill pool's reaches the client with the hand-off: engine)
            if s.first_s != s.first_s and not (self.role == "prefill" and s.generated < s.out):
                s.first_s = t
                # delivered no sooner than the hosts' floor after this iteration began (StepTimes.host_floor_s)
                s.held_s = max(self.host_floor_s - self._plan_dt, 0.0)
            if s.seg_start < 0:
                s.seg_start = idx
            if s.req.prefix_key is not None and s.req.prefix_tokens:
                self._upsert(s, s.req.prefix_tokens)
            if s.generated >= s.out:
                done.append(s)
            elif self.role == "prefill":
                handoff.append(s)
            else:
                self._join(s)
        if completed:
            self.prefilling = [s for s in self.prefilling if s.kv < s.target]
        for s in done:
            s.segs.append((self.times, s.seg_start, idx))
            s.seg_start = -1
            s.finish_s = t
            if s.req.cache_on_finish:
                self._upsert(s, s.kv)
            self._release(s)
            s.active = False
        for s in handoff:
            s.segs.append((self.times, s.seg_start, idx))
            s.seg_start = -1
            if s.req.cache_on_finish:
                self._upsert(s, s.kv)
            self._release(s)
            s.active = False
        if done or handoff:
            self.running = [s for s in self.running if s.active]
        self.batch_series.append(self._ndec)
        self.free_series.append(self.free)
        self._ndec, self._pieces = 0, []
        for s in done:
            sim.finished(s, t)
        for s in handoff:
            sim.transfer(s, t)
