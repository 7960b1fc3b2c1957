"""The alternatives a review compares the plan with: the other serving mode,
the same layout on the H100 and the H200, and the cheapest layout on each
catalog GPU (the sweep, at the scenario's weights format)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.sizing.plan import Plan, plan
from planner.spec.catalog import load_catalog
from planner.spec.parallel import Parallel
from planner.spec.scenario import Scenario, scenario_from_dict
from planner.views.report.numbers import count, is_number, quantity, usd
from planner.views.review import mode_scenarios
from planner.views.sweep import sweep

__all__ = ["CHEAPEST_GPUS_MAX", "COMPARED_GPUS", "Alternative", "alternatives"]

# The comparison a capacity review asks first ("H100 or H200?"): the plan's own
# layout on each of these catalog GPUs.
COMPARED_GPUS: tuple[str, ...] = ("h100-sxm", "h200-sxm")
# How many GPUs' cheapest layouts the report lists (cheapest first); a table a reader can scan.
CHEAPEST_GPUS_MAX = 6
MISSES = "misses the SLO"


@dataclass(frozen=True)
class Alternative:
    """One option beside the plan, every value as text (numbers kept for the chart)."""

    option: str
    gpu: str
    layout: str
    mode: str
    gpus_total: str
    usd_per_mtok_output: str
    ttft_p90: str
    itl: str
    verdict: str
    feasible: bool
    is_plan: bool
    gpus_value: float | None
    usd_value: float | None


def _key(gpu: str, tp: int, pp: int, ep: int, mode: str, dp: bool = False) -> tuple[str, int, int, int, str, bool]:
    return gpu, tp, pp, ep, mode, dp


def _from_plan(option: str, s: Scenario, p: Plan, *, is_plan: bool = False) -> Alternative:
    op, f, c = p.operating_point, p.fleet, p.cost
    why = f"{MISSES}: {op.reason}" if not op.feasible else ""
    par = s.parallel
    return Alternative(
        option=option, gpu=p.gpu, layout=par.label(),
        mode=f.mode, gpus_total=count(f.gpus_total, MISSES), usd_per_mtok_output=usd(c.usd_per_mtok_output, MISSES),
        ttft_p90=quantity(op.ttft_p90_s, "s", "queue unstable"), itl=quantity(op.itl_s, "s"),
        verdict="meets the SLO" if op.feasible else why, feasible=op.feasible, is_plan=is_plan,
        gpus_value=f.gpus_total if is_number(f.gpus_total) else None,
        usd_value=c.usd_per_mtok_output if is_number(c.usd_per_mtok_output) else None)


def _from_row(option: str, row: dict[str, Any]) -> Alternative:
    feasible = bool(row["feasible"])
    gpus, cost = row.get("gpus_total"), row.get("usd_per_mtok_output")
    return Alternative(
        option=option, gpu=str(row["gpu"]),
        layout=Parallel(tp=int(row["tp"]), pp=int(row["pp"]), ep=int(row["ep"]),
                        dp_attention=bool(row.get("dp_attention", False))).label(),
        mode=str(row["mode"]), gpus_total=count(gpus, MISSES), usd_per_mtok_output=usd(cost, MISSES),
        ttft_p90=quantity(row.get("ttft_p90_s"), "s", "not evaluated"),
        itl=quantity(row.get("itl_s"), "s", "not evaluated"),
        verdict="meets the SLO" if feasible else f"{MISSES}: {row['reason']}", feasible=feasible, is_plan=False,
        gpus_value=float(gpus) if feasible and gpus is not None and is_number(gpus) else None,
        usd_value=float(cost) if feasible and cost is not None and is_number(cost) else None)


def _on_gpu(s: Scenario, gpu: str) -> Scenario:
    data = s.model_dump(mode="json")
    data["gpu"] = gpu
    return scenario_from_dict(data)


def alternatives(scenario: Scenario, p: Plan) -> tuple[tuple[Alternative, ...], str]:
    """(options, a note on what was compared).  The plan comes first, then the
    options by $/Mtok output (those that miss the SLO last)."""
    par = scenario.parallel
    seen = {_key(p.gpu, par.tp, par.pp, par.ep, p.fleet.mode, par.dp_attention)}
    out = [_from_plan("This plan", scenario, p, is_plan=True)]
    others: list[Alternative] = []
    for mode, sc in mode_scenarios(scenario).items():
        if mode != scenario.serving.mode:
            seen.add(_key(p.gpu, par.tp, par.pp, par.ep, mode, par.dp_attention))
            others.append(_from_plan(f"Same layout, {mode}", sc, plan(sc)))
    cat = load_catalog()
    for gid in COMPARED_GPUS:
        if gid in cat.gpus and gid != p.gpu:
            sc = _on_gpu(scenario, gid)
            seen.add(_key(gid, par.tp, par.pp, par.ep, scenario.serving.mode, par.dp_attention))
            others.append(_from_plan(f"Same layout on {gid}", sc, plan(sc)))
    rows = sweep(scenario, dtypes=[scenario.weights_dtype])["rows"]
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        cur = best.get(row["gpu"])
        if row["feasible"] and (cur is None or row["usd_per_mtok_output"] < cur["usd_per_mtok_output"]):
            best[row["gpu"]] = row
    ranked = sorted(best.values(), key=lambda r: r["usd_per_mtok_output"])[:CHEAPEST_GPUS_MAX]
    for row in ranked:
        k = _key(row["gpu"], row["tp"], row["pp"], row["ep"], row["mode"], bool(row.get("dp_attention", False)))
        if k not in seen:
            seen.add(k)
            others.append(_from_row(f"Cheapest on {row['gpu']}", row))
    others.sort(key=lambda a: (a.usd_value is None, a.usd_value or 0.0))
    out += others
    none_fit = sorted({r["gpu"] for r in rows} - set(best))
    price = ("the scenario's price applies to every GPU" if scenario.cost.usd_per_gpu_hour is not None
             else "each GPU at its catalog price")
    parts = [f"Weights {scenario.weights_dtype}; layouts TP 1–8 × PP 1–2 in both serving modes, {price}."]
    if len(ranked) < len(best):
        parts.append(f"{len(best) - len(ranked)} more GPU(s) meet the SLO at a higher $/Mtok and are not listed.")
    if none_fit:
        parts.append(f"No layout meets the SLO on {', '.join(none_fit)}.")
    note = " ".join(parts)
    return tuple(out), note.strip()
