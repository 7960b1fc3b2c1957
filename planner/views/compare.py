"""Side-by-side comparison of two to four scenarios or layouts: GPUs, $/Mtok, p90
TTFT, ITL, KV headroom and a verdict, one row per figure.

"H100 vs H200 for this workload": :func:`gpu_variants` puts the scenario on each GPU,
each in its own cheapest feasible layout (TP × serving mode, the scenario's weights
precision) unless the layout is kept; a price typed for one GPU is not carried to another.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from planner.errors import ScenarioError
from planner.io.formatting import human
from planner.sizing.plan import Plan, plan
from planner.spec.scenario import Scenario, resolve_gpu, scenario_from_dict
from planner.views.referee import REFEREE_MAX_SIMULATED, Simulate, referee_pick, slo_status
from planner.views.review import sweep_row_scenario
from planner.views.sweep import sweep_result
from planner.views.vocabulary import plan_slo_checks, pools_text

__all__ = [
    "COMPARE_MAX",
    "COMPARE_MIN",
    "COMPARE_PAIRS",
    "COMPARE_TPS",
    "CompareColumn",
    "best_layout",
    "compare_columns",
    "gpu_variants",
    "layout_caption",
    "layout_label",
    "layout_variants",
    "partner_gpu",
]

COMPARE_MIN, COMPARE_MAX = 2, 4  # fewer is not a comparison; more columns stop being readable
# GPU pairs a reviewer asks about (same generation's memory step, the next generation).
COMPARE_PAIRS: tuple[tuple[str, str], ...] = (("h100-sxm", "h200-sxm"), ("h200-sxm", "b200"), ("h100-sxm", "b200"))
COMPARE_TPS: tuple[int, ...] = (1, 2, 4, 8)  # the layouts "cheapest per GPU" searches (one node)


def partner_gpu(gpu: str) -> str:
    """The GPU a comparison pairs ``gpu`` with by default (H100 ↔ H200, else H200)."""
    return "h100-sxm" if gpu == "h200-sxm" else "h200-sxm"


def layout_label(scenario: Scenario) -> str:
    """``h200-sxm fp8 TP2 disaggregated``, ``h200-sxm fp8 TP8·EP8·DPattn colocated``."""
    return f"{resolve_gpu(scenario).id} {scenario.weights_dtype} {scenario.parallel.label()} {scenario.serving.mode}"


def layout_caption(scenario: Scenario, p: Plan) -> str:
    """The layout in one line: ``TP8·EP8·DPattn: 8 GPUs on 1 node per replica; attention
    data-parallel over 8 ranks …; all-to-all 0.71 ms of a 45 ms decode step``."""
    par = scenario.parallel
    m, d = p.memory, p.decode
    text = (f"{par.label()}: {m.gpus_per_replica} GPU(s) on {m.nodes_per_replica} node(s) per replica; "
            f"{par.describe()}")
    if par.ep > 1 and par.dp_attention:
        text += f"; all-to-all {human(d.all_to_all_s, 's')} of a {human(d.step_s, 's')} decode step"
    elif par.ep > 1:
        text += "; no all-to-all (TP attention: every GPU has every token, the experts' outputs join the all-reduce)"
    return text


def _on_gpu(scenario: Scenario, gpu: str) -> Scenario:
    data = scenario.model_dump(mode="json")
    own = resolve_gpu(scenario).id
    data["gpu"] = gpu
    if gpu != own:
        data["cost"] = {**data["cost"], "usd_per_gpu_hour": None}  # a price typed for one GPU is not another's
    data["parallel"] = {**data["parallel"], "tp": 1, "pp": 1}
    return scenario_from_dict(data)


def best_layout(scenario: Scenario, gpu: str, *, referee: Simulate | None = None) -> Scenario | None:
    """The scenario on ``gpu`` in its cheapest layout ($/Mtok output) among TP 1–8 × both
    serving modes × the sweep's chunk sizes, PP 1, the scenario's weights precision, that
    meets the SLO: the sweep's refereed ``cheapest`` (with ``referee``, the cheapest whose
    short simulation meets ``slo.attainment``); None when none does."""
    base = _on_gpu(scenario, gpu)
    best = sweep_result(base, gpus=[gpu], dtypes=[scenario.weights_dtype], tps=COMPARE_TPS, pps=[1],
                        referee=referee).cheapest
    return sweep_row_scenario(base, best) if best is not None else None


def gpu_variants(scenario: Scenario, gpus: Sequence[str], *, keep_layout: bool = False,
                 referee: Simulate | None = None) -> list[tuple[str, Scenario]]:
    """(label, scenario) per GPU: the cheapest layout meeting the SLO (:func:`best_layout`,
    refereed by ``referee``), or the scenario's own layout with ``keep_layout`` or when none does."""
    out: list[tuple[str, Scenario]] = []
    for gpu in gpus:
        if keep_layout:
            data = scenario.model_dump(mode="json")
            if gpu != resolve_gpu(scenario).id:
                data["cost"] = {**data["cost"], "usd_per_gpu_hour": None}
            data["gpu"] = gpu
            sc = scenario_from_dict(data)
        else:
            sc = best_layout(scenario, gpu, referee=referee) or _on_gpu(scenario, gpu)
        out.append((layout_label(sc), sc))
    return out


