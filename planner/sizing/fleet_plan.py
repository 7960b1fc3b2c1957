"""The Plan's fleet-level sections: operating point, fleet, cost, routing.

Built from one-candidate arrays of :mod:`planner.sizing.operating` and
:mod:`planner.sizing.fleet`, so ``plan`` and ``sweep`` give identical numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from planner.io.formatting import NOT_A_NUMBER
from planner.physics.layout import attention_dp
from planner.physics.prefill import host_floor_s
from planner.physics.terms import term
from planner.sizing.fleet import FleetArrays, fleet_arrays
from planner.sizing.operating import (
    MeanPrefill,
    OperatingArrays,
    WorkloadStats,
    mean_prefill,
    operating_arrays,
    workload_stats,
)
from planner.sizing.pools import PoolsResult, pool_pair, pools_section, pools_set
from planner.spec.context import Resolved, kv_transfer_setup_s
from planner.spec.derivation import Derivation, fmt_num

__all__ = ["CostResult", "FleetResult", "FleetSections", "OperatingPoint", "RoutingResult", "fleet_sections",
           "plan_fleet", "routing_section"]

_F = ConfigDict(frozen=True, extra="forbid")
QUEUEING_NOTE = ("M/G/c over the router's pool of prefill servers at the peak rate (Allen-Cunneen): "
                 "W = C(c, λE[S]) × E[S]/(c − λE[S]) × (1 + c_s²)/2; a waiting request's wait is exponential "
                 "with mean W/C; percentiles of wait + own prefill")


class OperatingPoint(BaseModel):
    model_config = _F
    mode: str
    batch_size: int
    feasible: bool
    reason: str
    itl_s: float  # mean ITL at the batch (= mean TPOT)
    itl_percentile: float  # slo.itl_percentile
    itl_percentile_s: float  # per-request TPOT at slo.itl_percentile at the batch
    itl_gap_p99_s: float  # p99 of all token gaps at the batch (the chunk stall)
    itl_worst_s: float
    ttft_s: float
    ttft_p90_s: float
    ttft_p99_s: float  # at the fleet's load, queueing included
    slo_attainment: float  # share of requests meeting both targets: feasible when ≥ attainment_target
    attainment_target: float  # slo.attainment
    ttft_attainment: float  # share with TTFT ≤ slo.ttft_s
    tpot_attainment: float  # share with TPOT ≤ slo.itl_s
    fleet_batch_size: float
    fleet_itl_s: float
    fleet_itl_percentile_s: float  # TPOT at slo.itl_percentile at the fleet's load
    fleet_itl_gap_p99_s: float
    fleet_slo_attainment: float  # at the fleet's load: what the simulator scores
    goodput_req_s_per_replica: float
    tok_s_per_replica: float
    max_sequences: float
    prefill_utilization: float
    queueing: str
    decode_admission_s: float = 0.0  # disaggregated: of the TTFT, the decode worker's take-in after the KV arrives


class FleetResult(BaseModel):
    model_config = _F
    mode: str
    replicas: float
    prefill_replicas: float
    decode_replicas: float
    gpus_per_replica: int
    gpus_total: float
    prefill_req_s_per_replica: float
    decode_req_s_per_replica: float
    kv_transfer_s: float
    kv_transfer_exposed_s: float
    kv_transfer_fits_ttft: bool
    cold_start_s: float
    fleet_utilization: float
    colocated_gpus: float
    disaggregated_gpus: float
    verdict: str


class CostResult(BaseModel):
    model_config = _F
    usd_per_gpu_hour: float
    usd_per_hour: float
    usd_per_mtok_output: float
    usd_per_mtok_input: float
    usd_per_mtok_blended: float
    usd_per_1k_requests: float
    usd_per_mtok_output_full_load: float


class RoutingResult(BaseModel):
    """KV-aware routing on multi-turn chat: the prompt's prefix is the prior
    conversation; a warm turn prefills only the new tokens."""

    model_config = _F
    context_tokens: int
    new_tokens: int
    warm_ttft_s: float
    cold_ttft_s: float
    ttft_at_90pct_warm_s: float
    ttft_at_30pct_warm_s: float
    prefill_req_s_at_90pct_warm: float
    prefill_req_s_at_30pct_warm: float


def _one(r: Resolved, mode: str, stats: WorkloadStats) -> tuple[OperatingArrays, FleetArrays]:
    if mode == "disaggregated" and pools_set(r.scenario):  # each pool on its own GPU and layout
        rp, rd = pool_pair(r)
        q = rd.scenario.parallel
        op = operating_arrays(rd, tp=[q.tp], pp=[q.pp], ep=[q.ep], mode=mode, stats=stats, prefill_pool=rp)
        return op, fleet_arrays(rd, op, stats, prefill_pool=rp)
    p = r.scenario.parallel
    op = operating_arrays(r, tp=[p.tp], pp=[p.pp], ep=[p.ep], mode=mode, stats=stats)
    return op, fleet_arrays(r, op, stats)


def _verdict(col: float, dis: float, col_reason: str, dis_reason: str) -> str:
    if col != col and dis != dis:  # both NaN
        return f"neither mode meets the SLO (colocated: {col_reason}; disaggregated: {dis_reason})"
    if dis != dis:
        return f"colocated with chunked prefill: {col:.0f} GPUs; disaggregated misses ({dis_reason})"
    if col != col:
        return f"disaggregated: {dis:.0f} GPUs; colocated misses ({col_reason})"
    if col == dis:
        return (f"a tie at {col:.0f} GPUs: colocated with chunked prefill is the simpler choice (one pool, "
                "no KV transfer)")
    if col < dis:
        return (f"colocated with chunked prefill needs fewer GPUs ({col:.0f} vs {dis:.0f}): one pool keeps "
                "every GPU busy with both phases and pays no KV transfer")
    return (f"disaggregated needs fewer GPUs ({dis:.0f} vs {col:.0f}): decode batches run without prefill "
            "chunks stretching their ITL, so each decode replica holds a larger batch at the target")


@dataclass(frozen=True)
class FleetSections:
    """The Plan's fleet-level sections and the one-candidate arrays they were read
    from (``arrays``: the scenario's own serving mode), which the decode section reuses."""

    operating_point: OperatingPoint
    fleet: FleetResult
    cost: CostResult
    stats: WorkloadStats
    arrays: OperatingArrays
    pools: PoolsResult  # the disaggregated evaluation's pools (either mode: the verdict compares them)


def fleet_sections(r: Resolved, d: dict[str, Derivation]) -> tuple[OperatingPoint, FleetResult, CostResult, WorkloadStats]:
    """(operating point, fleet, cost, workload stats) of :func:`plan_fleet`."""
    fs = plan_fleet(r, d)
    return fs.operating_point, fs.fleet, fs.cost, fs.stats


def plan_fleet(r: Resolved, d: dict[str, Derivation]) -> FleetSections:
    """Operating point, fleet and cost (both modes evaluated for the verdict), with their derivations in ``d``."""
    s = r.scenario
    stats = workload_stats(r)
    results = {m: _one(r, m, stats) for m in ("colocated", "disaggregated")}
    op, fl = results[s.serving.mode]
    i = 0
    opp = OperatingPoint(
        mode=s.serving.mode, batch_size=int(op.batch_size[i]), feasible=bool(op.feasible[i]), reason=str(op.reason[i]),
        itl_s=float(op.itl_s[i]), itl_percentile=s.slo.itl_percentile, itl_percentile_s=float(op.itl_percentile_s[i]),
        itl_gap_p99_s=float(op.itl_gap_p99_s[i]),
        itl_worst_s=float(op.itl_worst_s[i]), ttft_s=float(op.ttft_s[i]), ttft_p90_s=float(op.ttft_p90_s[i]),
        ttft_p99_s=float(op.ttft_p99_s[i]), slo_attainment=float(op.slo_attainment[i]), attainment_target=s.slo.attainment,
        ttft_attainment=float(op.ttft_attainment[i]), tpot_attainment=float(op.tpot_attainment[i]),
        fleet_batch_size=float(op.fleet_batch_size[i]), fleet_itl_s=float(op.fleet_itl_s[i]),
        fleet_itl_percentile_s=float(op.fleet_itl_percentile_s[i]), fleet_itl_gap_p99_s=float(op.fleet_itl_gap_p99_s[i]),
        fleet_slo_attainment=float(op.fleet_slo_attainment[i]), goodput_req_s_per_replica=float(op.goodput_req_s_per_replica[i]),
        tok_s_per_replica=float(op.tok_s_per_replica[i]), max_sequences=float(op.max_sequences[i]),
        prefill_utilization=float(op.prefill_utilization[i]), queueing=QUEUEING_NOTE,
        decode_admission_s=float(op.decode_admission_s[i]),
    )
    col_g = float(results["colocated"][1].gpus_total[0])
    dis_g = float(results["disaggregated"][1].gpus_total[0])
    flr = FleetResult(
        mode=s.serving.mode, replicas=float(fl.replicas[i]), prefill_replicas=float(fl.prefill_replicas[i]),
        decode_replicas=float(fl.decode_replicas[i]), gpus_per_replica=int(op.gpus_per_replica[i]),
        gpus_total=float(fl.gpus_total[i]), prefill_req_s_per_replica=float(op.prefill_req_s_per_replica[i]),
        decode_req_s_per_replica=float(op.goodput_req_s_per_replica[i]), kv_transfer_s=float(op.kv_transfer_s[i]),
        kv_transfer_exposed_s=float(op.kv_transfer_exposed_s[i]),
        kv_transfer_fits_ttft=bool(op.kv_transfer_exposed_s[i] < s.slo.ttft_s), cold_start_s=float(fl.cold_start_s[i]),
        fleet_utilization=float(fl.fleet_utilization[i]), colocated_gpus=col_g, disaggregated_gpus=dis_g,
        verdict=_verdict(col_g, dis_g, str(results["colocated"][0].reason[0]), str(results["disaggregated"][0].reason[0])),
    )
    disagg_pools = s.serving.mode == "disaggregated" and pools_set(s)
    pools = pools_section(r, *results["disaggregated"], stats, d)
    price = r.usd_per_gpu_hour
    if disagg_pools and pools.prefill.gpus + pools.decode.gpus > 0:  # the fleet's mean over its pools' own prices
        price = ((pools.prefill.gpus * pools.prefill.usd_per_gpu_hour + pools.decode.gpus * pools.decode.usd_per_gpu_hour)
                 / (pools.prefill.gpus + pools.decode.gpus))
    cost = CostResult(
        usd_per_gpu_hour=price, usd_per_hour=float(fl.usd_per_hour[i]),
        usd_per_mtok_output=float(fl.usd_per_mtok_output[i]), usd_per_mtok_input=float(fl.usd_per_mtok_input[i]),
        usd_per_mtok_blended=float(fl.usd_per_mtok_blended[i]), usd_per_1k_requests=float(fl.usd_per_1k_requests[i]),
        usd_per_mtok_output_full_load=float(fl.usd_per_mtok_output_full_load[i]),
    )
    w = s.workload
    g = int(op.gpus_per_replica[i])
    d["operating_point.goodput_req_s_per_replica"] = Derivation(
        name="operating_point.goodput_req_s_per_replica",
        formula="B / (E[output tokens] × ITL) where the SLO attainment holds, else 0",
        substituted=(f"{opp.batch_size} / ({fmt_num(stats.mean_output)} × {fmt_num(opp.itl_s)})" if opp.feasible
                     else "0"),
        value=opp.goodput_req_s_per_replica, unit="req/s")
    d["operating_point.slo_attainment"] = Derivation(
        name="operating_point.slo_attainment",
        formula=("P(TTFT ≤ slo.ttft_s) × P(TPOT ≤ slo.itl_s): TTFT from the M/G/c pool at the fleet's load, a "
                 "request's TPOT = c/τ + (prompts arriving while it decodes × their chunk time) / (o − 1) "
                 "(compound Poisson, gamma per output class); feasible when ≥ slo.attainment"),
        substituted=f"{fmt_num(opp.ttft_attainment)} × {fmt_num(opp.tpot_attainment)}",
        value=opp.slo_attainment, unit="")
    wait, service = float(op.ttft_wait_s[i]), float(op.prefill_service_s[i])
    transfer = float(op.kv_transfer_exposed_s[i])
    admit = float(op.decode_admission_s[i])
    recv = float(op.ttft_recv_wait_s[i])
    disagg = s.serving.mode == "disaggregated"
    k = s.serving.scheduler_recv_interval
    tb = s.serving.attention_dp_balance_iters
    floor = 0.0 if disagg else float(host_floor_s(r.model, tp=s.parallel.tp, pp=s.parallel.pp))
    d["operating_point.ttft_s"] = Derivation(
        name="operating_point.ttft_s",
        formula="mean queueing wait + prefill service" + (
            " (pipelined over PP stages) + exposed KV transfer (its tail behind the prefill + the hand-off's "
            "setup, fleet.kv_transfer_setup_s)" + (" + the decode worker's take-in (operating_point.decode_admission_s)"
                                                   if admit > 0 else "") if disagg
            else " (chunk i: cycle + chunk over i earlier chunks)") + f"; wait: {QUEUEING_NOTE}" + (
            (f"; the service includes the wait for SGLang's scheduler to take the request in "
             f"(--scheduler-recv-interval {k}: operating_point.ttft_recv_wait_s)" if k > 1 else
             f"; the service includes the wait for TensorRT-LLM's attention-DP balance to release the prompt "
             f"(timeout_iters {tb}: operating_point.ttft_recv_wait_s)") if recv > 0 else "") + (
            "; a prompt's own iterations held to the hosts' floor (operating_point.ttft_host_floor_s)"
            if floor > 0 else ""),
        substituted=f"{fmt_num(wait)} + {fmt_num(service)}" + (f" + {fmt_num(transfer)}" if disagg else "") + (
            f" + {fmt_num(admit)}" if admit > 0 else ""),
        value=opp.ttft_s, unit="s")
    if disagg:
        setup = kv_transfer_setup_s(s)
        d["fleet.kv_transfer_setup_s"] = Derivation(
            name="fleet.kv_transfer_setup_s",
            formula=("a disaggregated request's fixed hand-off beyond the KV bytes (block reservation on the decode "
                     "worker, completion poll, admission into its batch, the router's hop), part of the exposed "
                     "KV transfer: the scenario's, else fitted on the TTFT of disaggregated InferenceX runs"),
            substituted=fmt_num(setup), value=setup, unit="s",
            origin="input" if s.fleet.kv_transfer_setup_s is not None else "calibrated")
    iters = term("disagg_handoff_iterations") if disagg else 0.0
    if iters > 0:
        d["operating_point.decode_admission_s"] = Derivation(
            name="operating_point.decode_admission_s",
            formula=("k × decode iteration at the batch: the decode worker reserves the KV blocks, polls the "
                     "transfer's completion and merges the request into its batch between its passes, so the "
                     "first token leaves k of its iterations after the KV arrives (k = disagg_handoff_iterations: off "
                     "unless set, since fitted with the fixed hand-off it did not lower the cross-validated TTFT)"),
            substituted=f"{fmt_num(iters)} × {fmt_num(admit / iters)}", value=admit,
            unit="s", origin="default")
    if floor > 0:
        f = term("moe_prefill_host_layer_s")
        d["operating_point.ttft_host_floor_s"] = Derivation(
            name="operating_point.ttft_host_floor_s",
            formula=("L × moe_prefill_host_layer_s: a prompt's first token reaches the client no sooner than this "
                     "after the iteration that prefills it begins (each GPU's host launches an eager iteration's "
                     "kernels layer by layer, and a layer's collectives wait for the slowest; a MoE model over "
                     "several GPUs); the GPU's passes and the decode's pace are not held. Fitted on the TTFT of "
                     "colocated InferenceX runs"),
            substituted=f"{r.model.layers} × {fmt_num(f)}", value=floor, unit="s", origin="calibrated")
    if k > 1 and not disagg:
        lam = w.peak_rate / float(fl.replicas[i]) if float(fl.replicas[i]) > 0 else 0.0
        d["operating_point.ttft_recv_wait_s"] = Derivation(
            name="operating_point.ttft_recv_wait_s",
            formula=("W = (E[G²] / (2 E[G]) − 1/2) × c × P(n, n·B): takes every k decode passes, one pass after "
                     "a take that found requests; gaps short (1 pass) with π = q_k / (1 − q_1 + q_k), "
                     "q_g = 1 − e^(−λ c g); c the decode pass, B the fleet's batch over n least-loaded replicas "
                     "(P: the regularized incomplete gamma, the chance an arrival finds no idle replica, which "
                     "would take it at once; one replica: 1 − e^(−B))"),
            substituted=(f"k = {k}, λ = {fmt_num(lam)} req/s per replica, c = {fmt_num(float(op.fleet_cycle_s[i]))} s, "
                         f"B = {fmt_num(float(op.fleet_batch_size[i]))}, n = {fmt_num(float(fl.replicas[i]))} → {fmt_num(recv)}"),
            value=recv, unit="s")
    if tb > 0 and not disagg:
        lam = w.peak_rate / float(fl.replicas[i]) if float(fl.replicas[i]) > 0 else 0.0
        ranks = int(attention_dp(s.parallel.tp, s.parallel.dp_attention))
        d["operating_point.ttft_recv_wait_s"] = Derivation(
            name="operating_point.ttft_recv_wait_s",
            formula=("W = c × P(n·R, n·B) × Σ_(m=1)^(T−1) m·(1 − F_(R−1)(m)) / Σ_(m=0)^(T−1) (1 − F_R(m)), "
                     "F_k(m) = (1 − e^(−λ c m / R))^k: TensorRT-LLM's attention-DP balance takes new prompts once "
                     "each of the R ranks has one, or T passes after its last take; c the decode pass, B the "
                     "fleet's batch over n replicas (P: the regularized incomplete gamma, the chance every rank "
                     "decodes; a rank without sequences releases at once)"),
            substituted=(f"T = {tb}, R = {ranks}, λ = {fmt_num(lam)} req/s per replica, "
                         f"c = {fmt_num(float(op.fleet_cycle_s[i]))} s, B = {fmt_num(float(op.fleet_batch_size[i]))}, "
                         f"n = {fmt_num(float(fl.replicas[i]))} → {fmt_num(recv)}"),
            value=recv, unit="s")
    u = s.fleet.target_utilization
    per_dec = opp.goodput_req_s_per_replica
    dec_sub = f"max({s.fleet.min_replicas}, ⌈{fmt_num(w.peak_rate)} / ({u} × {fmt_num(per_dec)})⌉)"
    if disagg_pools:
        gp = pools.prefill.gpus_per_replica
        gpus_sub = f"{fmt_num(flr.prefill_replicas)} × {gp} + {dec_sub} × {g}"
        formula = (f"prefill pool ({pools.prefill.gpu} {pools.prefill.layout}): the smallest M/G/c pool from "
                   "⌈peak / (u × prefill req/s per replica)⌉ up whose p90 TTFT meets the target, × its GPUs per "
                   f"replica + decode pool ({pools.decode.gpu} {pools.decode.layout}): max(min_replicas, ⌈peak "
                   "req/s / (u × req/s per replica)⌉) × its GPUs per replica")
    elif disagg:
        gpus_sub = f"({fmt_num(flr.prefill_replicas)} + {dec_sub}) × {g}"
        formula = ("(prefill pool: the smallest M/G/c pool from ⌈peak / (u × prefill req/s per replica)⌉ up whose "
                   "p90 TTFT meets the target + decode: max(min_replicas, ⌈peak req/s / (u × req/s per replica)⌉))"
                   " × GPUs per replica")
    else:
        gpus_sub = f"{dec_sub} × {g}"
        formula = "max(min_replicas, ⌈peak req/s / (utilization × req/s per replica)⌉) × GPUs per replica"
    d["fleet.gpus_total"] = Derivation(
        name="fleet.gpus_total", formula=formula,
        substituted=gpus_sub if opp.feasible else NOT_A_NUMBER,
        value=flr.gpus_total, unit="GPUs")
    d["cost.usd_per_mtok_output"] = Derivation(
        name="cost.usd_per_mtok_output", formula="$/hour / (mean req/s × output tokens × 3600 / 1e6)",
        substituted=f"{fmt_num(cost.usd_per_hour)} / ({fmt_num(w.requests_per_s)} × {fmt_num(stats.mean_output)} × 3600 / 1e6)",
        value=cost.usd_per_mtok_output, unit="USD/Mtok", origin=r.origins["cost.usd_per_gpu_hour"])
    if disagg_pools:
        pu = d["pools.usd_per_hour"]
        d["cost.usd_per_hour"] = Derivation(
            name="cost.usd_per_hour", formula="Σ pools: GPUs × the pool's $/GPU-hour (provisioned for the peak, "
            "charged around the clock): " + pu.formula, substituted=pu.substituted, value=cost.usd_per_hour,
            unit="USD/h", origin=r.origins["cost.usd_per_gpu_hour"])
    else:
        d["cost.usd_per_hour"] = Derivation(
            name="cost.usd_per_hour", formula="GPUs × $/GPU-hour (provisioned for the peak, charged around the clock)",
            substituted=f"{fmt_num(flr.gpus_total)} × {fmt_num(r.usd_per_gpu_hour)}", value=cost.usd_per_hour,
            unit="USD/h", origin=r.origins["cost.usd_per_gpu_hour"])
    return FleetSections(operating_point=opp, fleet=flr, cost=cost, stats=stats, arrays=op, pools=pools)


def routing_section(r: Resolved, mean: MeanPrefill | None = None) -> RoutingResult:
    """Seeds' KV-aware routing comparison: TTFT and prefill capacity when 90% vs
    30% of turns land on the worker that already holds the conversation (``mean``:
    the prefills as ``sizing.operating.mean_prefill`` computed them for the Plan)."""
    w = r.scenario.workload
    prefix = w.prefix_tokens
    mp = mean if mean is not None else mean_prefill(r)
    cold, warm = float(mp.miss.time_s), float(mp.warm.time_s)

    def mix(h: float) -> tuple[float, float]:
        t = h * warm + (1 - h) * cold
        return t, 1.0 / t

    t90, c90 = mix(0.9)
    t30, c30 = mix(0.3)
    return RoutingResult(context_tokens=w.prompt_tokens, new_tokens=w.prompt_tokens - prefix, warm_ttft_s=warm,
                         cold_ttft_s=cold, ttft_at_90pct_warm_s=t90, ttft_at_30pct_warm_s=t30,
                         prefill_req_s_at_90pct_warm=c90, prefill_req_s_at_30pct_warm=c30)
