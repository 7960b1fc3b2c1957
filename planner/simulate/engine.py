"""The iteration-level serving simulator: continuous batching on the core's step times.

Each replica runs iterations back to back while it has work.  One iteration:

1. sequences whose KV arrived by transfer (disaggregated decode pool) are admitted;
2. every decoding sequence gets one token; a sequence crossing a block boundary
   takes a new KV block (LRU-evicting unreferenced cached prefixes, else
   preempting the most recently admitted sequence: preemption by recompute);
3. one prefill chunk of up to ``serving.chunk_tokens`` tokens goes to in-progress
   prefills, then to waiting requests (FCFS) while blocks and the batch cap allow;
4. its time is the seeds' hybrid iteration (additive, as ``techniques.chunked_prefill``):

       iteration_s = decode_step(B, mean live context).step_s + prefill_step(chunk tokens).time_s

Step times come from :mod:`planner.physics.step` with the scenario's resolved efficiencies.
KV lives in paged blocks of ``serving.block_tokens``; the capacity is the plan's KV
budget / KV bytes per token per GPU.  Requests sharing a ``prefix_key`` reuse cached
full blocks (prefix sharing).  Deterministic for a given seed.  Speculative
decoding is not simulated (one token per sequence per iteration).
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.errors import InsufficientMemoryError, ScenarioError
from planner.physics.link import kv_link_bytes_per_s, kv_transfer_exposed_s
from planner.physics.step import decode_step, prefill_step
from planner.physics.techniques import kv_transfer_s
from planner.simulate.arrivals import Request, generate_requests
from planner.simulate.options import MAX_SIM_REQUESTS, SimOptions
from planner.simulate.router import ReplicaLoad, choose_replica
from planner.sizing.plan import plan_resolved
from planner.spec.context import Resolved, resolve
from planner.spec.defaults import DEFAULT_MAX_BATCH
from planner.spec.scenario import Scenario

__all__ = ["CACHED_GRID_TOKENS", "CONTEXT_GRID_TOKENS", "KvBlocks", "SimRun", "StepTimes", "simulate"]

# Decode step times are tabulated per batch size on a context grid of this pitch
# and interpolated linearly (the step time is piecewise linear in context).
CONTEXT_GRID_TOKENS = 64
# Prefill chunk times are tabulated per cached-context bucket of this pitch, over
# every chunk size up to serving.chunk_tokens (larger prefills are memoized exactly).
CACHED_GRID_TOKENS = 16


class StepTimes:
    """Cached calls into planner.physics.step for one resolved scenario."""

    def __init__(self, resolved: Resolved, *, max_context_tokens: int, chunk_tokens: int) -> None:
        self._kw = resolved.step_kwargs()
        self._chunk = chunk_tokens
        self._rows: dict[int, tuple[list[float], list[float]]] = {}
        n = max_context_tokens // CONTEXT_GRID_TOKENS + 3
        self._grid = np.arange(n, dtype=float) * CONTEXT_GRID_TOKENS
        self._decode: dict[int, list[float]] = {}
        self._prefill: dict[tuple[int, int], tuple[float, float]] = {}

    def decode_s(self, batch_size: int, context_tokens: float) -> float:
        """decode_step(batch, context).step_s, interpolated on the context grid."""
        row = self._decode.get(batch_size)
        if row is None:
            st = decode_step(batch_size=batch_size, context_tokens=self._grid, **self._kw)
            row = np.asarray(st.step_s, dtype=float).tolist()
            self._decode[batch_size] = row
        x = context_tokens / CONTEXT_GRID_TOKENS
        i = int(x)
        f = x - i
        return row[i] + f * (row[i + 1] - row[i]) if f else row[i]

    def prefill_s(self, tokens: int, cached_tokens: float, *, riding: bool = False) -> float:
        """prefill_step(tokens new after cached_tokens).time_s (cached rounded to the grid);
        ``riding``: its marginal cost inside a decode iteration (PrefillStep.marginal_s)."""
        c = int(round(cached_tokens / CACHED_GRID_TOKENS)) * CACHED_GRID_TOKENS
        if tokens <= self._chunk:
            rows = self._rows.get(c)
            if rows is None:
                n = np.arange(self._chunk + 1, dtype=float)
                st = prefill_step(tokens=n + c, cached_tokens=c, **self._kw)
                rows = (np.asarray(st.time_s, dtype=float).tolist(), np.asarray(st.marginal_s, dtype=float).tolist())
                self._rows[c] = rows
            return rows[1][tokens] if riding else rows[0][tokens]
        key = (tokens, c)
        pair = self._prefill.get(key)
        if pair is None:
            st = prefill_step(tokens=tokens + c, cached_tokens=c, **self._kw)
            pair = (float(st.time_s), float(st.marginal_s))
            self._prefill[key] = pair
        return pair[1] if riding else pair[0]


@dataclass(slots=True)
class _Entry:
    tokens: int
    blocks: int
    refs: int


class _Seq:
    __slots__ = ("idx", "req", "arrival_s", "target", "kv", "shared", "entry", "blocks", "generated",
                 "first_s", "finish_s", "segs", "seg_start", "hit", "preemptions", "active")

    def __init__(self, idx: int, req: Request, arrival_s: float) -> None:
        self.idx = idx
        self.req = req
        self.arrival_s = arrival_s
        self.target = req.prompt_tokens  # tokens to hold in KV before decoding
        self.kv = 0  # tokens whose KV this replica holds
        self.shared = 0  # of which from a cached prefix entry
        self.entry: _Entry | None = None
        self.blocks = 0  # private blocks
        self.generated = 0
        self.first_s = math.nan
        self.finish_s = math.nan
        self.segs: list[tuple[list[float], int, int]] = []  # runs of emissions: (iteration times, first, last)
        self.seg_start = -1
        self.hit = -1
        self.preemptions = 0
        self.active = False


class _Replica:
    def __init__(self, *, role: str, capacity_blocks: int, block_tokens: int, max_batch: int,
                 chunk_tokens: int, chunked: bool, steps: StepTimes) -> None:
        self.role = role
        self.capacity = capacity_blocks
        self.free = capacity_blocks
        self.bt = block_tokens
        self.max_batch = max_batch
        self.chunk_tokens = chunk_tokens
        self.chunked = chunked
        self.steps = steps
        self.waiting: deque[_Seq] = deque()
        self.running: list[_Seq] = []
        self.entries: OrderedDict[str, _Entry] = OrderedDict()
        self.times: list[float] = []
        self.batch_series: list[int] = []
        self.kv_series: list[float] = []
        self.busy = False
        self.preemptions = 0
        self._decode: list[_Seq] = []
        self._pieces: list[tuple[_Seq, int]] = []

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
        if s.seg_start >= 0:
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
    def load(self, req: Request) -> ReplicaLoad:
        pending = sum(s.target - s.kv for s in self.waiting) + sum(
            s.target - s.kv for s in self.running if s.kv < s.target)
        return ReplicaLoad(in_flight=len(self.waiting) + len(self.running), pending_tokens=pending,
                           kv_utilization=1.0 - self.free / self.capacity,
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
        bt, running, waiting = self.bt, self.running, self.waiting
        # 0. sequences whose KV arrived by transfer
        while waiting and waiting[0].kv >= waiting[0].target and len(running) < self.max_batch:
            s = waiting[0]
            if not self._alloc(s, 0):
                break
            waiting.popleft()
            s.active = True
            running.append(s)
        # 1. one token for every decoding sequence
        decode: list[_Seq] = []
        grow: list[_Seq] = []  # decoding sequences whose next token opens a new block
        ctx = 0
        for s in running:
            if s.kv >= s.target:
                decode.append(s)
                ctx += s.kv
                if s.kv % bt == 0:
                    grow.append(s)
        need = len(grow)
        if self.free < need:
            while self.free < need:
                if self._evict_one():
                    continue
                victim = running.pop()
                if victim.kv >= victim.target:
                    ctx -= victim.kv
                    if victim.kv % bt == 0:
                        need -= 1
                self._preempt(victim)
            decode = [s for s in decode if s.active]
            grow = [s for s in grow if s.active]
        self.free -= need
        for s in grow:
            s.blocks += 1
        # 2. one chunk of prefill: in-progress prefills, then waiting requests (FCFS)
        budget = self.chunk_tokens
        pieces: list[tuple[_Seq, int]] = []
        ntot = 0
        cw = 0.0
        for s in running:
            if s.kv >= s.target:
                continue
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
        while waiting and len(running) < self.max_batch:
            s = waiting[0]
            if s.kv >= s.target or (self.chunked and ntot >= budget):
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
            running.append(s)
            if s.hit < 0:
                s.hit = s.shared
            pieces.append((s, n))
            ntot += n
            cw += n * s.kv
        dt = 0.0
        if decode:
            dt += self.steps.decode_s(len(decode), ctx / len(decode) + 1.0)
        if pieces:
            dt += self.steps.prefill_s(ntot, cw / ntot, riding=bool(decode))
        self._decode, self._pieces = decode, pieces
        return dt

    def apply(self, t: float, sim: _Sim) -> None:
        """End the planned iteration at time ``t``."""
        idx = len(self.times)
        self.times.append(t)
        done: list[_Seq] = []
        for s in self._decode:
            s.kv += 1
            s.generated += 1
            if s.seg_start < 0:
                s.seg_start = idx
            if s.generated >= s.req.output_tokens:
                done.append(s)
        handoff: list[_Seq] = []
        for s, n in self._pieces:
            s.kv += n
            if s.kv < s.target:
                continue
            s.generated += 1  # the prefill's last position samples the next token
            if s.first_s != s.first_s:  # NaN: first token
                s.first_s = t
            if s.seg_start < 0:
                s.seg_start = idx
            if s.req.prefix_key is not None and s.req.prefix_tokens:
                self._upsert(s, s.req.prefix_tokens)
            if s.generated >= s.req.output_tokens:
                done.append(s)
            elif self.role == "prefill":
                handoff.append(s)
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
        self.batch_series.append(len(self._decode))
        self.kv_series.append(1.0 - self.free / self.capacity)
        self._decode, self._pieces = [], []
        for s in done:
            sim.finished(s, t)
        for s in handoff:
            sim.transfer(s, t)


@dataclass(frozen=True)
class KvBlocks:
    """One replica's KV blocks when the run ends: after every request finished, nothing is
    referenced and free + cached = capacity (blocks are conserved through preemption and sharing)."""

    capacity: int
    free: int
    cached: int  # held by prefix-cache entries no sequence references
    referenced: int  # held by referenced prefix entries or by sequences' private blocks


@dataclass(frozen=True)
class SimRun:
    """One simulated run: per-request arrays (seconds, tokens) and run totals."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    hit_tokens: np.ndarray
    tpot_s: np.ndarray  # per request: mean inter-token latency, (finish − first token) / (outputs − 1)
    itl_s: np.ndarray  # every inter-token gap, request by request (outputs − 1 each, in request order)
    preemptions: int
    mean_in_flight: float  # time-average of requests in the system, integrated by the engine
    duration_s: float  # first arrival to last finish
    iterations: int
    kv_capacity_tokens: int
    timeline: tuple[dict[str, Any], ...]  # per replica: t_s, batch_size, kv_utilization (downsampled)
    kv_blocks: tuple[KvBlocks, ...] = ()  # per replica, at the end of the run

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    def itl_series(self, index: int) -> np.ndarray:
        """Request ``index``'s inter-token gaps, in order."""
        counts = np.maximum(self.output_tokens - 1, 0)
        start = int(counts[:index].sum())
        return self.itl_s[start:start + int(counts[index])]

    @property
    def ttft_s(self) -> np.ndarray:
        return np.asarray(self.first_token_s - self.arrival_s, dtype=float)

    @property
    def e2e_s(self) -> np.ndarray:
        return np.asarray(self.finish_s - self.arrival_s, dtype=float)


