"""Fleet sizing and cost, on arrays of operating points.

* replicas come from the operating point (``sizing.operating``): colocated
  max(min_replicas, ⌈peak req/s / (u × goodput per replica)⌉); disaggregated, the
  decode pool likewise and the prefill pool grown until its p90 TTFT meets the target
* the provisioned fleet is charged around the clock: $/hour = GPUs × $/GPU-hour
  (+ GPUs × TDP × PUE × $/kWh when a power price is given)
* traffic-weighted $/Mtok = $/hour / (mean req/s × tokens per request × 3600 / 1e6);
  the full-load figure divides by the SLO capacity instead (no idle time)
* cold start = weight bytes per GPU / load bytes/s per GPU
* disaggregated pools with their own GPUs (planner.sizing.pools): each pool's GPUs at its
  own price, GPUs = P × g_p + D × g_d, $/hour = P × g_p × $_p + D × g_d × $_d
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from planner.sizing.operating import CEIL_TOLERANCE, OperatingArrays, WorkloadStats
from planner.spec.context import Resolved

__all__ = ["CEIL_TOLERANCE", "FleetArrays", "fleet_arrays", "gpu_hour_usd", "pool_groups"]

Arr = NDArray[np.float64]


def pool_groups(
    *, requests_per_s: float, prompt_tokens: float, output_tokens: float,
    prefill_tok_s_per_group: float, decode_tok_s_per_group: float,
) -> tuple[int, int]:
    """(prefill groups, decode groups), each a ceiling of demand / capacity:

    prefill = ceil(req/s × prompt tokens / prefill tok/s per group)
    decode  = ceil(req/s × output tokens / decode tok/s per group)
    """
    prefill = math.ceil(requests_per_s * prompt_tokens / prefill_tok_s_per_group - CEIL_TOLERANCE)
    decode = math.ceil(requests_per_s * output_tokens / decode_tok_s_per_group - CEIL_TOLERANCE)
    return prefill, decode


@dataclass(frozen=True)
class FleetArrays:
    """Fleet and cost per candidate (NaN where the candidate is infeasible)."""

    replicas: Arr
    prefill_replicas: Arr
    decode_replicas: Arr
    gpus_total: Arr
    usd_per_hour: Arr
    usd_per_mtok_output: Arr
    usd_per_mtok_input: Arr
    usd_per_mtok_blended: Arr
    usd_per_1k_requests: Arr
    usd_per_mtok_output_full_load: Arr
    goodput_req_s_per_gpu: Arr
    fleet_utilization: Arr  # mean traffic / provisioned capacity
    cold_start_s: Arr


def gpu_hour_usd(r: Resolved) -> float:
    """$/GPU-hour + power (TDP × PUE × $/kWh when a power price is given) on ``r``'s GPU."""
    c = r.scenario.cost
    return r.usd_per_gpu_hour + ((r.gpu.tdp_w * c.pue * c.usd_per_kwh / 1000.0) if c.usd_per_kwh else 0.0)


