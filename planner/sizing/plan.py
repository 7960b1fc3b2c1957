"""Scenario in, Plan out."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.physics.roofline import compute_dtype
from planner.sizing.fleet_plan import (
    CostResult,
    FleetResult,
    OperatingPoint,
    RoutingResult,
    plan_fleet,
    routing_section,
)
from planner.sizing.operating import cycle_at, mean_prefill
from planner.sizing.pools import PoolsResult, pool_pair, pools_set, pools_warnings
from planner.sizing.replica import (
    DecodeResult,
    MemoryResult,
    PrefillResult,
    RooflineResult,
    decode_section,
    default_batch,
    derive_context,
    memory_section,
    prefill_section,
    roofline_section,
)
from planner.sizing.uncertainty import Uncertainty, plan_uncertainty
from planner.spec.context import Resolved, resolve
from planner.spec.derivation import Derivation, Origin, fmt_num
from planner.spec.fitted import FITTED_GPU_ROWS, MIN_ROWS_COVERED
from planner.spec.precision import compute_dtype_candidates
from planner.spec.scenario import Scenario

__all__ = ["Plan", "plan", "plan_resolved"]


class Plan(BaseModel):
    """Everything the planner says about one scenario (SI units)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario_name: str
    gpu: str
    model: str
    weights_dtype: str
    kv_dtype: str
    roofline: RooflineResult
    memory: MemoryResult
    decode: DecodeResult
    prefill: PrefillResult
    ttft_s: float
    operating_point: OperatingPoint
    fleet: FleetResult
    cost: CostResult
    routing: RoutingResult
    warnings: tuple[str, ...]
    origins: dict[str, Origin]
    derivations: dict[str, Derivation]
    uncertainty: Uncertainty | None = None  # error bands of the headline numbers (sizing/uncertainty.py)
    # The disaggregated evaluation's pools: GPU, layout, replicas, GPUs, $/hour each, the xPyD ratio
    # and the KV hand-off (sizing/pools.py); present in either mode (the verdict compares them).
    pools: PoolsResult | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _warnings(r: Resolved, mem: MemoryResult, batch: int) -> list[str]:
    s, gpu, m = r.scenario, r.gpu, r.model
    out: list[str] = []
    if not mem.fits:
        if mem.kv_budget_bytes <= 0:
            out.append(
                f"model does not fit: {fmt_num(mem.weight_bytes_per_gpu / 1e9)} GB of weights per GPU leave no "
                f"KV budget on {gpu.id} ({fmt_num(gpu.hbm_bytes / 1e9)} GB); raise parallel.tp/pp or lower weights_dtype"
            )
        else:
            out.append(
                f"model does not fit: the KV budget holds {mem.max_sequences:.2f} sequences of "
                f"{mem.context_tokens} tokens; raise parallel.tp/pp, shorten the context or use kv_dtype=fp8"
            )
    elif s.serving.batch_size is not None and s.serving.batch_size > mem.max_sequences:
        out.append(
            f"KV budget binds below the requested batch: serving.batch_size={s.serving.batch_size} but only "
            f"{int(mem.max_sequences)} sequences of {mem.context_tokens} tokens fit; the engine would preempt"
        )
    if s.parallel.tp > gpu.scaleup_domain_gpus:
        out.append(
            f"TP over PCIe: parallel.tp={s.parallel.tp} exceeds {gpu.id}'s NVLink domain of "
            f"{gpu.scaleup_domain_gpus} GPU(s); 2 all-reduces per layer per token run at PCIe latency"
        )
    if m.max_context_tokens and mem.context_tokens > m.max_context_tokens:
        out.append(f"context of {mem.context_tokens} tokens exceeds {m.id}'s maximum of {m.max_context_tokens}")
    cdt = compute_dtype(gpu, s.weights_dtype)
    native = compute_dtype_candidates(s.weights_dtype)[0]
    if cdt != native and s.weights_dtype not in {"fp16", "fp32"}:
        out.append(f"{gpu.id} has no {native} tensor cores: {s.weights_dtype} weights are dequantized and compute "
                   f"runs at the {cdt} rate; check that your engine serves {s.weights_dtype} on {gpu.id}")
    if s.kv_dtype == "fp8" and gpu.flops_per_s.fp8 is None:
        out.append(f"{gpu.id} has no FP8 units: an FP8 KV cache is dequantized in the attention kernel")
    eff = s.efficiency
    if (eff.bandwidth is None or eff.compute is None) and FITTED_GPU_ROWS.get(gpu.id, 0) < MIN_ROWS_COVERED:
        out.append(f"default efficiencies were fitted on published data with {FITTED_GPU_ROWS.get(gpu.id, 0)} rows "
                   f"for {gpu.id}: an extrapolation; calibrate with a live probe")
    if batch > 1 and s.parallel.pp > 1 and batch < s.parallel.pp:
        out.append(f"pipeline bubble: batch {batch} is smaller than parallel.pp={s.parallel.pp}")
    return out


