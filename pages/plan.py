"""Plan: the one-screen answer for the sidebar's scenario."""

from __future__ import annotations

import streamlit as st

from pages._sidebar import sidebar_scenario
from planner import PlannerError, plan
from planner.formatting import human

st.title("Plan")
scenario = sidebar_scenario()
if scenario is not None:
    try:
        result = plan(scenario)
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    m, d = result.memory, result.decode
    st.caption(f"{result.model} on {result.gpu} · weights {result.weights_dtype} · KV {result.kv_dtype} · "
               f"{m.gpus_per_replica} GPU(s) per replica")
    cols = st.columns(4)
    cols[0].metric("Fits", "yes" if m.fits else "no")
    cols[1].metric("Max sequences", f"{m.max_sequences:,.1f}")
    cols[2].metric("Decode batch", f"{d.batch_size}")
    cols[3].metric("Bound", d.bound)
    cols = st.columns(4)
    cols[0].metric("ITL", human(d.itl_s, "s"))
    cols[1].metric("tok/s per sequence", f"{d.tok_s_per_sequence:,.1f}")
    cols[2].metric("tok/s per replica", f"{d.tok_s_per_replica:,.0f}")
    cols[3].metric("TTFT", human(result.ttft_s, "s"))
    for w in result.warnings:
        st.warning(w)
    with st.expander("How these numbers were derived"):
        for dv in result.derivations.values():
            st.markdown(f"**{dv.name}** = `{dv.formula}`  \n= `{dv.substituted}` = **{dv.value:.6g} {dv.unit}** "
                        f"· *{dv.origin}*")
