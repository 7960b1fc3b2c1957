"""Disaggregated pools with their own GPU and layout (``prefill``, ``decode``).

A pool left unset (or a field of it) is the scenario's ``gpu`` / ``parallel``; its
resolved scenario is the scenario's own then (``pool_resolved`` returns ``r``
itself, so a scenario without pools plans exactly as before).  Each pool is timed
on its own GPU and layout (:func:`planner.sizing.operating.operating_arrays` with
``prefill_pool``), sized as before (prefill: the smallest M/G/c pool meeting the
p90 TTFT; decode: ⌈peak / (u × req/s per replica)⌉), and charged at its own price:
``cost.usd_per_gpu_hour`` for both when set, else each pool's catalog price.  The
KV hand-off between differently sharded pools: :mod:`planner.physics.handoff`.

The xPyD ratio is prefill replicas : decode replicas, written ``"3P1D"``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.io.formatting import NOT_A_NUMBER
from planner.physics.handoff import kv_handoff_factor
from planner.physics.link import DEFAULT_KV_LINK_EFFICIENCY, kv_link_bytes_per_s
from planner.physics.memory import kv_bytes_per_token, kv_bytes_per_token_per_gpu
from planner.sizing.fleet import FleetArrays, gpu_hour_usd
from planner.sizing.operating import OperatingArrays
from planner.sizing.workload import WorkloadStats
from planner.spec.context import Resolved
from planner.spec.derivation import Derivation, fmt_num
from planner.spec.scenario import POOL_ROLES, Parallel, Pool, Scenario
from planner.spec.specs import GpuSpec

__all__ = ["PoolResult", "PoolsResult", "layout_text", "pool_link_bytes_per_s", "pool_pair", "pool_resolved",
           "pools_section", "pools_set", "pools_warnings", "xpyd"]

_F = ConfigDict(frozen=True, extra="forbid")


def pools_set(scenario: Scenario) -> bool:
    """Whether the scenario gives either pool its own GPU or layout."""
    return any((p := getattr(scenario, role)) is not None and p.is_set for role in POOL_ROLES)


def pool_resolved(r: Resolved, role: str) -> Resolved:
    """The resolved scenario of one pool: its GPU, layout and price (``r`` itself when the pool is unset).

    The pool's scenario carries no pools of its own (it is one pool's view), and keeps
    ``r``'s efficiencies; its price is ``cost.usd_per_gpu_hour`` when set, else its GPU's."""
    s = r.scenario
    pool: Pool | None = getattr(s, role)
    if pool is None or not pool.is_set:
        return r
    gpu = pool.gpu if pool.gpu is not None else s.gpu
    spec = r.gpu if pool.gpu is None else (gpu if isinstance(gpu, GpuSpec) else _catalog_gpu(gpu))
    sc = s.model_copy(update={"gpu": gpu, "parallel": pool.parallel if pool.parallel is not None else s.parallel,
                              "prefill": None, "decode": None})
    price = s.cost.usd_per_gpu_hour if s.cost.usd_per_gpu_hour is not None else spec.usd_per_gpu_hour
    origins = dict(r.origins)
    if pool.gpu is not None:
        origins["gpu"] = "input" if isinstance(gpu, GpuSpec) else "datasheet"
    return replace(r, scenario=sc, gpu=spec, usd_per_gpu_hour=price, origins=origins)


def _catalog_gpu(gpu_id: str) -> GpuSpec:
    from planner.spec.catalog import get_gpu

    return get_gpu(gpu_id)


def layout_text(p: Parallel) -> str:
    """``TP8 × PP1 × EP1`` (and the engine's other layout flags where the schema has them)."""
    text = f"TP{p.tp} × PP{p.pp} × EP{p.ep}"
    if getattr(p, "dp_attention", False):
        text += " · DP attention"
    return text


def xpyd(prefill_replicas: float, decode_replicas: float) -> str:
    """``"3P1D"``: prefill replicas : decode replicas ("" when either does not exist)."""
    if not (math.isfinite(prefill_replicas) and math.isfinite(decode_replicas)):
        return ""
    return f"{prefill_replicas:.0f}P{decode_replicas:.0f}D"


class PoolResult(BaseModel):
    """One disaggregated pool: what it runs on and what it costs."""

    model_config = _F
    role: str  # "prefill" | "decode"
    gpu: str
    tp: int
    pp: int
    ep: int
    layout: str
    own_layout: bool  # the scenario gives this pool its own gpu or parallel
    gpus_per_replica: int
    replicas: float
    gpus: float
    req_s_per_replica: float
    usd_per_gpu_hour: float
    usd_per_hour: float  # GPUs × ($/GPU-hour + power), the pool's share of cost.usd_per_hour
    kv_link_bytes_per_s: float  # one direction of the link each of its GPUs ships or takes KV over


class PoolsResult(BaseModel):
    """The disaggregated fleet's two pools (evaluated in either mode: the verdict compares them)."""

    model_config = _F
    xpyd: str  # "3P1D" ("" when infeasible)
    prefill: PoolResult
    decode: PoolResult
    kv_bytes_per_sequence: float  # the mean prompt's KV leaving the prefill pool (whole model)
    kv_transfer_s: float
    kv_transfer_exposed_s: float


def pool_link_bytes_per_s(r: Resolved) -> float:
    """The pool's per-GPU link for the KV hand-off (fleet.link, fleet.link_bytes_per_s)."""
    f = r.scenario.fleet
    return kv_link_bytes_per_s(r.gpu, link=f.link, link_bytes_per_s=f.link_bytes_per_s)


def pools_warnings(scenario: Scenario) -> list[str]:
    """Pools set on a colocated scenario: they size only the disaggregated comparison."""
    if scenario.serving.mode == "disaggregated" or not pools_set(scenario):
        return []
    names = [f"{role}.{f}" for role in POOL_ROLES if (p := getattr(scenario, role)) is not None
             for f in ("gpu", "parallel") if getattr(p, f) is not None]
    return [f"{', '.join(names)} apply to disaggregated pools only: this colocated plan runs on gpu and parallel; "
            "the disaggregated comparison (fleet.disaggregated_gpus) uses them (set serving.mode=disaggregated)"]


def pool_pair(r: Resolved) -> tuple[Resolved, Resolved]:
    """(prefill pool, decode pool) resolved (each ``r`` where unset)."""
    return pool_resolved(r, "prefill"), pool_resolved(r, "decode")


def pools_section(r: Resolved, op: OperatingArrays, fl: FleetArrays, stats: WorkloadStats,
                  d: dict[str, Derivation]) -> PoolsResult:
    """The disaggregated evaluation's two pools, the xPyD ratio and the KV hand-off, with derivations in ``d``."""
    rp, rd = pool_pair(r)
    s = r.scenario
    g_d = int(op.gpus_per_replica[0])
    g_p = int(op.prefill_gpus_per_replica[0]) if op.prefill_gpus_per_replica is not None else g_d
    pre, dec = float(fl.prefill_replicas[0]), float(fl.decode_replicas[0])

    def one(role: str, pr: Resolved, g: int, n: float, rate: float) -> PoolResult:
        q = pr.scenario.parallel
        per = gpu_hour_usd(pr)
        return PoolResult(role=role, gpu=pr.gpu.id, tp=q.tp, pp=q.pp, ep=q.ep, layout=layout_text(q),
                          own_layout=pr is not r, gpus_per_replica=g, replicas=n, gpus=n * g, req_s_per_replica=rate,
                          usd_per_gpu_hour=pr.usd_per_gpu_hour, usd_per_hour=n * g * per,
                          kv_link_bytes_per_s=pool_link_bytes_per_s(pr))

    pp_ = one("prefill", rp, g_p, pre, float(op.prefill_req_s_per_replica[0]))
    dp_ = one("decode", rd, g_d, dec, float(op.goodput_req_s_per_replica[0]))
    kv_seq = kv_bytes_per_token(r.model, s.kv_dtype) * stats.mean_prompt
    res = PoolsResult(xpyd=xpyd(pre, dec), prefill=pp_, decode=dp_, kv_bytes_per_sequence=kv_seq,
                      kv_transfer_s=float(op.kv_transfer_s[0]), kv_transfer_exposed_s=float(op.kv_transfer_exposed_s[0]))
    d["pools.xpyd"] = Derivation(
        name="pools.xpyd",
        formula=(f"prefill replicas P ({pp_.gpu} {pp_.layout}, {g_p} GPUs each) / decode replicas D ({dp_.gpu} "
                 f"{dp_.layout}, {g_d} GPUs each): the ratio written PxDy, e.g. 3P1D"),
        substituted=f"{fmt_num(pre)} / {fmt_num(dec)}" if res.xpyd else NOT_A_NUMBER,
        value=pre / dec if res.xpyd and dec > 0 else float("nan"), unit="prefill per decode replica")
    d["pools.usd_per_hour"] = Derivation(
        name="pools.usd_per_hour",
        formula="prefill replicas × GPUs × prefill $/GPU-hour + decode replicas × GPUs × decode $/GPU-hour "
                "(cost.usd_per_gpu_hour for both when set, else each pool's catalog price; + power when priced)",
        substituted=(f"{fmt_num(pre)} × {g_p} × {fmt_num(gpu_hour_usd(rp))} + {fmt_num(dec)} × {g_d} × "
                     f"{fmt_num(gpu_hour_usd(rd))}") if res.xpyd else NOT_A_NUMBER,
        value=pp_.usd_per_hour + dp_.usd_per_hour, unit="USD/h",
        origin=rd.origins["cost.usd_per_gpu_hour"])
    # a data-parallel attention rank takes its sequences' whole KV (attention TP 1); windowed
    # layers hold at most their window, so the shard per sequence is the ledger's at each prompt class
    a_tp = rd.scenario.parallel.attention_tp
    kd_seq = np.asarray(kv_bytes_per_token_per_gpu(model=r.model, kv_dtype=s.kv_dtype, tp=a_tp, pp=dp_.pp,
                                                   context_tokens=stats.class_prompt)) * stats.class_prompt
    kn = float(np.sum(stats.class_weight * kd_seq))  # K_d × n, averaged over the prompt classes
    factor = float(kv_handoff_factor(send_gpus=rp.scenario.parallel.attention_tp * pp_.pp, recv_gpus=a_tp * dp_.pp,
                                     send_link_bytes_per_s=pp_.kv_link_bytes_per_s,
                                     recv_link_bytes_per_s=dp_.kv_link_bytes_per_s))
    d["pools.kv_transfer_s"] = Derivation(
        name="pools.kv_transfer_s",
        formula="(K_d × n / (η × L_d)) × max(1, (N_d × L_d) / (N_p × L_p)): each decode GPU takes its shard K_d "
                "per token over its link L_d, the N_p = TP × PP prefill GPUs send the N_d shards over theirs "
                "(planner.physics.handoff), averaged over the prompt classes" + (
                    f"; the senders bind ({fmt_num(factor)}× the receivers' time)" if factor > 1 else ""),
        substituted=(f"({fmt_num(kn)} / ({DEFAULT_KV_LINK_EFFICIENCY} × "
                     f"{fmt_num(dp_.kv_link_bytes_per_s)})) × max(1, ({a_tp * dp_.pp} × "
                     f"{fmt_num(dp_.kv_link_bytes_per_s)}) / ({rp.scenario.parallel.attention_tp * pp_.pp} × "
                     f"{fmt_num(pp_.kv_link_bytes_per_s)}))"),
        value=res.kv_transfer_s, unit="s")
    return res
