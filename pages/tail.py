"""Tail latency: the iteration-level simulator on the sidebar scenario."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._sidebar import page_plan, page_scenario
from planner import PlannerError, Scenario, knee_rate_grid
from planner.simulate import SimOptions, rate_sweep, sim_options, simulate, summarize

ROUTERS = ("round_robin", "least_loaded", "prefix_affinity")


@st.cache_data(max_entries=64, show_spinner=False)
def _run(scenario_json: str, options_json: str) -> dict[str, Any]:
    s, o = Scenario.model_validate_json(scenario_json), SimOptions.model_validate_json(options_json)
    return summarize(simulate(s, o), slo_ttft_s=s.slo.ttft_s, slo_itl_s=s.slo.itl_s, timeline=True)


@st.cache_data(max_entries=32, show_spinner=False)
def _rates(scenario_json: str, options_json: str, rates: tuple[float, ...]) -> dict[str, Any]:
    return rate_sweep(Scenario.model_validate_json(scenario_json), SimOptions.model_validate_json(options_json), rates)


st.title("Tail latency")
scenario = page_scenario()
sj = scenario.model_dump_json()
plan = page_plan(scenario)
c = st.columns(4)
n = c[0].number_input("Requests", 50, 20_000, 400, 100, key="tl_requests")
replicas = c[1].number_input("Replicas", 1, 64, max(1, int(plan.fleet.replicas)) if plan.operating_point.feasible and scenario.serving.mode == "colocated" else 1,
                            key="tl_replicas", help="default: the plan's colocated replicas")
seed = c[2].number_input("Seed", 0, 10_000, 0, key="tl_seed")
turns = c[3].number_input("Chat turns (router comparison)", 2, 20, 4, key="tl_turns")
try:
    opts = sim_options(requests=int(n), replicas=int(replicas), seed=int(seed))
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
progress = st.progress(0.0, text="Simulating at the scenario's rate")
one = _run(sj, opts.model_dump_json())
st.subheader(f"Percentiles at {scenario.workload.requests_per_s:g} req/s")
st.dataframe(pd.DataFrame({k: {p: one[f"{k}_s"][p] * 1e3 for p in ("p50", "p90", "p99")} for k in ("ttft", "itl", "e2e")})
             .T.rename(columns=lambda p: f"{p} (ms)").round(1), key="tl_pct")
m = st.columns(3)
m[0].metric("SLO attainment", f"{one['slo_attainment']:.1%}")
m[1].metric("Goodput", f"{one['goodput_req_s']:.2f} req/s")
m[2].metric("Preemptions", f"{one['preemptions']}")
progress.progress(0.4, text="Sweeping the offered rate")
rates = knee_rate_grid(plan=plan, scenario=scenario, replicas=int(replicas))
sw = _rates(sj, opts.model_dump_json(), rates)
curve = pd.DataFrame([{"offered req/s": lv["offered_rate_req_s"], "goodput req/s": lv["goodput_req_s"],
                       "attainment": lv["slo_attainment"]} for lv in sw["levels"]])
knee = sw["knee_rate_req_s"]
st.metric("Knee", "none meets the target" if knee is None else f"{knee:g} req/s",
          help=f"highest rate with SLO attainment ≥ {sw['slo_attainment_target']:.0%}")
chart = alt.Chart(curve).mark_line(point=True).encode(x="offered req/s:Q", y="goodput req/s:Q",
                                                      tooltip=list(curve.columns))
if knee is not None:
    chart = chart + alt.Chart(pd.DataFrame({"knee": [knee]})).mark_rule(color="#d62728", strokeDash=[4, 4]).encode(
        x=alt.X("knee:Q", title="offered req/s"))
show_chart(chart.properties(height=260, title="Goodput vs offered rate (knee dashed)"), "tail-goodput")
progress.progress(0.7, text="KV occupancy and routers")
tl = pd.concat([pd.DataFrame({"t (s)": r["t_s"], "batch": r["batch_size"], "KV used": r["kv_utilization"],
                              "replica": f"{i}"}) for i, r in enumerate(one["timeline"])])
for col, name in (("KV used", "tail-kv"), ("batch", "tail-batch")):
    show_chart(alt.Chart(tl).mark_line().encode(x="t (s):Q", y=f"{col}:Q", color="replica:N")
               .properties(height=200, title=f"{col} over time"), name)
st.subheader(f"Routers on {turns}-turn chat, {max(2, int(replicas))} replicas")
rows = []
for router in ROUTERS:
    o = opts.model_copy(update={"router": router, "multi_turn": int(turns), "replicas": max(2, int(replicas))})
    r = _run(sj, o.model_dump_json())
    rows.append({"router": router, "TTFT p50 (ms)": r["ttft_s"]["p50"] * 1e3, "TTFT p99 (ms)": r["ttft_s"]["p99"] * 1e3,
                 "prefix hit rate": r["prefix_hit_rate"], "SLO attainment": r["slo_attainment"]})
st.dataframe(pd.DataFrame(rows), hide_index=True, key="tl_routers")
progress.progress(1.0, text=f"Done: {one['requests']} requests per run")
