"""Disaggregated pools for the pages: the Fleet page's per-pool rows and the xPyD ratio,
the pool derivations the Fleet page shows, and the sidebar's pool fields as scenario data.

The numbers are the Plan's (``Plan.pools``, planner.sizing.pools); nothing is computed here
beyond the sums the derivations substitute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from planner.io.formatting import NOT_A_NUMBER
from planner.sizing.plan import Plan
from planner.sizing.pools import PoolResult, pools_set
from planner.sizing.workload import workload_stats
from planner.spec.context import resolve
from planner.spec.derivation import Derivation, fmt_num
from planner.spec.scenario import POOL_ROLES, Scenario

__all__ = ["pool_data", "pool_derivations", "pool_rows", "xpyd_text"]


def xpyd_text(plan: Plan) -> str:
    """``"3P1D (3 prefill : 1 decode replicas)"``, or "—" when the pools do not exist."""
    p = plan.pools
    if p is None or not p.xpyd:
        return NOT_A_NUMBER
    return f"{p.xpyd} ({p.prefill.replicas:,.0f} prefill : {p.decode.replicas:,.0f} decode replicas)"


def _pool_line(pool: PoolResult) -> str:
    gpus = f"{pool.gpus:,.0f} GPUs" if math.isfinite(pool.gpus) else NOT_A_NUMBER
    usd_h = f"${pool.usd_per_hour:,.2f}/hour" if math.isfinite(pool.usd_per_hour) else NOT_A_NUMBER
    return (f"{pool.gpu} {pool.layout} ({pool.gpus_per_replica} GPUs per replica), {gpus}, "
            f"${pool.usd_per_gpu_hour:,.2f}/GPU-hour, {usd_h}")


def pool_rows(plan: Plan) -> list[tuple[str, str]]:
    """(label, value) rows of the disaggregated pools: the xPyD ratio and each pool's GPU,
    layout, GPUs and price ([] when the plan has no pools section)."""
    p = plan.pools
    if p is None:
        return []
    return [("Pools, xPyD", xpyd_text(plan)), ("Prefill pool", _pool_line(p.prefill)),
            ("Decode pool", _pool_line(p.decode))]


def pool_derivations(*, scenario: Scenario, plan: Plan) -> dict[str, Derivation]:
    """The Fleet page's derivations that differ when the pools have their own GPU or layout:
    the KV hand-off (re-sharded between the layouts), the xPyD ratio and full-load $/Mtok with
    each pool at its own price; {} for a scenario without its own pools."""
    p = plan.pools
    if p is None or scenario.serving.mode != "disaggregated" or not pools_set(scenario):
        return {}
    out: dict[str, Derivation] = {}
    for key in ("pools.kv_transfer_s", "pools.xpyd", "pools.usd_per_hour"):
        if key in plan.derivations:
            out[key] = plan.derivations[key]
    if "pools.kv_transfer_s" in plan.derivations:
        dv = plan.derivations["pools.kv_transfer_s"]
        out["fleet.kv_transfer_s"] = dv.model_copy(update={"name": "fleet.kv_transfer_s"})
    pr, de, c = p.prefill, p.decode, plan.cost
    mean_out = workload_stats(resolve(scenario)).mean_output
    ok = pr.req_s_per_replica > 0 and de.req_s_per_replica > 0
    out["cost.usd_per_mtok_output_full_load"] = Derivation(
        name="cost.usd_per_mtok_output_full_load",
        formula=("(prefill GPUs per replica × its $/GPU-hour / prefill req/s per replica + decode GPUs per replica "
                 "× its $/GPU-hour / decode req/s per replica) / (output tokens × 3600 / 1e6): each pool at its "
                 "own price, no idle time"),
        substituted=(f"({pr.gpus_per_replica} × {fmt_num(pr.usd_per_gpu_hour)} / {fmt_num(pr.req_s_per_replica)} + "
                     f"{de.gpus_per_replica} × {fmt_num(de.usd_per_gpu_hour)} / {fmt_num(de.req_s_per_replica)}) / "
                     f"({fmt_num(mean_out)} × 3600 / 1e6)") if ok else NOT_A_NUMBER,
        value=c.usd_per_mtok_output_full_load, unit="USD/Mtok")
    return out


def pool_data(data: Mapping[str, Any], chosen: Mapping[str, tuple[Any, int | None]]) -> dict[str, Any]:
    """Scenario data with each pool's (GPU, TP) from the sidebar: None leaves the field to the
    scenario's own (a pool with neither is removed); an inline GPU spec the pool was loaded with
    is kept while the widget says "same"."""
    out = dict(data)
    for role in POOL_ROLES:
        if role not in chosen:
            continue
        gpu, tp = chosen[role]
        raw = out.get(role)
        old: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        new: dict[str, Any] = {}
        g = gpu if gpu is not None else (old.get("gpu") if isinstance(old.get("gpu"), Mapping) else None)
        if g is not None:
            new["gpu"] = g
        if tp is not None:
            raw_par = old.get("parallel")
            par: Mapping[str, Any] = raw_par if isinstance(raw_par, Mapping) else {}
            new["parallel"] = {**par, "tp": int(tp)}
        if new:
            out[role] = new
        else:
            out.pop(role, None)
    return out
