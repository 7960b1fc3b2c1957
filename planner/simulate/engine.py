"""The iteration-level serving simulator: continuous batching on the core's step times.

Each replica runs iterations back to back while it has work.  One iteration:

1. sequences whose KV arrived by transfer (disaggregated decode pool) are admitted;
2. every decoding sequence gets one token; a sequence crossing a block boundary
   takes a new KV block (LRU-evicting unreferenced cached prefixes, else
   preempting the most recently admitted sequence: preemption by recompute);
3. the iteration's token budget ``serving.chunk_tokens`` (vLLM max_num_batched_tokens) holds
   the B decodes first; the T − B tokens left go to in-progress prefills, then to waiting
   requests (FCFS: several whole prompts, or a chunk of a long one) while blocks and the
   batch cap allow;
4. its time is the seeds' hybrid iteration (additive, as ``techniques.chunked_prefill``):

       iteration_s = decode_step(B, mean live context).step_s + prefill_step(prompt tokens).marginal_s

Step times come from :mod:`planner.physics.step` with the scenario's resolved efficiencies.
KV lives in paged blocks of ``serving.block_tokens``; the capacity is the plan's KV
budget / KV bytes per token per GPU.  Requests sharing a ``prefix_key`` reuse cached
full blocks (prefix sharing).  Deterministic for a given seed.  With speculative
decoding each decode iteration is a verify pass at the planner's speculative cycle time
and each sequence emits a burst of accepted tokens + 1 (:mod:`planner.simulate.speculation`).

Speed without changing a result (tests/test_simulate_speed_equivalence.py holds runs recorded
before these changes; same seed, bit-identical run):

* token clock (:mod:`planner.simulate.decoderuns`): decoding sequences are not touched each
  iteration; a replica keeps their context sum, a histogram of kv mod block_tokens and a heap
  of finish clocks, so an iteration costs O(prefill pieces + finishes), not O(batch);
* runs: while a replica only decodes (nothing waiting, blocks free for every growth) its
  iterations up to the next finish are planned as one event (the same step times summed in
  the same order), and an arrival routed to it cuts the run at the iteration then in progress;
* replicas alone (:mod:`planner.simulate.alone`): round robin (or one replica), colocated, open
  loop, no chat turns, no replica joining: each replica runs on its own arrivals without the
  shared event queue, a run planned up to its next arrival instead of cut;
* compiled (:mod:`planner.simulate.kernel`, numba): replicas alone (no chat turns, at most
  MAX_KERNEL_PREFIX_KEYS prefixes) run the same scheduler as compiled code, one iteration at a
  time, and the gaps are gathered compiled too (tests/test_simulate_kernel.py holds it to the
  Python replica);
* inter-token gaps (:mod:`planner.simulate.simresult`): slices of each replica's
  np.diff(iteration times), copied into place;
* the cyclic garbage collector is paused while a run builds its millions of objects.
"""
from __future__ import annotations

import gc
import heapq
import math
from typing import TYPE_CHECKING

from planner.errors import InsufficientMemoryError, ScenarioError
from planner.physics.layout import attention_dp
from planner.physics.link import kv_link_bytes_per_s, kv_transfer_exposed_s
from planner.physics.techniques import kv_transfer_s
from planner.physics.terms import term
from planner.simulate.alone import alone_order, run_alone
from planner.simulate.arrivals import Request, generate_requests
from planner.simulate.options import MAX_SIM_REQUESTS, SimOptions, check_sim_size
from planner.simulate.pools import prefill_pool
from planner.simulate.replica import _Replica, _Seq
from planner.simulate.router import choose_replica
from planner.simulate.simresult import _result
from planner.simulate.simrun import KvBlocks, SimRun
from planner.simulate.speculation import _SpecReplica, spec_draws
from planner.simulate.steptimes import StepTimes
from planner.sizing.plan import plan_resolved
from planner.spec.context import kv_transfer_setup_s, resolve
from planner.spec.defaults import DEFAULT_MAX_BATCH
from planner.spec.scenario import Scenario

if TYPE_CHECKING:
    from planner.simulate.kernel import Compiled

__all__ = ["KvBlocks", "SimRun", "simulate"]


_ARRIVE, _ITER, _TRANSFER, _ADMIT = 0, 1, 2, 3


