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
from planner.sizing.plan import Plan, plan
from planner.spec.scenario import Scenario, resolve_gpu, scenario_from_dict
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
    """``h200-sxm fp8 TP2 disaggregated``."""
    p = scenario.parallel
    pp = f"·PP{p.pp}" if p.pp > 1 else ""
    ep = f"·EP{p.ep}" if p.ep > 1 else ""
    return f"{resolve_gpu(scenario).id} {scenario.weights_dtype} TP{p.tp}{pp}{ep} {scenario.serving.mode}"


def _on_gpu(scenario: Scenario, gpu: str) -> Scenario:
    data = scenario.model_dump(mode="json")
    own = resolve_gpu(scenario).id
    data["gpu"] = gpu
    if gpu != own:
        data["cost"] = {**data["cost"], "usd_per_gpu_hour": None}  # a price typed for one GPU is not another's
    data["parallel"] = {**data["parallel"], "tp": 1, "pp": 1}
    return scenario_from_dict(data)


def best_layout(scenario: Scenario, gpu: str) -> Scenario | None:
    """The scenario on ``gpu`` in its cheapest feasible layout ($/Mtok output) among
    TP 1–8 × both serving modes, PP 1, the scenario's weights precision; None when none is feasible."""
    base = _on_gpu(scenario, gpu)
    rows = [r for r in sweep_result(base, gpus=[gpu], dtypes=[scenario.weights_dtype], tps=COMPARE_TPS, pps=[1]).rows
            if r.feasible and r.usd_per_mtok_output is not None and r.gpus_total is not None]
    if not rows:
        return None
    best = min(rows, key=lambda r: (r.usd_per_mtok_output or 0.0, r.gpus_total or 0.0, r.tp))
    return sweep_row_scenario(base, best)


def gpu_variants(scenario: Scenario, gpus: Sequence[str], *, keep_layout: bool = False) -> list[tuple[str, Scenario]]:
    """(label, scenario) per GPU: the cheapest feasible layout (or the scenario's own
    layout with ``keep_layout``, or when no layout is feasible)."""
    out: list[tuple[str, Scenario]] = []
    for gpu in gpus:
        if keep_layout:
            data = scenario.model_dump(mode="json")
            if gpu != resolve_gpu(scenario).id:
                data["cost"] = {**data["cost"], "usd_per_gpu_hour": None}
            data["gpu"] = gpu
            sc = scenario_from_dict(data)
        else:
            sc = best_layout(scenario, gpu) or _on_gpu(scenario, gpu)
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
    itl_s: float  # at slo.itl_percentile (the ITL the SLO is checked on)
    kv_headroom: float  # share of the KV budget free at the operating batch
    meets_slo: bool
    verdict: str = ""


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
        meets_slo=bool(op.feasible))  # the plan's own verdict: the checks above, KV fit, prefill keeping up


def compare_columns(options: Sequence[tuple[str, Scenario]]) -> list[CompareColumn]:
    """Plan each option and give each a verdict: the cheapest option meeting the SLO,
    the others' extra cost against it, or why an option misses."""
    if not COMPARE_MIN <= len(options) <= COMPARE_MAX:
        raise ScenarioError(f"compare: choose {COMPARE_MIN} to {COMPARE_MAX} options, got {len(options)}")
    labels = [label for label, _ in options]
    if len(set(labels)) != len(labels):  # two columns with one name: number them
        options = [(f"{i + 1}. {label}", sc) for i, (label, sc) in enumerate(options)]
    cols = [_column(label, sc) for label, sc in options]
    ok = [c for c in cols if c.meets_slo and math.isfinite(c.usd_per_mtok_output)]
    best = min(ok, key=lambda c: (c.usd_per_mtok_output, c.gpus_total)) if ok else None
    out = []
    for c in cols:
        if not c.meets_slo:
            reason = c.plan.operating_point.reason
            verdict = f"misses the SLO ({reason})" if reason and reason != "misses the SLO" else "misses the SLO"
        elif c is best or best is None:
            verdict = "cheapest that meets the SLO"
        else:
            extra = c.usd_per_mtok_output / best.usd_per_mtok_output - 1.0
            verdict = f"meets the SLO, {extra:+.0%} $/Mtok vs {best.label}"
        out.append(replace(c, verdict=verdict))
    return out