def layout_variants(scenario: Scenario, layouts: Sequence[tuple[int, str]]) -> list[tuple[str, Scenario]]:
    """(label, scenario) per (TP, serving mode) on the scenario's GPU."""
    out = []
    for tp, mode in layouts:
        data = scenario.model_dump(mode="json")
        data["parallel"] = {**data["parallel"], "tp": tp}
        data["serving"] = {**data["serving"], "mode": mode}
        sc = scenario_from_dict(data)
        out.append((layout_label(sc), sc))
    return out


@dataclass(frozen=True)
class CompareColumn:
    """One option's figures (SI units; NaN where there is no number) and its verdict."""

    label: str
    scenario: Scenario
    plan: Plan
    gpus_total: float
    pools: str
    usd_per_mtok_output: float
    usd_per_hour: float
    usd_per_gpu_hour: float
    ttft_p90_s: float
    itl_s: float  # per-request TPOT at slo.itl_percentile (the statistic the ITL target is scored on)
    kv_headroom: float  # share of the KV budget free at the operating batch
    meets_slo: bool  # analytic, and not failed in simulation
    verdict: str = ""
    itl_mean_s: float = math.nan  # mean ITL at the batch (= mean TPOT)
    itl_gap_p99_s: float = math.nan  # p99 of all token gaps
    slo_attainment: float = math.nan  # analytic share of requests meeting both targets
    simulated_attainment: float | None = None  # None: not simulated
    slo_status: str = ""


def _column(label: str, scenario: Scenario) -> CompareColumn:
    p = plan(scenario)
    op = p.operating_point
    ttft, itl = plan_slo_checks(p, scenario)
    headroom = 1.0 - op.batch_size / op.max_sequences if op.feasible and op.max_sequences > 0 else math.nan
    return CompareColumn(
        label=label, scenario=scenario, plan=p, gpus_total=p.fleet.gpus_total, pools=pools_text(p),
        usd_per_mtok_output=p.cost.usd_per_mtok_output, usd_per_hour=p.cost.usd_per_hour,
        usd_per_gpu_hour=p.cost.usd_per_gpu_hour, ttft_p90_s=ttft.value_s if op.feasible else math.nan,
        itl_s=itl.value_s if op.feasible else math.nan, kv_headroom=headroom,
        meets_slo=bool(op.feasible),  # the plan's own verdict: attainment, KV fit, prefill keeping up
        itl_mean_s=op.itl_s if op.feasible else math.nan, itl_gap_p99_s=op.itl_gap_p99_s if op.feasible else math.nan,
        slo_attainment=op.slo_attainment)


def compare_columns(options: Sequence[tuple[str, Scenario]], *, referee: Simulate | None = None,
                    referee_cap: int = REFEREE_MAX_SIMULATED) -> list[CompareColumn]:
    """Plan each option and give each a verdict: the cheapest option meeting the SLO
    (:func:`planner.views.referee.referee_pick`: with ``referee``, the cheapest whose short
    simulation meets ``slo.attainment``), the others' extra cost against it, or why an option misses."""
    if not COMPARE_MIN <= len(options) <= COMPARE_MAX:
        raise ScenarioError(f"compare: choose {COMPARE_MIN} to {COMPARE_MAX} options, got {len(options)}")
    labels = [label for label, _ in options]
    if len(set(labels)) != len(labels):  # two columns with one name: number them
        options = [(f"{i + 1}. {label}", sc) for i, (label, sc) in enumerate(options)]
    cols = [_column(label, sc) for label, sc in options]
    costs = [c.usd_per_mtok_output if c.meets_slo and math.isfinite(c.usd_per_mtok_output) else math.inf
             for c in cols]
    target = cols[0].scenario.slo.attainment
    pick = referee_pick(lambda i: cols[i].scenario, costs, target=target, simulate=referee, cap=referee_cap)
    best = cols[pick.pick] if pick.pick is not None else None
    out = []
    for i, c in enumerate(cols):
        sim = pick.attainment_of(i)
        t = c.scenario.slo.attainment
        status = slo_status(feasible=c.meets_slo, attainment=sim, target=t)
        if not c.meets_slo:
            reason = c.plan.operating_point.reason
            verdict = f"misses the SLO ({reason})" if reason and reason != "misses the SLO" else "misses the SLO"
        elif pick.failed(i):
            verdict = f"misses the SLO in simulation ({sim:.0%} of requests meet both targets < {t:.0%})"
        elif c is best:
            verdict = "cheapest that meets the SLO" + (f" (simulated: {sim:.0%} ≥ {t:.0%})" if sim is not None else "")
        elif best is None:
            verdict = "meets the SLO analytically (not simulated: no cheaper option passed its simulation)"
        else:
            extra = c.usd_per_mtok_output / best.usd_per_mtok_output - 1.0
            how = f" (simulated: {sim:.0%})" if sim is not None else " (analytic, not simulated)" if pick.refereed else ""
            verdict = f"meets the SLO, {extra:+.0%} $/Mtok vs {best.label}{how}"
        out.append(replace(c, verdict=verdict, meets_slo=c.meets_slo and not pick.failed(i),
                           simulated_attainment=sim, slo_status=status))
    return out
