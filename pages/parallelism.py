"""Parallelism: the TP × PP layouts (EP over the TP GPUs, DP attention) that fit, and what each costs per token."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._format import plain, sequences, shown
from pages._sidebar import cached_curve, page_plan, page_scenario
from planner import layout_caption, room_for_labels

st.title("Parallelism")
scenario = page_scenario()
result = page_plan(scenario)
opts = pd.DataFrame(cached_curve("parallel_options", scenario))
if opts.empty:
    st.error("No TP/PP/EP/DP-attention layout passes the scenario's checks for this model and GPU.")
    st.stop()
if bool(opts.loc[opts["current"], "tp_over_pcie"].any()):
    st.warning(f"TP over PCIe: TP {scenario.parallel.tp} exceeds {result.gpu}'s NVLink domain; every layer's "
               "two all-reduces per token run at PCIe latency.")
st.caption(plain(layout_caption(scenario, result)))
if not bool(opts.loc[opts["current"], "fits"].any()):
    st.info(f"The sidebar's layout ({scenario.parallel.label()}) does not fit; the layouts below do.")
fits_only = st.toggle("Only layouts that fit", value=True, key="par_fits")
layouts = opts[opts["fits"]] if fits_only else opts
if layouts.empty:
    st.error("No layout fits: lower the weights or KV precision, or shorten the context.")
    st.stop()
table = pd.DataFrame({
    "layout": layouts["layout"], "TP": layouts["tp"], "EP": layouts["ep"], "DP attention": layouts["dp_attention"],
    "GPUs": layouts["gpus"], "nodes": layouts["nodes"], "fits": layouts["fits"],
    "weights per GPU": [shown(v, "bytes") for v in layouts["weight_bytes_per_gpu"]],
    "KV budget per GPU": [shown(v, "bytes") for v in layouts["kv_budget_bytes"]],
    "max sequences": [sequences(v) for v in layouts["max_sequences"]], "batch": layouts["batch_size"],
    "collectives per step (ms)": (layouts["comm_s"] * 1e3).round(2),
    "of which all-to-all (ms)": (layouts["all_to_all_s"] * 1e3).round(2),
    "ITL mean at the batch (ms)": (layouts["itl_s"] * 1e3).round(1),
    "tok/s per GPU": layouts["tok_s_per_gpu"].round(0),
    "TP over PCIe": layouts["tp_over_pcie"], "current": layouts["current"],
})
st.dataframe(table, hide_index=True, width="stretch")
plot = layouts.assign(itl_ms=layouts["itl_s"] * 1e3, tp_link=[
    "over the NICs" if multi else ("over PCIe" if pcie else "within NVLink")
    for multi, pcie in zip(layouts["multi_node"], layouts["tp_over_pcie"], strict=True)])
# each point named by its layout where there is room (the rest in the tooltip)
plot["label"] = [lab if keep else "" for lab, keep in zip(plot["layout"], room_for_labels(
    list(plot["itl_ms"]), list(plot["tok_s_per_gpu"])), strict=True)]
base = alt.Chart(plot).encode(x=alt.X("itl_ms:Q", title="ITL mean at each layout's batch, no queueing (ms)"),
                              y=alt.Y("tok_s_per_gpu:Q", title="tok/s per GPU"))
names = base.mark_text(align="left", dx=9, dy=-7, fontSize=11).encode(text="label:N")
points = base.mark_point(filled=True, size=120).encode(
    color=alt.Color("gpus:O", title="GPUs per replica", scale=alt.Scale(scheme="category10")),
    shape=alt.Shape("tp_link:N", title="TP"),
    tooltip=["layout:N", alt.Tooltip("gpus:Q", title="GPUs"), alt.Tooltip("nodes:Q", title="nodes"), alt.Tooltip("itl_ms:Q", title="ITL (ms)", format=".3~r"),
             alt.Tooltip("tok_s_per_gpu:Q", title="tok/s per GPU", format=",.0f"),
             alt.Tooltip("max_sequences:Q", title="max sequences", format=",.1f")])
show_chart((points + names).properties(height=360), "parallelism")
st.caption("Each layout runs at its own batch: the largest its KV budget holds (or the sidebar's batch). "
           "GPUs per replica = TP × PP; EP lays the experts over those GPUs; with DP attention each of the TP "
           "ranks holds its own sequences' whole KV, and the MoE layers exchange tokens by all-to-all.")