_ARRIVE, _ITER, _TRANSFER = 0, 1, 2


class _Sim:
    def __init__(self, *, scenario: Scenario, options: SimOptions, requests: tuple[Request, ...]) -> None:
        r = resolve(scenario)
        p = plan_resolved(r)
        s = scenario.serving
        bt = s.block_tokens
        if options.kv_capacity_tokens is not None:
            cap_tokens = options.kv_capacity_tokens
        else:
            kg = p.memory.kv_bytes_per_token_per_gpu
            cap_tokens = int(max(p.memory.kv_budget_bytes, 0.0) // kg) * scenario.parallel.ep if kg > 0 else 0
        blocks = cap_tokens // bt
        longest = max(q.prompt_tokens + q.output_tokens for q in requests)
        if blocks * bt < longest:
            raise InsufficientMemoryError(
                f"KV budget holds {blocks * bt} tokens per replica but a request needs {longest}; "
                "raise serving.memory_utilization, parallel.tp or kv_capacity_tokens, or shorten the lengths")
        self.options = options
        self.requests = requests
        self.kv_capacity_tokens = blocks * bt
        # KV transfer as the plan has it (physics.link): each GPU ships its shard over
        # its own link, layer by layer behind the prefill.
        self.kv_bytes_per_token = p.memory.kv_bytes_per_token_per_gpu * scenario.parallel.pp
        self.link_bytes_per_s = options.kv_link_bytes_per_s or kv_link_bytes_per_s(
            r.gpu, link=scenario.fleet.link, link_bytes_per_s=scenario.fleet.link_bytes_per_s)
        self.setup_s = (options.kv_transfer_setup_s if options.kv_transfer_setup_s is not None
                        else scenario.fleet.kv_transfer_setup_s)
        self.layers = r.model.layers
        steps = self.steps = StepTimes(r, max_context_tokens=longest + 1, chunk_tokens=s.chunk_tokens)
        max_batch = options.max_batch or s.batch_size or DEFAULT_MAX_BATCH

        def rep(role: str) -> _Replica:
            return _Replica(role=role, capacity_blocks=blocks, block_tokens=bt, max_batch=max_batch,
                            chunk_tokens=s.chunk_tokens, chunked=options.chunked_prefill, steps=steps)

        if s.mode == "disaggregated":
            self.front = [rep("prefill") for _ in range(options.prefill_replicas)]
            self.back = [rep("decode") for _ in range(options.decode_replicas)]
        else:
            self.front = [rep("colocated") for _ in range(options.replicas)]
            self.back = []
        self.replicas = self.front + self.back
        self.seqs: list[_Seq | None] = [None] * len(requests)
        self.children: dict[int, list[int]] = {}
        for i, q in enumerate(requests):
            if q.parent >= 0:
                if not 0 <= q.parent < i:
                    raise ScenarioError(f"requests[{i}].parent: must name an earlier request, got {q.parent}")
                self.children.setdefault(q.parent, []).append(i)
        self.roots = [i for i, q in enumerate(requests) if q.parent < 0]
        self.heap: list[tuple[float, int, int, int]] = []
        self.order = 0
        self.routed = 0
        self.in_flight = 0
        self.area = 0.0
        self.t_last = 0.0
        self.next_root = 0
        self.pending_transfer: dict[int, _Seq] = {}

    def push(self, t: float, kind: int, arg: int) -> None:
        self.order += 1
        heapq.heappush(self.heap, (t, self.order, kind, arg))

    def _count(self, t: float, delta: int) -> None:
        self.area += self.in_flight * (t - self.t_last)
        self.t_last = t
        self.in_flight += delta

    def _kick(self, ri: int, t: float) -> None:
        rep = self.replicas[ri]
        if rep.busy:
            return
        dt = rep.plan()
        if dt > 0:
            rep.busy = True
            self.push(t + dt, _ITER, ri)

    def _route(self, pool: list[_Replica], req: Request, policy: str) -> int:
        if len(pool) == 1:
            return 0
        o = self.options
        loads = [rp.load(req) for rp in pool]
        self.routed += 1
        return choose_replica(policy=policy, loads=loads, prompt_tokens=req.prompt_tokens, counter=self.routed - 1,
                              w_affinity=o.w_affinity, w_queue=o.w_queue, w_kv=o.w_kv,
                              queue_norm_tokens=o.queue_norm_tokens)

    def finished(self, s: _Seq, t: float) -> None:
        self._count(t, -1)
        for c in self.children.get(s.idx, ()):
            self.push(t + self.requests[c].think_s, _ARRIVE, c)
        if self.options.concurrency is not None and self.next_root < len(self.roots):
            self.push(t, _ARRIVE, self.roots[self.next_root])
            self.next_root += 1

    def transfer(self, s: _Seq, t: float) -> None:
        full = float(kv_transfer_s(kv_bytes=s.kv * self.kv_bytes_per_token, link_bytes_per_s=self.link_bytes_per_s,
                                   efficiency=self.options.kv_link_efficiency))
        # Layer by layer behind the prefill (its dedicated time stands in for its chunks').
        dt = float(kv_transfer_exposed_s(transfer_s=full, prefill_s=self.steps.prefill_s(s.kv, 0.0),
                                         layers=self.layers, setup_s=self.setup_s))
        self.pending_transfer[s.idx] = s
        self.push(t + dt, _TRANSFER, s.idx)

    def run(self) -> None:
        o = self.options
        if o.concurrency is not None:
            for _ in range(min(o.concurrency, len(self.roots))):
                self.push(0.0, _ARRIVE, self.roots[self.next_root])
                self.next_root += 1
        else:
            for i in self.roots:
                self.push(self.requests[i].arrival_s, _ARRIVE, i)
        nf = len(self.front)
        while self.heap:
            t, _, kind, arg = heapq.heappop(self.heap)
            if kind == _ITER:
                rep = self.replicas[arg]
                rep.busy = False
                rep.apply(t, self)
                self._kick(arg, t)
            elif kind == _ARRIVE:
                req = self.requests[arg]
                s = _Seq(arg, req, t)
                self.seqs[arg] = s
                self._count(t, +1)
                ri = self._route(self.front, req, o.router)
                self.front[ri].waiting.append(s)
                self._kick(ri, t)
            else:
                s = self.pending_transfer.pop(arg)
                bi = self._route(self.back, s.req, "least_loaded")
                self.back[bi].waiting.append(s)
                self._kick(nf + bi, t)


def _gaps(s: _Seq) -> np.ndarray:
    times = np.concatenate([np.asarray(tl[a:b + 1]) for tl, a, b in s.segs]) if s.segs else np.zeros(0)
    return np.diff(times)


def _downsample(rep: _Replica, points: int) -> dict[str, Any]:
    n = len(rep.times)
    idx = np.unique(np.linspace(0, n - 1, min(points, n)).astype(int)) if n else np.zeros(0, int)
    t = np.asarray(rep.times)
    return {"role": rep.role,
            "t_s": t[idx].tolist() if n else [],
            "batch_size": np.asarray(rep.batch_series)[idx].tolist() if n else [],
            "kv_utilization": np.asarray(rep.kv_series)[idx].tolist() if n else []}


def _kv_blocks(rep: _Replica) -> KvBlocks:
    held = sum(q.blocks for q in (*rep.running, *rep.waiting))
    return KvBlocks(capacity=rep.capacity, free=rep.free,
                    cached=sum(e.blocks for e in rep.entries.values() if e.refs == 0),
                    referenced=held + sum(e.blocks for e in rep.entries.values() if e.refs > 0))


def simulate(scenario: Scenario, options: SimOptions | None = None,
             requests: tuple[Request, ...] | None = None) -> SimRun:
    """Simulate serving ``requests`` (default: generated from the scenario and options)."""
    options = options or SimOptions()
    if requests is not None and len(requests) > MAX_SIM_REQUESTS:
        raise ScenarioError(f"requests: {len(requests):,} requests is over the limit of {MAX_SIM_REQUESTS:,}")
    reqs = tuple(requests) if requests is not None else generate_requests(scenario, options)
    if not reqs:
        raise ScenarioError("requests: empty; give at least one request")
    sim = _Sim(scenario=scenario, options=options, requests=reqs)
    sim.run()
    seqs = [s for s in sim.seqs if s is not None]
    if len(seqs) != len(reqs) or any(s.finish_s != s.finish_s for s in seqs):
        raise ScenarioError("simulation did not finish every request")  # a scheduler bug, never expected
    arrival = np.array([s.arrival_s for s in seqs])
    first = np.array([s.first_s for s in seqs])
    finish = np.array([s.finish_s for s in seqs])
    out = np.array([s.req.output_tokens for s in seqs])
    tpot = np.where(out > 1, (finish - first) / np.maximum(out - 1, 1), 0.0)
    gaps = [_gaps(s) for s in seqs]
    itl = np.concatenate(gaps) if gaps else np.zeros(0)
    t0, t1 = float(arrival.min()), float(finish.max())
    duration = t1 - t0
    return SimRun(
        arrival_s=arrival,
        first_token_s=first,
        finish_s=finish,
        prompt_tokens=np.array([s.req.prompt_tokens for s in seqs]),
        output_tokens=out,
        hit_tokens=np.array([max(s.hit, 0) for s in seqs]),
        tpot_s=tpot,
        itl_s=itl,
        preemptions=sum(rp.preemptions for rp in sim.replicas),
        mean_in_flight=sim.area / duration if duration > 0 else float(sim.in_flight),
        duration_s=duration,
        iterations=sum(len(rp.times) for rp in sim.replicas),
        kv_capacity_tokens=sim.kv_capacity_tokens,
        timeline=tuple(_downsample(rp, options.timeline_points) for rp in sim.replicas),
        kv_blocks=tuple(_kv_blocks(rp) for rp in sim.replicas),
    )
