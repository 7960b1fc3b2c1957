"""The simulator's disaggregated pools with their own GPU and layout (planner.sizing.pools).

The decode pool is the plan's replica (its memory section is the decode pool's); the
prefill pool, when it has its own GPU or layout, runs on its own step times and KV
blocks, and the hand-off waits on the senders where they are slower than the
receivers (:func:`planner.physics.handoff.kv_handoff_factor`), as the plan has it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import InsufficientMemoryError
from planner.physics.handoff import kv_handoff_factor
from planner.physics.link import kv_link_bytes_per_s
from planner.simulate.steptimes import StepTimes
from planner.sizing.operating import replica_memory
from planner.sizing.pools import pool_pair, pools_set
from planner.spec.context import Resolved

__all__ = ["PrefillPool", "prefill_pool"]


@dataclass(frozen=True)
class PrefillPool:
    """The prefill pool's own step times and KV blocks, the decode pool's resolved
    scenario and link, and the hand-off's factor on the receivers' time (1: they bind)."""

    steps: StepTimes
    blocks: int
    decode: Resolved
    decode_link_bytes_per_s: float
    handoff_factor: float


def prefill_pool(r: Resolved, *, longest_prompt: int, max_context_tokens: int, block_tokens: int,
                 link_bytes_per_s: float | None) -> PrefillPool | None:
    """The prefill pool of a disaggregated scenario whose pools have their own GPU or layout
    (None otherwise: one replica shape for both pools, as before).  ``link_bytes_per_s``:
    the options' per-GPU link override (both pools), else each pool's fleet.link."""
    s = r.scenario
    if s.serving.mode != "disaggregated" or not pools_set(s):
        return None
    rp, rd = pool_pair(r)
    q, dq = rp.scenario.parallel, rd.scenario.parallel
    mem = replica_memory(rp, tp=q.tp, pp=q.pp, ep=q.ep)
    kg = float(mem.cache_bytes_per_token_per_gpu)
    cap = int(max(float(mem.kv_budget_bytes), 0.0) // kg) * q.ep if kg > 0 else 0
    blocks = cap // block_tokens
    if blocks * block_tokens < longest_prompt:
        raise InsufficientMemoryError(
            f"prefill pool: KV budget holds {blocks * block_tokens} tokens per replica but a prompt needs "
            f"{longest_prompt}; raise prefill.parallel.tp or choose a larger prefill.gpu")
    f = s.fleet

    def link(x: Resolved) -> float:
        return link_bytes_per_s or kv_link_bytes_per_s(x.gpu, link=f.link, link_bytes_per_s=f.link_bytes_per_s)

    factor = float(kv_handoff_factor(send_gpus=q.tp * q.pp, recv_gpus=dq.tp * dq.pp,
                                     send_link_bytes_per_s=link(rp), recv_link_bytes_per_s=link(rd)))
    return PrefillPool(steps=StepTimes(rp, max_context_tokens=max_context_tokens, chunk_tokens=s.serving.chunk_tokens),
                       blocks=blocks, decode=rd, decode_link_bytes_per_s=link(rd), handoff_factor=factor)
