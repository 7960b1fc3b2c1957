"""Explore: the design-space sweep for the sidebar scenario, its Pareto frontier,
and a button that makes a candidate the current scenario."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._sidebar import DTYPES, MODES, cached_sweep, page_scenario, request_load
from planner import PlannerError, csv_text, load_catalog, sweep_row_scenario

st.title("Explore")
scenario = page_scenario()
c = st.columns([3, 2, 2, 2, 3])
gpus = c[0].multiselect("GPUs", sorted(load_catalog().gpus), default=["h100-sxm", "h200-sxm", "b200"], key="ex_gpus")
dtypes = c[1].multiselect("Weights", DTYPES, default=["bf16", "fp8"], key="ex_dtypes")
tps = c[2].multiselect("TP", [1, 2, 4, 8, 16], default=[1, 2, 4, 8], key="ex_tps")
pps = c[3].multiselect("PP", [1, 2, 4, 8], default=[1, 2], key="ex_pps")
modes = c[4].multiselect("Modes", MODES, default=MODES, key="ex_modes")
if not (gpus and dtypes and tps and pps and modes):
    st.info("Choose at least one value in each list.")
    st.stop()
with st.status(f"Sweeping {len(gpus) * len(dtypes) * len(tps) * len(pps) * len(modes)} candidates", expanded=False) as box:
    try:
        rows = cached_sweep(scenario, gpus=gpus, dtypes=dtypes, tps=tps, pps=pps, modes=modes)
    except PlannerError as exc:
        box.update(state="error")
        st.error(str(exc))
        st.stop()
    box.update(label=f"Swept {len(rows)} candidates", state="complete")
df = pd.DataFrame(rows)
df.insert(0, "candidate", [f"{r.gpu} {r.weights_dtype} TP{r.tp}·PP{r.pp} {r.mode}" for r in df.itertuples()])
ok = df[df["feasible"]]
st.metric("Feasible candidates", f"{len(ok)} of {len(df)}",
          help="infeasible candidates are not plotted; the table lists them with their reason")
if not ok.empty:
    best = ok.loc[ok["usd_per_mtok_output"].idxmin()]
    st.success(f"Cheapest: {best['candidate']} at ${best['usd_per_mtok_output']:.3f}/Mtok output, "
               f"{best['gpus_total']:.0f} GPUs")
    pts = ok.assign(itl_ms=ok["itl_s"] * 1e3, frontier=ok["pareto_cost_itl"].map({True: "Pareto", False: "dominated"}))
    base = alt.Chart(pts).encode(
        x=alt.X("itl_ms:Q", title="ITL at the operating point (ms)"),
        y=alt.Y("usd_per_mtok_output:Q", title="$/Mtok output", scale=alt.Scale(type="log")))
    dots = base.mark_point(size=80, filled=True).encode(
        color=alt.Color("frontier:N", scale=alt.Scale(domain=["Pareto", "dominated"], range=["#d62728", "#bbbbbb"])),
        shape="gpu:N", tooltip=["candidate", "gpus_total", "itl_ms", "usd_per_mtok_output", "ttft_p90_s"])
    line = base.transform_filter("datum.frontier == 'Pareto'").mark_line(color="#d62728")
    show_chart((line + dots).properties(height=380, title="$/Mtok vs ITL (frontier in red)"), "explore-pareto")
cols = ["candidate", "feasible", "pareto_cost_itl", "usd_per_mtok_output", "usd_per_mtok_blended", "gpus_total",
        "itl_s", "ttft_p90_s", "batch_size", "goodput_req_s_per_gpu", "reason"]
st.dataframe(df[cols].sort_values(["feasible", "usd_per_mtok_output"], ascending=[False, True]), hide_index=True,
             key="ex_table")
st.download_button("Sweep CSV", csv_text(rows), file_name="sweep.csv", mime="text/csv", key="ex_csv",
                   on_click="ignore")
if not ok.empty:
    choice = st.selectbox("Candidate", ok.sort_values("usd_per_mtok_output")["candidate"].tolist(), key="ex_pick")
    if st.button("Load as current scenario", key="ex_load", type="primary"):
        row = ok[ok["candidate"] == choice].iloc[0].to_dict()
        request_load(sweep_row_scenario(scenario, row), label=f"sweep candidate {choice}")
        st.rerun()