def fleet_arrays(r: Resolved, op: OperatingArrays, stats: WorkloadStats,
                 prefill_pool: Resolved | None = None) -> FleetArrays:
    """``prefill_pool`` (disaggregated, planner.sizing.pools): the prefill pool's own GPUs and
    price, ``r`` being the decode pool's: $/hour = Σ over pools of GPUs × its $/GPU-hour."""
    s = r.scenario
    mean = s.workload.requests_per_s
    g = op.gpus_per_replica
    nan = np.full_like(g, np.nan)
    if prefill_pool is not None and op.mode == "disaggregated":
        return _pools_fleet(r, op, stats, prefill_pool)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicas = op.replicas
        if op.mode == "colocated":
            pre, dec_n = np.zeros_like(g), np.zeros_like(g)
            capacity = replicas * op.goodput_req_s_per_replica
            gpu_per_req_s = g / op.goodput_req_s_per_replica
        else:
            pre, dec_n = op.prefill_replicas, op.decode_replicas
            capacity = np.minimum(pre * op.prefill_req_s_per_replica, dec_n * op.goodput_req_s_per_replica)
            gpu_per_req_s = g / op.prefill_req_s_per_replica + g / op.goodput_req_s_per_replica
        gpus = replicas * g
        per_gpu_hour = gpu_hour_usd(r)
        usd_h = gpus * per_gpu_hour
        out_mtok_h = mean * stats.mean_output * 3600.0 / 1e6
        in_mtok_h = mean * stats.mean_prompt * 3600.0 / 1e6
        full = np.where(op.feasible, gpu_per_req_s * per_gpu_hour / (stats.mean_output * 3600.0 / 1e6), nan)
    return FleetArrays(
        replicas=replicas,
        prefill_replicas=pre,
        decode_replicas=dec_n,
        gpus_total=gpus,
        usd_per_hour=usd_h,
        usd_per_mtok_output=usd_h / out_mtok_h,
        usd_per_mtok_input=usd_h / in_mtok_h,
        usd_per_mtok_blended=usd_h / (out_mtok_h + in_mtok_h),
        usd_per_1k_requests=usd_h / (mean * 3.6),
        usd_per_mtok_output_full_load=full,
        goodput_req_s_per_gpu=np.where(op.feasible, 1.0 / gpu_per_req_s, 0.0),
        fleet_utilization=mean / capacity,
        cold_start_s=op.weight_bytes_per_gpu / s.fleet.load_bytes_per_s,
    )


def _pools_fleet(r: Resolved, op: OperatingArrays, stats: WorkloadStats, rp: Resolved) -> FleetArrays:
    """Disaggregated pools with their own GPUs and prices: GPUs = P × g_p + D × g_d,
    $/hour = P × g_p × $_p + D × g_d × $_d, full-load $/Mtok from g_p·$_p / prefill req/s +
    g_d·$_d / decode req/s."""
    s = r.scenario
    mean = s.workload.requests_per_s
    g_d = op.gpus_per_replica
    g_p = op.prefill_gpus_per_replica if op.prefill_gpus_per_replica is not None else g_d
    usd_d, usd_p = gpu_hour_usd(r), gpu_hour_usd(rp)
    pre, dec_n = op.prefill_replicas, op.decode_replicas
    with np.errstate(divide="ignore", invalid="ignore"):
        capacity = np.minimum(pre * op.prefill_req_s_per_replica, dec_n * op.goodput_req_s_per_replica)
        gpu_per_req_s = g_p / op.prefill_req_s_per_replica + g_d / op.goodput_req_s_per_replica
        gpus = pre * g_p + dec_n * g_d
        if usd_p == usd_d:  # one price: the one-pool arithmetic, to the last bit
            usd_per_req_s, usd_h = gpu_per_req_s * usd_d, gpus * usd_d
        else:
            usd_per_req_s = g_p * usd_p / op.prefill_req_s_per_replica + g_d * usd_d / op.goodput_req_s_per_replica
            usd_h = pre * g_p * usd_p + dec_n * g_d * usd_d
        out_mtok_h = mean * stats.mean_output * 3600.0 / 1e6
        in_mtok_h = mean * stats.mean_prompt * 3600.0 / 1e6
        full = np.where(op.feasible, usd_per_req_s / (stats.mean_output * 3600.0 / 1e6), np.nan)
    return FleetArrays(
        replicas=op.replicas, prefill_replicas=pre, decode_replicas=dec_n, gpus_total=gpus, usd_per_hour=usd_h,
        usd_per_mtok_output=usd_h / out_mtok_h, usd_per_mtok_input=usd_h / in_mtok_h,
        usd_per_mtok_blended=usd_h / (out_mtok_h + in_mtok_h), usd_per_1k_requests=usd_h / (mean * 3.6),
        usd_per_mtok_output_full_load=full,
        goodput_req_s_per_gpu=np.where(op.feasible, 1.0 / gpu_per_req_s, 0.0),
        fleet_utilization=mean / capacity,
        cold_start_s=op.weight_bytes_per_gpu / s.fleet.load_bytes_per_s,
    )
