"""Review helpers for the dashboard: derived views over a Plan, a sweep or saved
scenarios that the pages show but ``plan`` does not carry.

Pure functions, no Streamlit: the fleet/cost derivations with substituted
values, the two serving-mode variants of a scenario, the scenario a sweep row
describes, and the differing inputs of several scenarios.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from planner.errors import ScenarioError
from planner.io.export import flatten
from planner.physics.link import DEFAULT_KV_LINK_EFFICIENCY, kv_link_bytes_per_s
from planner.sizing.operating import workload_stats
from planner.sizing.plan import Plan
from planner.spec.context import resolve
from planner.spec.derivation import Derivation, fmt_num
from planner.spec.scenario import Scenario, scenario_from_dict
from planner.views.pools import pool_derivations
from planner.views.referee import RefereePick, Simulate, referee_pick
from planner.views.sweep import SweepRow

__all__ = [
    "MODES",
    "RATE_GRID_FRACTIONS",
    "fleet_derivations",
    "input_differences",
    "knee_rate_grid",
    "mode_scenarios",
    "mode_verdict",
    "sweep_row_scenario",
]

MODES: tuple[str, ...] = ("colocated", "disaggregated")


def mode_scenarios(scenario: Scenario) -> dict[str, Scenario]:
    """The scenario with ``serving.mode`` set to each mode (colocated first)."""
    return {m: scenario.model_copy(update={"serving": scenario.serving.model_copy(update={"mode": m})})
            for m in MODES}


def mode_verdict(scenario: Scenario, *, referee: Simulate | None) -> tuple[str, RefereePick]:
    """The Plan verdict between colocated and disaggregated, refereed: the mode with fewer
    GPUs (colocated on a tie: one pool, no KV transfer) whose short simulation meets
    ``slo.attainment`` (:func:`planner.views.referee.referee_pick`)."""
    from planner.sizing.plan import plan

    scs = mode_scenarios(scenario)
    plans = {m: plan(sc) for m, sc in scs.items()}
    gpus = [plans[m].fleet.gpus_total if plans[m].operating_point.feasible else float("inf") for m in MODES]
    pick = referee_pick(lambda i: scs[MODES[i]], gpus, target=scenario.slo.attainment, simulate=referee)
    parts = []
    for i, m in enumerate(MODES):
        op = plans[m].operating_point
        if not op.feasible:
            parts.append(f"{m}: misses ({op.reason})")
            continue
        a = pick.attainment_of(i)
        sim = ("not simulated" if a is None else f"simulated {a:.0%} {'≥' if a + 1e-12 >= pick.target else '<'} "
               f"{pick.target:.0%}")
        parts.append(f"{m}: {gpus[i]:,.0f} GPUs ({sim})")
    detail = "; ".join(parts)
    if pick.pick is None:
        head = ("neither mode meets the SLO" if pick.offered == 0 else
                "neither mode passed its simulation" if pick.refereed else "no mode meets the SLO")
        return f"{head}: {detail}", pick
    m = MODES[pick.pick]
    why = "" if pick.refereed else " (analytic, not simulated)"
    return f"{m} is the recommendation{why}: {detail}", pick


def fleet_derivations(*, scenario: Scenario, plan: Plan) -> dict[str, Derivation]:
    """Derivations of the Fleet & cost headlines ``plan.derivations`` does not
    hold (pool ratio, KV transfer, cold start, $/Mtok in/blended/full load,
    $/1k requests), each with the values substituted."""
    r = resolve(scenario)
    stats = workload_stats(r)
    w, f, c, m = scenario.workload, plan.fleet, plan.cost, plan.memory
    mean_in, mean_out = stats.mean_prompt, stats.mean_output
    out_mtok_h = w.requests_per_s * mean_out * 3600 / 1e6
    in_mtok_h = w.requests_per_s * mean_in * 3600 / 1e6
    link = kv_link_bytes_per_s(r.gpu, link=scenario.fleet.link, link_bytes_per_s=scenario.fleet.link_bytes_per_s)
    g = f.gpus_per_replica
    gpu_per_req_s = g / f.decode_req_s_per_replica if f.decode_req_s_per_replica else float("nan")
    if f.mode == "disaggregated" and f.prefill_req_s_per_replica:
        gpu_per_req_s += g / f.prefill_req_s_per_replica
    d = {
        "fleet.kv_transfer_s": Derivation(
            name="fleet.kv_transfer_s",
            formula="mean prompt × KV bytes/token per GPU / (link efficiency × one direction of each GPU's link); "
                    "TP shards move in parallel, layer by layer behind the prefill (exposed part: "
                    "fleet.kv_transfer_exposed_s)",
            substituted=f"{fmt_num(mean_in)} × {fmt_num(m.kv_bytes_per_token_per_gpu * scenario.parallel.pp)} / "
                        f"({DEFAULT_KV_LINK_EFFICIENCY} × {fmt_num(link)})",
            value=f.kv_transfer_s, unit="s"),
        "fleet.cold_start_s": Derivation(
            name="fleet.cold_start_s", formula="weight bytes per GPU / load bytes/s per GPU",
            substituted=f"{fmt_num(m.weight_bytes_per_gpu)} / {fmt_num(scenario.fleet.load_bytes_per_s)}",
            value=f.cold_start_s, unit="s", origin="derived"),
        "cost.usd_per_mtok_input": Derivation(
            name="cost.usd_per_mtok_input", formula="$/hour / (mean req/s × prompt tokens × 3600 / 1e6)",
            substituted=f"{fmt_num(c.usd_per_hour)} / ({fmt_num(w.requests_per_s)} × {fmt_num(mean_in)} × 3600 / 1e6)",
            value=c.usd_per_mtok_input, unit="USD/Mtok"),
        "cost.usd_per_mtok_blended": Derivation(
            name="cost.usd_per_mtok_blended", formula="$/hour / (input + output Mtok per hour)",
            substituted=f"{fmt_num(c.usd_per_hour)} / ({fmt_num(in_mtok_h)} + {fmt_num(out_mtok_h)})",
            value=c.usd_per_mtok_blended, unit="USD/Mtok"),
        "cost.usd_per_1k_requests": Derivation(
            name="cost.usd_per_1k_requests", formula="$/hour / (mean req/s × 3600 / 1000)",
            substituted=f"{fmt_num(c.usd_per_hour)} / ({fmt_num(w.requests_per_s)} × 3.6)",
            value=c.usd_per_1k_requests, unit="USD/1k req"),
        "cost.usd_per_mtok_output_full_load": Derivation(
            name="cost.usd_per_mtok_output_full_load",
            formula="$/GPU-hour × GPUs per (req/s of SLO capacity) / (output tokens × 3600 / 1e6): no idle time",
            substituted=f"{fmt_num(c.usd_per_gpu_hour)} × {fmt_num(gpu_per_req_s)} / ({fmt_num(mean_out)} × 3600 / 1e6)",
            value=c.usd_per_mtok_output_full_load, unit="USD/Mtok"),
    }
    if f.mode == "disaggregated":
        ratio = f.prefill_replicas / f.decode_replicas if f.decode_replicas else float("nan")
        d["fleet.pool_ratio"] = Derivation(
            name="fleet.pool_ratio", formula="prefill replicas / decode replicas, each ⌈peak / (u × per-replica req/s)⌉",
            substituted=f"{fmt_num(f.prefill_replicas)} / {fmt_num(f.decode_replicas)} (prefill "
                        f"{fmt_num(f.prefill_req_s_per_replica)} req/s, decode {fmt_num(f.decode_req_s_per_replica)} "
                        "req/s per replica)",
            value=ratio, unit="")
    d.update(pool_derivations(scenario=scenario, plan=plan))  # pools with their own GPU or layout
    return d


def sweep_row_scenario(base: Scenario, row: SweepRow | Mapping[str, Any]) -> Scenario:
    """The scenario a sweep row describes: ``base`` with the row's GPU, weights
    dtype, TP, PP, EP, DP attention, chunk size and serving mode; ``plan`` of it gives the row's
    feasibility, GPUs and $/Mtok (``base`` being the scenario the sweep ran on)."""
    data = base.model_dump(mode="json")
    values = row.to_dict() if isinstance(row, SweepRow) else row
    try:
        data["gpu"] = str(values["gpu"])
        data["weights_dtype"] = str(values["weights_dtype"])
        dp = values.get("dp_attention", False)
        # The sweep's candidates run without the scenario's redundant experts (planner.views.sweep).
        data["parallel"] = {**data["parallel"], "tp": int(values["tp"]), "pp": int(values["pp"]),
                            "ep": int(values["ep"]), "redundant_experts": 0,
                            "dp_attention": dp if isinstance(dp, bool) else str(dp).strip().lower() in ("true", "1")}
        data["serving"] = {**data["serving"], "mode": str(values["mode"]),
                           "chunk_tokens": int(values["chunk_tokens"])}
    except KeyError as exc:
        raise ScenarioError(f"sweep row: missing {exc.args[0]!r}") from None
    return scenario_from_dict(data)


def input_differences(scenarios: Sequence[Scenario]) -> list[dict[str, Any]]:
    """One row per input (dotted key) with each scenario's value and ``differs``;
    inputs that differ come first."""
    flats = []
    for s in scenarios:
        data = s.model_dump(mode="json")
        for key in ("gpu", "model"):
            if isinstance(data[key], dict):
                data[key] = f"inline:{data[key]['id']}"
        flats.append(flatten(data))
    keys = list(dict.fromkeys(k for fl in flats for k in fl))
    rows = []
    for k in keys:
        values = [fl.get(k) for fl in flats]
        rows.append({"input": k, "values": values, "differs": any(v != values[0] for v in values[1:])})
    rows.sort(key=lambda row: not row["differs"])
    return rows


RATE_GRID_FRACTIONS: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def knee_rate_grid(*, plan: Plan, scenario: Scenario, replicas: int) -> tuple[float, ...]:
    """Offered rates for a simulated goodput curve: fractions of the analytic
    capacity (replicas × goodput per replica at the operating point; the
    workload's own rate when no operating point meets the SLO), so the knee
    falls inside the sweep."""
    per = plan.operating_point.goodput_req_s_per_replica if plan.operating_point.feasible else 0.0
    cap = replicas * per if per > 0 else scenario.workload.requests_per_s
    return tuple(round(cap * f, 3) for f in RATE_GRID_FRACTIONS)
