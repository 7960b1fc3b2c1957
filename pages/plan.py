"""Plan: the one-screen answer for the sidebar's scenario."""

from __future__ import annotations

import streamlit as st

from pages._format import derivation_md, shown
from pages._report import report_downloads
from pages._sidebar import page_plan, page_scenario

st.title("Plan")
scenario = page_scenario()
result = page_plan(scenario)
m, d, p = result.memory, result.decode, result.prefill
st.caption(f"{result.model} on {result.gpu} · weights {result.weights_dtype} · KV {result.kv_dtype} · "
           f"TP {scenario.parallel.tp} × PP {scenario.parallel.pp} × EP {scenario.parallel.ep} = "
           f"{m.gpus_per_replica} GPU(s) per replica")
if m.fits:
    st.success(f"Fits: {m.max_sequences:,.1f} sequences of {m.context_tokens:,} tokens in the KV budget")
else:
    st.error("Does not fit: see the warnings below")
cols = st.columns(4)
cols[0].metric("Fits", "yes" if m.fits else "no")
cols[1].metric("Max sequences", shown(m.max_sequences, fmt=",.1f"))
cols[2].metric("Decode batch", f"{d.batch_size}")
cols[3].metric("Bound", d.bound)
cols = st.columns(4)
cols[0].metric("ITL", shown(d.itl_s, "s"), help=f"target {shown(scenario.slo.itl_s, 's')}")
cols[1].metric("tok/s per sequence", shown(d.tok_s_per_sequence, fmt=",.1f"))
cols[2].metric("tok/s per replica", shown(d.tok_s_per_replica, fmt=",.0f"))
cols[3].metric("TTFT", shown(result.ttft_s, "s"), help=f"target {shown(scenario.slo.ttft_s, 's')}")
cols = st.columns(4)
cols[0].metric("Weights per GPU", shown(m.weight_bytes_per_gpu, "bytes"))
cols[1].metric("KV budget per GPU", shown(m.kv_budget_bytes, "bytes"))
cols[2].metric("MBU", shown(d.mbu, "fraction"))
cols[3].metric("Prefill MFU", shown(p.mfu, "fraction"))
for w in result.warnings:
    st.warning(w)
st.subheader("How these numbers were derived")
groups = {"Memory": ("memory",), "Decode": ("decode",), "Prefill and TTFT": ("prefill", "ttft_s"),
          "Roofline": ("roofline",)}
for title, prefixes in groups.items():
    with st.expander(title):
        for key, dv in result.derivations.items():
            if key.split(".")[0] in prefixes:
                st.markdown(derivation_md(dv, name=True))

# Review report (issue 16, item 6): the download, a separate block at the end of the page.
report_downloads(scenario)
