"""Roofline: compute and memory roofs per GPU and precision, with the scenario's
decode and prefill points on its own GPU's roof."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._format import derivation_md, shown
from pages._sidebar import DTYPES, cached_curve, page_plan, page_scenario
from planner import load_catalog, log_grid, roof_lines

st.title("Roofline")
scenario = page_scenario()
result = page_plan(scenario)
cat = load_catalog()
c1, c2 = st.columns(2)
gpus = c1.multiselect("GPUs to compare", sorted(cat.gpus), default=[result.gpu], key="roof_gpus")
dtypes = c2.multiselect("Precisions", DTYPES, default=[scenario.weights_dtype], key="roof_dtypes")
roofs, ridges = roof_lines(gpus=[cat.gpus[g] for g in gpus] or [cat.gpus[result.gpu]],
                           weights_dtypes=dtypes or [scenario.weights_dtype],
                           intensities=log_grid(low=0.5, high=1e5, points=80))
ctx = result.memory.context_tokens
points = cached_curve("roofline_points", scenario, batches=[1, 8, 32, 128, 512],
                      contexts=sorted({1024, ctx, 32768}), prompt_lengths=[128, 512, 2048, 8192])
x = alt.X("intensity_flop_per_byte:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)")
y = alt.Y("attainable_flops_per_s:Q", scale=alt.Scale(type="log"), title="attainable FLOP/s",
          axis=alt.Axis(format="~s"))
tip = [alt.Tooltip("series:N"), alt.Tooltip("intensity_flop_per_byte:Q", title="FLOP/byte", format=",.1f"),
       alt.Tooltip("attainable_flops_per_s:Q", title="attainable FLOP/s", format=".3~s"), alt.Tooltip("bound:N")]
lines = alt.Chart(pd.DataFrame(roofs)).mark_line().encode(x=x, y=y, color=alt.Color("series:N", title="roof"),
                                                           tooltip=tip)
ridge = alt.Chart(pd.DataFrame(ridges))
ridge_marks = ridge.mark_point(shape="diamond", size=90, filled=True).encode(x=x, y=y, color="series:N",
                                                                             tooltip=tip)
ridge_text = ridge.mark_text(align="left", dx=8, dy=-8).encode(x=x, y=y, text="label:N", color="series:N")
pts = alt.Chart(pd.DataFrame(points)).mark_point(size=70, filled=True).encode(
    x=x, y=y, shape=alt.Shape("kind:N", title="point"), color=alt.value("#444"),
    tooltip=[alt.Tooltip("label:N")] + tip)
chart = (lines + ridge_marks + ridge_text + pts).properties(height=460)
show_chart(chart, "roofline")
r = result.roofline
cols = st.columns(4)
cols[0].metric("Ridge point", f"{r.ridge_flop_per_byte:,.0f} FLOP/B")
cols[1].metric("Decode intensity", f"{r.decode_intensity_flop_per_byte:,.1f} FLOP/B", help=r.decode_bound + " bound")
cols[2].metric("Decode attainable", shown(r.decode_attainable_flops_per_s, "FLOP/s"))
cols[3].metric("Prefill intensity", f"{r.prefill_intensity_flop_per_byte:,.0f} FLOP/B", help=r.prefill_bound + " bound")
with st.expander("Derivations"):
    for key, dv in result.derivations.items():
        if key.startswith("roofline."):
            st.markdown(derivation_md(dv, name=True))