def _warnings_prefill(rp: Resolved) -> list[str]:
    """The prefill pool's own layout and GPU warnings, named by its fields."""
    q, gpu = rp.scenario.parallel, rp.gpu
    out = []
    if q.tp > gpu.scaleup_domain_gpus:
        out.append(f"TP over PCIe: prefill.parallel.tp={q.tp} exceeds {gpu.id}'s NVLink domain of "
                   f"{gpu.scaleup_domain_gpus} GPU(s)")
    eff = rp.scenario.efficiency
    if (eff.bandwidth is None or eff.compute is None) and FITTED_GPU_ROWS.get(gpu.id, 0) < MIN_ROWS_COVERED:
        out.append(f"prefill.gpu: default efficiencies were fitted on published data with "
                   f"{FITTED_GPU_ROWS.get(gpu.id, 0)} rows for {gpu.id}: an extrapolation")
    return out


def plan_resolved(r: Resolved) -> Plan:
    """The Plan for an already-resolved scenario."""
    s = r.scenario
    d: dict[str, Derivation] = {}
    r0 = rp = r
    if s.serving.mode == "disaggregated" and pools_set(s):
        # The replica sections describe the pool that runs each phase: memory, roofline and
        # decode the decode pool, prefill the prefill pool (sizing/pools.py).
        rp, r = pool_pair(r)
    cap_ctx, _ = derive_context(r)
    mem = memory_section(r, d, context_tokens=cap_ctx)
    fs = plan_fleet(r0, d)
    op, fleet, cost, stats = fs.operating_point, fs.fleet, fs.cost, fs.stats
    live_ctx = stats.live_context
    if op.feasible or s.serving.batch_size is not None:
        batch = op.batch_size
    else:
        batch = default_batch(max_sequences_value=mem.max_sequences, requested=None)
    roof = roofline_section(r, d, batch_size=batch, live_context=live_ctx)
    # The decode step at the batch, as operating_arrays computed it on its batch grid (computed once).
    grid = fs.arrays.batch_grid
    column = int(np.searchsorted(grid, batch))
    cycle = cycle_at(fs.arrays.decode, 0, column) if column < grid.size and grid[column] == batch else None
    dec = decode_section(r, d, batch_size=batch, live_context=live_ctx, cycle=cycle)
    mp = mean_prefill(rp)  # the mean prompt alone, for the prefill and routing sections (computed once)
    pre = prefill_section(rp, d, decode_step_s=dec.step_s, mean=mp, arrays=fs.arrays)
    ttft = op.ttft_s if op.feasible else pre.time_s
    d["ttft_s"] = Derivation(
        name="ttft_s", formula="operating-point TTFT (queueing + prefill)" if op.feasible else "prefill time (no queueing)",
        substituted=fmt_num(ttft), value=ttft, unit="s")
    return Plan(
        scenario_name=s.name,
        gpu=r0.gpu.id,
        model=r.model.id,
        weights_dtype=s.weights_dtype,
        kv_dtype=s.kv_dtype,
        roofline=roof,
        memory=mem,
        decode=dec,
        prefill=pre,
        ttft_s=ttft,
        operating_point=op,
        fleet=fleet,
        cost=cost,
        routing=routing_section(rp, mp),
        warnings=tuple(_warnings(r, mem, batch) + (_warnings_prefill(rp) if rp is not r else [])
                       + pools_warnings(s)
                       + ([] if op.feasible else [f"no operating point meets the SLO: {op.reason}"])),
        origins=dict(r0.origins),
        derivations=d,
        pools=fs.pools,
        uncertainty=plan_uncertainty(gpu=r.gpu.id, tp=r.scenario.parallel.tp, ttft_s=ttft, itl_s=op.itl_s if op.feasible
                                     else dec.itl_s, usd_per_mtok_output=cost.usd_per_mtok_output,
                                     stated_efficiency=s.efficiency.bandwidth is not None,
                                     ttft_statistic="mean, queueing included" if op.feasible
                                     else "prefill alone, no queueing",
                                     itl_statistic="mean at the operating point" if op.feasible
                                     else "decode step, no queueing"),
    )


def plan(scenario: Scenario) -> Plan:
    """Plan one scenario."""
    return plan_resolved(resolve(scenario))
