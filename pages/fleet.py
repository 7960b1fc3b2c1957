"""Fleet & cost: colocated vs disaggregated side by side, each with its SLO check,
its simulated check and every headline's derivation."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._format import MISSING, check_line, derivation_md, is_number, md, shown, usd
from pages._review import cached_fleet_check
from pages._sidebar import cached_plan, page_scenario
from planner import (
    PlannerError,
    Scenario,
    blended_note,
    fleet_derivations,
    mode_scenarios,
    mode_verdict,
    plan_attainment,
    plan_slo_checks,
    pool_rows,
)
from planner.simulate.referee import simulated_attainment


@st.cache_data(max_entries=128, show_spinner=False)
def _mode_verdict(scenario_json: str) -> str:
    """The colocated/disaggregated verdict refereed by the simulator (one decision: planner.views.referee)."""
    text = mode_verdict(Scenario.model_validate_json(scenario_json), referee=simulated_attainment)[0]
    return text[:1].upper() + text[1:]

st.title("Fleet & cost")
scenario = page_scenario()
w = scenario.workload
st.caption(f"Sized for {shown(w.peak_rate, 'req/s')} at peak ({shown(w.requests_per_s, 'req/s')} mean) at "
           f"{scenario.fleet.target_utilization:.0%} target utilization, at least {scenario.fleet.min_replicas} "
           f"replica(s) per pool; the sidebar's mode is {scenario.serving.mode}.")
cols = st.columns(2)
plans, table = {}, {}
for col, (mode, sc) in zip(cols, mode_scenarios(scenario).items(), strict=True):
    with col:
        st.subheader(mode.capitalize() + (" (the sidebar's mode)" if mode == scenario.serving.mode else ""))
        try:
            p = plans[mode] = cached_plan(sc)
        except PlannerError as exc:
            st.error(str(exc))
            continue
        f, c, op = p.fleet, p.cost, p.operating_point
        reason = None if op.feasible else f"no operating point meets the SLO: {op.reason}"
        if reason:
            st.error(reason[0].upper() + reason[1:])
        extra = fleet_derivations(scenario=sc, plan=p)
        rows = [("GPUs total", shown(f.gpus_total, fmt=",.0f"), p.derivations.get("fleet.gpus_total"))]
        if mode == "disaggregated":
            pools = (f"{f.prefill_replicas:,.0f} : {f.decode_replicas:,.0f}"
                     + (f" ({p.pools.xpyd})" if p.pools and p.pools.xpyd else "")
                     if is_number(f.prefill_replicas) and is_number(f.decode_replicas) else MISSING)
            rows.append(("Replicas (prefill : decode)", pools, extra.get("fleet.pool_ratio")))
        else:
            rows.append(("Replicas", shown(f.replicas, fmt=",.0f"), None))
        rows += [
            ("$/hour", usd(c.usd_per_hour), p.derivations.get("cost.usd_per_hour")),
            ("$/Mtok output", usd(c.usd_per_mtok_output), p.derivations.get("cost.usd_per_mtok_output")),
            ("$/Mtok input", usd(c.usd_per_mtok_input), extra["cost.usd_per_mtok_input"]),
            ("$/Mtok blended", usd(c.usd_per_mtok_blended), extra["cost.usd_per_mtok_blended"]),
            ("$/Mtok output, full load", usd(c.usd_per_mtok_output_full_load),
             extra["cost.usd_per_mtok_output_full_load"]),
            ("$/1k requests", usd(c.usd_per_1k_requests), extra["cost.usd_per_1k_requests"]),
            ("Cold start (weight load)", shown(f.cold_start_s, "s"), extra["fleet.cold_start_s"]),
        ]
        if mode == "disaggregated":
            fits = "fits within" if f.kv_transfer_fits_ttft else "does NOT fit"
            rows.append(("KV transfer per request", f"{shown(f.kv_transfer_s, 's')} ({fits} the TTFT target)",
                         extra["fleet.kv_transfer_s"]))
            # Each pool's GPU, layout, GPUs and price (planner.views.pools; the sums: pools.* derivations).
            for (label, value), key in zip(pool_rows(p), ("pools.xpyd", "pools.usd_per_hour", None), strict=False):
                rows.append((label, value, p.derivations.get(key) if key else None))
        for label, value, _dv in rows[:4]:  # one to a row: the labels fit the half page at 1024 px
            st.metric(label, value, help=reason if value == MISSING else None)
        checks = plan_slo_checks(p, sc)
        att = plan_attainment(p, sc)
        st.markdown("  \n".join([check_line(ch) for ch in checks] + [att.sentence()]))
        for label, value, _dv in rows:
            table.setdefault("Replicas" if label.startswith("Replicas") else label, {})[mode] = (
                f"{value} (prefill : decode)" if label.startswith("Replicas (") and value != MISSING else value)
        if mode == "colocated":
            table.setdefault("KV transfer per request", {})[mode] = "none (one pool)"
        for ch in checks:
            table.setdefault(ch.label + " (target " + shown(ch.target_s, "s") + ")", {})[mode] = shown(ch.value_s, "s")
        table.setdefault("ITL mean · no queueing", {})[mode] = shown(op.itl_s, "s") if op.feasible else MISSING
        table.setdefault("Token-gap p99 (chunk stall)", {})[mode] = (shown(op.itl_gap_p99_s, "s") if op.feasible
                                                                     else MISSING)
        table.setdefault(f"Requests meeting both targets, analytic (target ≥ {att.target:.0%})", {})[mode] = (
            f"{att.value:.1%}" if att.passed is not None else MISSING)
        if op.feasible and (check := cached_fleet_check(sc)) is not None:
            (st.success if check.passed else st.warning)(check.sentence())
            table.setdefault(f"Requests meeting both targets, simulated (target ≥ {check.target:.0%})",
                             {})[mode] = f"{check.attainment:.1%}"
        for label, value, dv in rows:
            if dv is not None:
                with st.expander(md(f"{label}: {value}")):
                    st.markdown(derivation_md(dv, reason=reason))
if table:
    st.subheader("Side by side")
    st.table(pd.DataFrame(table).T.fillna(MISSING))
if plans:
    st.subheader("Verdict")
    st.info(_mode_verdict(scenario.model_dump_json()))
    st.caption(f"Analytic: {next(iter(plans.values())).fleet.verdict}.")
    if note := blended_note(next(iter(plans.values()))):
        st.caption(md(note))
    if not all(p.operating_point.feasible for p in plans.values()):
        st.caption(f"{MISSING}: no such number, since no operating point meets the SLO (the reason is above).")
    rt = next(iter(plans.values())).routing
    st.subheader("KV-aware routing on multi-turn chat")
    st.caption(f"{rt.context_tokens:,} tokens of context, {rt.new_tokens:,} new per turn "
               f"(the shared prefix is the prior conversation); prefill time only, no queueing")
    if scenario.workload.prefix_tokens == 0:
        st.info("Set Shared prefix tokens in the sidebar (the prior conversation) to see what warm routing saves.")
    c1, c2 = st.container(), st.container()  # full width: the labels carry their statistic and warm share
    c1.metric("TTFT mean · no queueing, 90% of turns warm", shown(rt.ttft_at_90pct_warm_s, "s"),
              help=f"prefill capacity {shown(rt.prefill_req_s_at_90pct_warm, 'req/s')} per replica")
    c2.metric("TTFT mean · no queueing, 30% of turns warm", shown(rt.ttft_at_30pct_warm_s, "s"),
              help=f"prefill capacity {shown(rt.prefill_req_s_at_30pct_warm, 'req/s')} per replica")
    with st.expander("How: routing"):
        st.markdown(f"`TTFT(h) = h × warm + (1 − h) × cold` with warm = `{shown(rt.warm_ttft_s, 's')}`, "
                    f"cold = `{shown(rt.cold_ttft_s, 's')}`; capacity = 1 / TTFT(h)")
