"""The operating point's arrays, one entry per candidate layout (what
:func:`planner.sizing.operating.operating_arrays` builds), and the readers that take one
candidate's numbers out of them as floats: a prompt class's chunk times and the decode
cycle at one batch of the grid.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.step import DecodeCycle, DecodeStep, PrefillChunks

__all__ = ["OperatingArrays", "chunk_times_at", "cycle_at"]

Arr = NDArray[np.float64]


@dataclass(frozen=True)
class OperatingArrays:
    """One entry per candidate (arrays of shape (C,))."""

    mode: str
    batch_size: NDArray[np.int64]
    feasible: NDArray[np.bool_]
    reason: NDArray[np.object_]
    max_sequences: Arr
    step_s: Arr
    itl_s: Arr  # mean ITL at the batch (= the mean TPOT)
    itl_percentile_s: Arr  # per-request TPOT at slo.itl_percentile at the batch, chunk stalls averaged in
    itl_gap_p99_s: Arr  # p99 of all token gaps at the batch (the chunk stall)
    itl_worst_s: Arr  # cycle + the longest chunk
    slo_attainment: Arr  # share of requests meeting both targets (TPOT at the batch, TTFT at the fleet's load)
    ttft_attainment: Arr  # of which: share with TTFT ≤ slo.ttft_s
    tpot_attainment: Arr  # share with TPOT ≤ slo.itl_s
    ttft_s: Arr  # mean, at the fleet's load: ttft_wait_s + prefill_service_s (+ exposed transfer)
    ttft_p90_s: Arr
    ttft_p99_s: Arr  # at the fleet's load (NaN where the load model gives no distribution)
    ttft_wait_s: Arr  # mean queueing wait before the prefill starts
    ttft_recv_wait_s: Arr  # of prefill_service_s: the wait for the scheduler to take the request in (SGLang recv, TRT ADP balance)
    fleet_cycle_s: Arr  # the decode pass at the fleet's batch (NaN where the mode has none)
    prefill_service_s: Arr  # a request's own mean prefill latency (colocated: its chunked iterations)
    goodput_req_s_per_replica: Arr  # decode replicas in disaggregated mode
    prefill_req_s_per_replica: Arr  # prefill replicas (colocated: same as goodput)
    tok_s_per_replica: Arr
    kv_transfer_s: Arr  # mean whole-prompt KV transfer (0 colocated)
    kv_transfer_exposed_s: Arr  # of which not hidden behind the prefill, + setup
    decode_admission_s: Arr  # disaggregated: the decode worker's take-in after the KV arrives (0 colocated)
    prefill_utilization: Arr  # utilization of the prefill servers at the fleet's load
    replicas: Arr  # colocated replicas, or prefill + decode
    prefill_replicas: Arr
    decode_replicas: Arr
    fleet_batch_size: Arr  # decode batch per replica at the peak rate on this fleet
    fleet_itl_s: Arr  # mean ITL there
    fleet_itl_percentile_s: Arr  # per-request TPOT at slo.itl_percentile there
    fleet_itl_gap_p99_s: Arr  # p99 of all token gaps there
    fleet_slo_attainment: Arr  # share of requests meeting both targets there (what the simulator scores)
    weight_bytes_per_gpu: Arr
    kv_budget_bytes: Arr
    gpus_per_replica: Arr
    batch_grid: Arr  # the decode batches tried, shape (B,)
    decode: DecodeCycle  # the decode cycle at each candidate × batch (C, B): the Plan's decode section reads it
    class_prompt: Arr  # the prompt classes the prefill chunks were computed for (WorkloadStats), shape (S,)
    class_cached: Arr
    prefill: PrefillChunks  # every class's chunk times per candidate (C, S, K): the Plan's prefill section reads them
    # A prefill pool with its own layout (planner.sizing.pools): its GPUs per replica; None: gpus_per_replica.
    prefill_gpus_per_replica: Arr | None = None


def chunk_times_at(op: OperatingArrays, candidate: int, *, prompt_tokens: float, cached_tokens: float
                   ) -> list[float] | None:
    """The chunk times (riding in decode iterations) of a prompt class ``operating_arrays``
    already computed, as floats (None: no class has that prompt and cached length)."""
    new = np.maximum(op.class_prompt - op.class_cached, 1.0)
    hits = np.flatnonzero((op.class_prompt == prompt_tokens) & (op.class_cached == cached_tokens)
                          & (new == prompt_tokens - cached_tokens))
    if hits.size == 0:
        return None
    k = int(hits[0])
    pc = op.prefill
    marginal = np.broadcast_to(pc.marginal_s, (op.batch_size.shape[0],) + pc.mask.shape)[candidate, k]
    return [float(x) for x, m in zip(marginal, pc.mask[k], strict=True) if m]


def cycle_at(cyc: DecodeCycle, candidate: int, column: int) -> DecodeCycle:
    """One candidate's decode cycle at one batch of the grid, as floats."""
    st = cyc.step

    def at(a: ArrayLike) -> float:
        return float(np.broadcast_to(np.asarray(a, float), np.shape(cyc.cycle_s))[candidate, column])

    values: dict[str, Any] = {k.name: at(getattr(st, k.name)) for k in fields(DecodeStep) if k.name != "memory_bound"}
    step = DecodeStep(**values,
                      memory_bound=bool(np.broadcast_to(st.memory_bound, np.shape(cyc.cycle_s))[candidate, column]))
    return DecodeCycle(step=step, cycle_s=at(cyc.cycle_s), tokens_per_pass=cyc.tokens_per_pass, itl_s=at(cyc.itl_s),
                       verify_s=at(cyc.verify_s), draft_s=at(cyc.draft_s))
