"""Parallelism: the TP × PP × EP layouts that fit, and what each costs per token."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._format import shown
from pages._sidebar import cached_curve, page_plan, page_scenario

st.title("Parallelism")
scenario = page_scenario()
result = page_plan(scenario)
opts = pd.DataFrame(cached_curve("parallel_options", scenario))
if opts.empty:
    st.error("No TP/PP/EP layout passes the scenario's checks for this model and GPU.")
    st.stop()
if bool(opts.loc[opts["current"], "tp_over_pcie"].any()):
    st.warning(f"TP over PCIe: TP {scenario.parallel.tp} exceeds {result.gpu}'s NVLink domain; every layer's "
               "two all-reduces per token run at PCIe latency.")
if not bool(opts.loc[opts["current"], "fits"].any()):
    st.info(f"The sidebar's layout (TP {scenario.parallel.tp} · PP {scenario.parallel.pp} · EP "
            f"{scenario.parallel.ep}) does not fit; the layouts below do.")
fits_only = st.toggle("Only layouts that fit", value=True, key="par_fits")
layouts = opts[opts["fits"]] if fits_only else opts
if layouts.empty:
    st.error("No layout fits: lower the weights or KV precision, or shorten the context.")
    st.stop()
table = pd.DataFrame({
    "layout": [f"TP{t}·PP{p}·EP{e}" for t, p, e in zip(layouts["tp"], layouts["pp"], layouts["ep"], strict=True)],
    "GPUs": layouts["gpus"], "fits": layouts["fits"],
    "weights/GPU": [shown(v, "bytes") for v in layouts["weight_bytes_per_gpu"]],
    "KV budget/GPU": [shown(v, "bytes") for v in layouts["kv_budget_bytes"]],
    "max seqs": layouts["max_sequences"].round(1), "batch": layouts["batch_size"],
    "collectives/step": [shown(v, "s") for v in layouts["comm_s"]],
    "ITL": [shown(v, "s") for v in layouts["itl_s"]],
    "tok/s per GPU": layouts["tok_s_per_gpu"].round(0),
    "TP over PCIe": layouts["tp_over_pcie"], "current": layouts["current"],
})
st.dataframe(table, hide_index=True, width="stretch")
plot = layouts.assign(layout=table["layout"].values, itl_ms=layouts["itl_s"] * 1e3)
show_chart(alt.Chart(plot).mark_point(filled=True, size=120).encode(
    x=alt.X("itl_ms:Q", title="ITL at each layout's batch (ms)"),
    y=alt.Y("tok_s_per_gpu:Q", title="tok/s per GPU"),
    color=alt.Color("gpus:N", title="GPUs", scale=alt.Scale(scheme="category10")), shape=alt.Shape("tp_over_pcie:N", title="TP over PCIe"),
    tooltip=["layout:N", "gpus:Q", alt.Tooltip("itl_ms:Q", format=".2f"),
             alt.Tooltip("tok_s_per_gpu:Q", format=",.0f"), "max_sequences:Q"]).properties(height=360),
    "parallelism")
st.caption("Each layout runs at its own batch: the largest its KV budget holds (or the sidebar's batch).")