class _Sim:
    def __init__(self, *, scenario: Scenario, options: SimOptions, requests: tuple[Request, ...]) -> None:
        r = resolve(scenario)
        p = plan_resolved(r)
        s = scenario.serving
        bt = s.block_tokens
        longest = max(q.prompt_tokens + q.output_tokens for q in requests)
        # Pools with their own GPU and layout (planner.simulate.pools): the decode pool is the plan's replica.
        own = prefill_pool(r, longest_prompt=max(q.prompt_tokens for q in requests), max_context_tokens=longest + 1,
                           block_tokens=bt, link_bytes_per_s=options.kv_link_bytes_per_s)
        rd = own.decode if own is not None else r
        if options.kv_capacity_tokens is not None:
            cap_tokens = options.kv_capacity_tokens
        else:
            kg = p.memory.kv_bytes_per_token_per_gpu + p.memory.draft_kv_bytes_per_token_per_gpu  # target + drafter
            # per GPU × the attention ranks (data-parallel attention: each of TP ranks its own KV)
            cap_tokens = int(max(p.memory.kv_budget_bytes, 0.0) // kg) * rd.scenario.parallel.attention_dp if kg > 0 else 0
        blocks = cap_tokens // bt
        if blocks * bt < longest:
            raise InsufficientMemoryError(
                f"KV budget holds {blocks * bt} tokens per replica but a request needs {longest}; "
                "raise serving.memory_utilization, parallel.tp or kv_capacity_tokens, or shorten the lengths")
        self.options = options
        self.requests = requests
        self.kv_capacity_tokens = blocks * bt
        # KV transfer as the plan has it (physics.link, physics.handoff): each GPU ships its shard
        # over its own link, layer by layer behind the prefill.
        self.handoff_factor = own.handoff_factor if own is not None else 1.0
        self.kv_bytes_per_token = p.memory.kv_bytes_per_token_per_gpu * rd.scenario.parallel.pp
        self.link_bytes_per_s = options.kv_link_bytes_per_s or kv_link_bytes_per_s(
            rd.gpu, link=scenario.fleet.link, link_bytes_per_s=scenario.fleet.link_bytes_per_s)
        self.setup_s = (options.kv_transfer_setup_s if options.kv_transfer_setup_s is not None
                        else kv_transfer_setup_s(scenario))
        self.layers = r.model.layers
        self.longest = longest
        steps = self.steps = StepTimes(rd, max_context_tokens=longest + 1, chunk_tokens=s.chunk_tokens)
        self.prefill_steps = own.steps if own is not None else steps
        max_batch = options.max_batch or s.batch_size or DEFAULT_MAX_BATCH

        sp = scenario.speculative
        drafter = steps.drafter  # the plan's acceptance a_1 … a_K, per method
        self.draws = (spec_draws(draft_tokens=sp.draft_tokens, acceptance=drafter.acceptance, seed=options.seed)
                      if drafter is not None else None)

        # the scheduler's take-in: SGLang's receive interval, or TensorRT-LLM's attention-DP balance
        # (its timeout counts the same way; each of the ranks holding a new request takes them early)
        balance = s.attention_dp_balance_iters if s.mode == "colocated" else 0
        recv = balance if balance > 0 else s.scheduler_recv_interval
        ranks = int(attention_dp(scenario.parallel.tp, scenario.parallel.dp_attention)) if balance > 0 else 0

        def rep(role: str) -> _Replica:
            nb, st = (own.blocks, own.steps) if own is not None and role == "prefill" else (blocks, steps)
            if self.draws is not None:
                return _SpecReplica(draws=self.draws, role=role, capacity_blocks=nb, block_tokens=bt,
                                    max_batch=max_batch, chunk_tokens=s.chunk_tokens, chunked=options.chunked_prefill,
                                    steps=st, recv_interval=recv, balance_ranks=ranks)
            return _Replica(role=role, capacity_blocks=nb, block_tokens=bt, max_batch=max_batch,
                            chunk_tokens=s.chunk_tokens, chunked=options.chunked_prefill, steps=st,
                            recv_interval=recv, balance_ranks=ranks)

        if s.mode == "disaggregated":
            self.front = [rep("prefill") for _ in range(options.prefill_replicas)]
            self.back = [rep("decode") for _ in range(options.decode_replicas)]
        else:
            self.front = [rep("colocated") for _ in range(options.replicas)]
            self.back = []
        self.replicas = self.front + self.back
        for pool, joins in ((self.front, options.join_s), (self.back, options.decode_join_s)):
            for rp, j in zip(pool, joins, strict=False):
                rp.join_s = j
        self.joining = any(rp.join_s > 0 for rp in self.replicas)
        self.seqs: list[_Seq | None] = [None] * len(requests)
        self.children: dict[int, list[int]] = {}
        for i, q in enumerate(requests):
            if q.parent >= 0:
                if not 0 <= q.parent < i:
                    raise ScenarioError(f"requests[{i}].parent: must name an earlier request, got {q.parent}")
                self.children.setdefault(q.parent, []).append(i)
        self.roots = [i for i, q in enumerate(requests) if q.parent < 0]
        self.heap: list[tuple[float, int, int, int, float]] = []
        self.order = 0
        self.routed = 0
        self.in_flight = 0
        self.area = 0.0
        self.t_last = 0.0
        self.next_root = 0
        self.pending_transfer: dict[int, _Seq] = {}
        # the decode worker's take-in after the KV arrives: k of its iterations at its batch, as the plan
        # has it (planner.physics.handoff.decode_admission_s)
        self.admit_iterations = term("disagg_handoff_iterations")
        self.admitting: dict[int, tuple[_Seq, int]] = {}
        self.now, self.now_pushed = 0.0, -math.inf  # the event being handled: its time, when it was queued
        self.compiled: Compiled | None = None  # the replicas' compiled runs (run_compiled), if taken

    def push(self, t: float, kind: int, arg: int, pushed: float = -math.inf) -> None:
        """Queue an event at ``t``; ``pushed``: when it was queued (-inf: before the run)."""
        self.order += 1
        heapq.heappush(self.heap, (t, self.order, kind, arg, pushed))
        if kind == _ITER:
            self.replicas[arg].event = self.order

    def _count(self, t: float, delta: int) -> None:
        self.area += self.in_flight * (t - self.t_last)
        self.t_last = t
        self.in_flight += delta

    def _kick(self, ri: int, t: float) -> None:
        rep = self.replicas[ri]
        if rep.busy:
            if rep.seg_t:  # a run of decode iterations: end it with the one in progress
                end = rep.cut(t, self.now_pushed)
                if end > 0:
                    self.push(end, _ITER, ri, t)
            return
        end = rep.plan_run(t)
        if end > 0:
            rep.busy = True
            self.push(end, _ITER, ri, t)
            return
        dt = rep.plan()
        if dt > 0:
            rep.busy = True
            self.push(t + dt, _ITER, ri, t)

    def _route(self, pool: list[_Replica], req: Request, policy: str, t: float) -> int:
        if len(pool) == 1:
            return 0
        if self.joining:  # only replicas that have joined (else the first to join)
            live = [i for i, rp in enumerate(pool) if rp.join_s <= t]
            idx = live or [min(range(len(pool)), key=lambda i: pool[i].join_s)]
            if len(idx) < len(pool):
                return idx[self._choose([pool[i] for i in idx], req, policy)]
        return self._choose(pool, req, policy)

    def _choose(self, pool: list[_Replica], req: Request, policy: str) -> int:
        if len(pool) == 1:
            return 0
        o = self.options
        self.routed += 1
        if policy == "round_robin":  # needs no loads (choose_replica: counter % replicas)
            return (self.routed - 1) % len(pool)
        loads = [rp.load(req, self.now, self.now_pushed) for rp in pool]
        return choose_replica(policy=policy, loads=loads, prompt_tokens=req.prompt_tokens, counter=self.routed - 1,
                              w_affinity=o.w_affinity, w_queue=o.w_queue, w_kv=o.w_kv,
                              queue_norm_tokens=o.queue_norm_tokens)

    def finished(self, s: _Seq, t: float) -> None:
        self._count(t, -1)
        for c in self.children.get(s.idx, ()):
            self.push(t + self.requests[c].think_s, _ARRIVE, c, t)
        if self.options.concurrency is not None and self.next_root < len(self.roots):
            self.push(t, _ARRIVE, self.roots[self.next_root], t)
            self.next_root += 1

    def transfer(self, s: _Seq, t: float) -> None:
        full = float(kv_transfer_s(kv_bytes=s.kv * self.kv_bytes_per_token, link_bytes_per_s=self.link_bytes_per_s,
                                   efficiency=self.options.kv_link_efficiency))
        if self.handoff_factor != 1.0:  # the prefill pool's senders bind (planner.physics.handoff)
            full *= self.handoff_factor
        # Layer by layer behind the prefill (its dedicated time stands in for its chunks').
        dt = float(kv_transfer_exposed_s(transfer_s=full, prefill_s=self.prefill_steps.prefill_s(s.kv, 0.0),
                                         layers=self.layers, setup_s=self.setup_s))
        self.pending_transfer[s.idx] = s
        self.push(t + dt, _TRANSFER, s.idx, t)

    def alone(self) -> bool:
        """Whether each replica can run alone (planner.simulate.alone): round robin or one replica,
        colocated, open loop, no chat turns, every replica serving from the start."""
        o = self.options
        return (not self.back and not self.joining and not self.children and o.concurrency is None
                and (o.router == "round_robin" or len(self.front) == 1))

    def compiles(self) -> bool:
        """Whether each replica alone can run as compiled code (planner.simulate.kernel): no
        conversation cached on finish (chat turns), at most MAX_KERNEL_PREFIX_KEYS prefixes."""
        try:
            from planner.simulate.kernel import MAX_KERNEL_PREFIX_KEYS  # numba: loaded when first needed
        except ImportError:  # numba not installed for this Python: the Python replica, same results
            return False
        keys = {q.prefix_key for q in self.requests if q.prefix_key is not None}
        return len(keys) <= MAX_KERNEL_PREFIX_KEYS and not any(q.cache_on_finish for q in self.requests)

    def run(self) -> None:
        o = self.options
        if self.alone():
            n = len(self.front)
            if self.compiles():
                from planner.simulate.kernel import Tables, run_compiled, stream_arrays

                rep = self.front[0]
                tables = Tables(self.steps, max_batch=rep.max_batch, max_context_tokens=self.longest + 1)
                self.compiled = run_compiled(tables, stream_arrays(self.requests), replicas=n,
                                             capacity_blocks=rep.capacity, block_tokens=rep.bt,
                                             max_batch=rep.max_batch, chunk_tokens=rep.chunk_tokens,
                                             chunked=rep.chunked, draws=self.draws,
                                             recv_interval=rep.recv_interval, balance_ranks=rep.balance_ranks)
                return
            order = alone_order(self.requests).tolist()
            for ri, rp in enumerate(self.front):
                run_alone(rp, order[ri::n], self.requests, self.seqs)
            return
        if o.concurrency is not None:
            for _ in range(min(o.concurrency, len(self.roots))):
                self.push(0.0, _ARRIVE, self.roots[self.next_root])
                self.next_root += 1
        else:
            for i in self.roots:
                self.push(self.requests[i].arrival_s, _ARRIVE, i)
        while self.heap:
            t, event, kind, arg, self.now_pushed = heapq.heappop(self.heap)
            self.now = t
            if kind == _ITER:
                rep = self.replicas[arg]
                if event != rep.event:
                    continue  # a run of iterations cut short: its old end
                rep.busy = False
                rep.apply(t, self)
                self._kick(arg, t)
            elif kind == _ARRIVE:
                req = self.requests[arg]
                s = _Seq(arg, req, t)
                self.seqs[arg] = s
                self._count(t, +1)
                ri = self._route(self.front, req, o.router, t)
                self.front[ri].waiting.append(s)
                self._kick(ri, t)
            elif kind == _TRANSFER:
                s = self.pending_transfer.pop(arg)
                bi = self._route(self.back, s.req, "least_loaded", t)
                rep = self.back[bi]
                wait = (self.admit_iterations * self.steps.decode_s(min(len(rep.running) + 1, rep.max_batch), s.kv)
                        if self.admit_iterations > 0 else 0.0)
                if wait > 0.0:
                    self.admitting[s.idx] = (s, bi)
                    self.push(t + wait, _ADMIT, s.idx, t)
                else:
                    self._admit(s, bi, t)
            else:
                self._admit(*self.admitting.pop(arg), t)

    def _admit(self, s: _Seq, bi: int, t: float) -> None:
        """The decode worker takes the request in: its first token reaches the client from the decode
        pool (TTFT = wait + prefill + exposed transfer + the take-in, as the plan has it)."""
        if s.first_s != s.first_s:
            s.first_s = t
        self.back[bi].waiting.append(s)
        self._kick(len(self.front) + bi, t)


def simulate(scenario: Scenario, options: SimOptions | None = None,
             requests: tuple[Request, ...] | None = None) -> SimRun:
    """Simulate serving ``requests`` (default: generated from the scenario and options)."""
    options = options or SimOptions()
    if requests is not None and len(requests) > MAX_SIM_REQUESTS:
        raise ScenarioError(f"requests: {len(requests):,} requests is over the limit of {MAX_SIM_REQUESTS:,}")
    collecting = gc.isenabled()
    gc.disable()  # millions of objects made, none freed in cycles: collection passes would only cost time
    try:
        reqs = tuple(requests) if requests is not None else generate_requests(scenario, options)
        if not reqs:
            raise ScenarioError("requests: empty; give at least one request")
        check_sim_size(prompt_tokens=[q.prompt_tokens for q in reqs], output_tokens=[q.output_tokens for q in reqs],
                       chunk_tokens=scenario.serving.chunk_tokens, chunked=options.chunked_prefill)
        sim = _Sim(scenario=scenario, options=options, requests=reqs)
        sim.run()
        return _result(sim, options)
    finally:
        if collecting:
            gc.enable()
