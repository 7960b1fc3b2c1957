"""Fleet & cost: colocated vs disaggregated side by side, each headline with its derivation."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._format import MISSING, derivation_md, is_number, shown
from pages._sidebar import cached_plan, page_scenario
from planner import PlannerError, fleet_derivations, mode_scenarios


def _usd(x: float) -> str:
    return f"${x:,.2f}" if is_number(x) else MISSING


st.title("Fleet & cost")
scenario = page_scenario()
st.caption(f"Sized for {scenario.workload.peak_rate:g} req/s at peak ({scenario.workload.requests_per_s:g} mean), "
           f"target utilization {scenario.fleet.target_utilization:g}; current mode: {scenario.serving.mode}")
cols = st.columns(2)
plans, table = {}, {}
for col, (mode, sc) in zip(cols, mode_scenarios(scenario).items(), strict=True):
    with col:
        st.subheader(mode.capitalize())
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
        if mode == "colocated":
            pools = shown(f.replicas, fmt=",.0f")
        elif is_number(f.prefill_replicas) and is_number(f.decode_replicas):
            pools = f"{f.prefill_replicas:,.0f} : {f.decode_replicas:,.0f}"
        else:
            pools = MISSING
        rows = [
            ("GPUs total", shown(f.gpus_total, fmt=",.0f"), p.derivations.get("fleet.gpus_total")),
            ("Replicas (prefill : decode)", pools, extra.get("fleet.pool_ratio")),
            ("$/hour", _usd(c.usd_per_hour), p.derivations.get("cost.usd_per_hour")),
            ("$/Mtok output", _usd(c.usd_per_mtok_output), p.derivations.get("cost.usd_per_mtok_output")),
            ("$/Mtok input", _usd(c.usd_per_mtok_input), extra["cost.usd_per_mtok_input"]),
            ("$/Mtok blended", _usd(c.usd_per_mtok_blended), extra["cost.usd_per_mtok_blended"]),
            ("$/Mtok output, full load", _usd(c.usd_per_mtok_output_full_load),
             extra["cost.usd_per_mtok_output_full_load"]),
            ("$/1k requests", _usd(c.usd_per_1k_requests), extra["cost.usd_per_1k_requests"]),
            ("Cold start", shown(f.cold_start_s, "s"), extra["fleet.cold_start_s"]),
        ]
        if mode == "disaggregated":
            fits = "fits" if f.kv_transfer_fits_ttft else "does NOT fit"
            rows.append(("KV transfer", f"{shown(f.kv_transfer_s, 's')} ({fits} TTFT)", extra["fleet.kv_transfer_s"]))
        grid = st.columns(2)
        for i, (label, value, _dv) in enumerate(rows[:4]):
            grid[i % 2].metric(label, value, help=reason if value == MISSING else None)
        for label, value, dv in rows:
            table.setdefault(label, {})[mode] = value
            if dv is not None:
                with st.expander(f"{label}: {value}"):
                    st.markdown(derivation_md(dv, reason=reason))
if table:
    st.subheader("Side by side")
    st.table(pd.DataFrame(table).T.fillna("—"))
if plans:
    st.subheader("Verdict")
    st.info(next(iter(plans.values())).fleet.verdict)
    if not all(p.operating_point.feasible for p in plans.values()):
        st.caption(f"{MISSING}: no such number, since no operating point meets the SLO (the reason is above).")
    rt = next(iter(plans.values())).routing
    st.subheader("KV-aware routing on multi-turn chat")
    st.caption(f"{rt.context_tokens:,} tokens of context, {rt.new_tokens:,} new per turn "
               f"(the shared prefix is the prior conversation)")
    if scenario.workload.prefix_tokens == 0:
        st.info("Set Shared prefix tokens in the sidebar (the prior conversation) to see what warm routing saves.")
    c1, c2 = st.columns(2)
    c1.metric("TTFT, 90% of turns warm", shown(rt.ttft_at_90pct_warm_s, "s"),
              help=f"prefill capacity {rt.prefill_req_s_at_90pct_warm:,.2f} req/s per replica")
    c2.metric("TTFT, 30% of turns warm", shown(rt.ttft_at_30pct_warm_s, "s"),
              help=f"prefill capacity {rt.prefill_req_s_at_30pct_warm:,.2f} req/s per replica")
    with st.expander("How: routing"):
        st.markdown(f"`TTFT(h) = h × warm + (1 − h) × cold` with warm = `{shown(rt.warm_ttft_s, 's')}`, "
                    f"cold = `{shown(rt.cold_ttft_s, 's')}`; capacity = 1 / TTFT(h)")
