"""Roofline: compute and memory roofs per GPU and precision, with the scenario's
decode and prefill points on its own GPU's roof."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import gpu_colors, show_chart
from pages._format import derivation_md, shown
from pages._layout import metric_cells
from pages._sidebar import DTYPES, cached_curve, page_plan, page_scenario
from planner import load_catalog, log_grid, roof_lines, room_for_labels

X_RANGE = (0.5, 1e5)  # FLOP/byte: batch-1 decode to long prefills

st.title("Roofline")
scenario = page_scenario()
result = page_plan(scenario)
cat = load_catalog()
# The GPUs full width, the precisions as pills: every chosen value readable at 1024 px.
gpus = st.multiselect("GPUs to compare", sorted(cat.gpus), default=[result.gpu], key="roof_gpus")
dtypes = st.pills("Precisions", DTYPES, default=[scenario.weights_dtype], selection_mode="multi", key="roof_dtypes")
roofs, ridges = roof_lines(gpus=[cat.gpus[g] for g in gpus] or [cat.gpus[result.gpu]],
                           weights_dtypes=dtypes or [scenario.weights_dtype],
                           intensities=log_grid(low=X_RANGE[0], high=X_RANGE[1], points=80))
roof_df = pd.DataFrame(roofs)
roof_df["gpu"] = roof_df["series"].str.split().str[0]
roof_df["compute"] = roof_df["series"].str.split().str[1]
ridge_df = pd.DataFrame(ridges)
ridge_df["gpu"] = ridge_df["series"].str.split().str[0]
ridge_df["compute"] = ridge_df["series"].str.split().str[1]
y_range = (float(roof_df["attainable_flops_per_s"].min()), float(roof_df["attainable_flops_per_s"].max()))
ridge_df["text"] = [f"{g} {c}: ridge {x:,.0f} FLOP/B" if keep else ""
                    for g, c, x, keep in zip(ridge_df["gpu"], ridge_df["compute"], ridge_df["intensity_flop_per_byte"],
                                             room_for_labels(list(ridge_df["intensity_flop_per_byte"]),
                                                             list(ridge_df["attainable_flops_per_s"]), log_x=True,
                                                             log_y=True, x_domain=X_RANGE, y_domain=y_range,
                                                             min_dx=0.25, min_dy=0.06), strict=True)]
ctx = result.memory.context_tokens
points = pd.DataFrame(cached_curve("roofline_points", scenario, batches=[1, 8, 32, 128, 512],
                                   contexts=sorted({1024, ctx, 32768}), prompt_lengths=[128, 512, 2048, 8192]))
points["gpu"] = result.gpu
colors = gpu_colors(sorted(set(roof_df["gpu"]) | {result.gpu}))
x = alt.X("intensity_flop_per_byte:Q", scale=alt.Scale(type="log", domain=list(X_RANGE)),
          title="arithmetic intensity (FLOP/byte)")
y = alt.Y("attainable_flops_per_s:Q", scale=alt.Scale(type="log"), title="attainable FLOP/s",
          axis=alt.Axis(format="~s"))
tip = [alt.Tooltip("series:N", title="roof"), alt.Tooltip("intensity_flop_per_byte:Q", title="FLOP/byte", format=",.1f"),
       alt.Tooltip("attainable_flops_per_s:Q", title="attainable FLOP/s", format=".3~s"), alt.Tooltip("bound:N")]
gpu_color = alt.Color("gpu:N", title="GPU", scale=colors)
lines = alt.Chart(roof_df).mark_line().encode(x=x, y=y, color=gpu_color,
                                              strokeDash=alt.StrokeDash("compute:N", title="compute precision"),
                                              detail="series:N", tooltip=tip)
ridge = alt.Chart(ridge_df)
ridge_marks = ridge.mark_point(shape="diamond", size=90, filled=True).encode(
    x=x, y=y, color=gpu_color, tooltip=[alt.Tooltip("series:N", title="roof"), alt.Tooltip("label:N", title="ridge")])
ridge_text = ridge.mark_text(align="right", dx=-8, dy=-10, fontSize=11).encode(x=x, y=y, text="text:N", color=gpu_color)
pts = alt.Chart(points).mark_point(size=70, filled=True, opacity=0.85).encode(
    x=x, y=y, shape=alt.Shape("kind:N", title="scenario point"), color=gpu_color,
    tooltip=[alt.Tooltip("label:N", title="point")] + tip[1:])
chart = (lines + ridge_marks + ridge_text + pts).properties(height=460)
show_chart(chart, "roofline")
st.caption(f"Points: the scenario's decode steps (batch × context) and prefills (prompt length) on {result.gpu}'s roof; "
           "a ridge is labelled where there is room (hover a diamond for the rest).")
r = result.roofline
cols = metric_cells(4)  # two a row: the FLOP/B values fit at 1024 px
cols[0].metric("Ridge point", f"{r.ridge_flop_per_byte:,.0f} FLOP/B")
cols[1].metric("Decode intensity", shown(r.decode_intensity_flop_per_byte, "FLOP/B"), help=r.decode_bound + " bound")
cols[2].metric("Decode attainable", shown(r.decode_attainable_flops_per_s, "FLOP/s"))
cols[3].metric("Prefill intensity", f"{r.prefill_intensity_flop_per_byte:,.0f} FLOP/B", help=r.prefill_bound + " bound")
with st.expander("Derivations"):
    for key, dv in result.derivations.items():
        if key.startswith("roofline."):
            st.markdown(derivation_md(dv, name=True))
