"""The answer block Plan and Fleet & cost share: GPUs, replicas per pool, $/Mtok,
the SLO check (each target beside the value it is checked on), the simulated check
of the plan's fleet, and plausibility warnings."""

from __future__ import annotations

import streamlit as st

from pages._format import MISSING, check_line, md, shown, usd
from planner import Plan, Scenario, blended_note, plan_headline, plausibility_warnings, price_source
from planner.simulate import FleetCheck, fleet_check


@st.cache_data(max_entries=256, show_spinner=False)
def _check(scenario_json: str) -> FleetCheck | None:
    from planner import plan

    scenario = Scenario.model_validate_json(scenario_json)
    return fleet_check(plan(scenario), scenario)


def cached_fleet_check(scenario: Scenario) -> FleetCheck | None:
    """``planner.simulate.fleet_check`` on the scenario's plan, cached on its JSON."""
    return _check(scenario.model_dump_json())


def show_headline(result: Plan, scenario: Scenario) -> None:
    """Four headline metrics and the SLO check lines."""
    h = plan_headline(result, scenario)
    why = h.reason[:1].upper() + h.reason[1:] if h.reason else None
    if why:
        st.error(why)
    cols = st.columns(4)
    cols[0].metric("GPUs", shown(h.gpus_total, fmt=",.0f"), help=why or f"{h.gpus_per_replica} per replica")
    f = result.fleet
    if h.mode == "disaggregated":
        pools = (f"{f.prefill_replicas:,.0f} + {f.decode_replicas:,.0f}" if h.feasible else MISSING)
        cols[1].metric("Replicas (prefill + decode)", pools,
                       help=why or f"{h.pools}, {h.gpus_per_replica} GPU(s) each; sized for the peak at the target utilization")
    else:
        cols[1].metric("Replicas", shown(f.replicas, fmt=",.0f"),
                       help=why or f"colocated, {h.gpus_per_replica} GPU(s) each; sized for the peak at the target utilization")
    price = price_source(gpu=scenario.gpu, usd_per_gpu_hour=scenario.cost.usd_per_gpu_hour)
    cols[2].metric("$/Mtok output", usd(h.usd_per_mtok_output),
                   help=why or md(f"blended (input + output) {usd(h.usd_per_mtok_blended)}/Mtok; "
                                  f"fleet {usd(h.usd_per_hour)}/hour; price: {price}"))
    slo = "met" if h.slo_met else ("—" if not h.feasible else "missed")
    cols[3].metric("SLO", slo, help=why or "the share of requests meeting both targets, as the plan computes it "
                                           "(below); the simulated check follows")
    lines = [check_line(c) for c in h.checks]
    if h.attainment is not None:
        a = h.attainment
        mark = (":green[:material/check_circle: **pass**]" if a.passed else
                ":red[:material/cancel: **fail**]" if a.passed is False else "")
        lines.append(f"{a.sentence()} {mark}".strip())
    st.markdown("  \n".join(lines))
    if not h.checks[0].why_missing:
        gap = (f" The token-gap p99 (the stall a prefill chunk adds to one iteration) is "
               f"{shown(h.attainment.gap_p99_s, 's')}." if h.attainment is not None else "")
        st.caption(f"How: a request meets the SLO when its TTFT and its TPOT (its own mean inter-token time) meet "
                   f"the targets, and the plan when at least {scenario.slo.attainment:.0%} of requests do. "
                   f"TTFT p90 is {h.checks[0].basis.removeprefix('analytic: ')}; "
                   f"TPOT {h.checks[1].stat} is the {h.checks[1].basis.removeprefix('analytic: ')}, at least the "
                   f"mean ITL.{gap}")
    if h.feasible and (note := blended_note(result)):
        st.caption(md(note))


def show_fleet_check(result: Plan, scenario: Scenario) -> None:
    """The simulated check of the plan's fleet: a success line, or a warning when it misses."""
    if not result.operating_point.feasible:
        st.caption(f"Simulated check: {MISSING} (no fleet to simulate: no operating point meets the SLO).")
        return
    check = cached_fleet_check(scenario)
    if check is None:
        return
    if check.passed:
        st.success(check.sentence())
    else:
        st.warning(check.sentence() + " The analytic plan is optimistic here: see the Tail latency page.")


def show_plausibility(result: Plan, scenario: Scenario) -> None:
    for w in plausibility_warnings(scenario, result):
        st.warning(md(w))
