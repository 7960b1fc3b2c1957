"""Memory & KV: where one GPU's HBM goes, and why the KV cache caps the batch."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._format import derivation_md, sequences, shown
from pages._layout import metric_cells
from pages._sidebar import KV_DTYPES, cached_curve, page_plan, page_scenario

st.title("Memory & KV cache")
scenario = page_scenario()
result = page_plan(scenario)
m = result.memory
cols = st.columns(4)
cols[0].metric("Weights per GPU", shown(m.weight_bytes_per_gpu, "bytes"))
cols[1].metric("KV budget per GPU", shown(m.kv_budget_bytes, "bytes"))
cols[2].metric("KV per token", shown(m.kv_bytes_per_token, "bytes"),
               help=f"{shown(m.kv_bytes_per_token_per_gpu, 'bytes')} per GPU")
cols[3].metric("KV per sequence", shown(m.kv_bytes_per_sequence, "bytes"), help=f"{m.context_tokens:,} tokens")
cols = metric_cells(4)  # two a row: "HBM per GPU (CUDA-visible)" fits at 1024 px
cols[0].metric("Max sequences", sequences(m.max_sequences), help=f"whole sequences of {m.context_tokens:,} tokens each")
hbm = cached_curve("hbm_accounting", scenario)  # the one HBM figure: the one the split below adds up to
cols[1].metric(hbm["label"], shown(hbm["bytes"], "bytes"), help=f"{hbm['note']}; GB = 10⁹ bytes")
cols[2].metric("GPUs per replica", f"{m.gpus_per_replica}")
cols[3].metric("Fits", "yes" if m.fits else "no")
if m.draft_name:  # speculative decoding: the drafter's weights and KV are charged beside the target's
    st.caption(f"Speculative decoding drafts with {m.draft_name}: its weights come out of the KV budget and "
               "every sequence holds its KV too (derivations below: memory.draft_*).")
    cols = metric_cells(3)
    cols[0].metric("Draft weights per GPU", shown(m.draft_weight_bytes_per_gpu, "bytes"),
                   help=f"{shown(m.draft_weight_bytes, 'bytes')} in all, sharded over TP {scenario.parallel.tp}")
    cols[1].metric("Draft KV per token", shown(m.draft_kv_bytes_per_token, "bytes"),
                   help=f"{shown(m.draft_kv_bytes_per_token_per_gpu, 'bytes')} per GPU")
    cols[2].metric("KV per token, target + draft", shown(m.kv_bytes_per_token_per_gpu
                                                        + m.draft_kv_bytes_per_token_per_gpu, "bytes"),
                   help="per GPU: what each token of the engine's KV pool holds")

st.subheader(f"One GPU's HBM: {shown(hbm['bytes'], 'bytes')} {hbm['basis']}")
parts = pd.DataFrame(cached_curve("memory_breakdown", scenario))
parts["GB"] = [shown(b, "bytes") for b in parts["bytes"]]
parts["order"] = range(len(parts))
parts["gpu"] = result.gpu
bar = alt.Chart(parts).mark_bar(size=36).encode(
    x=alt.X("bytes:Q", stack="zero", title="bytes (G = 10⁹)", axis=alt.Axis(format="~s")),
    y=alt.Y("gpu:N", title=None),
    color=alt.Color("part:N", sort=list(parts["part"]), legend=alt.Legend(title=None)),
    order=alt.Order("order:Q"), tooltip=["part:N", alt.Tooltip("GB:N", title="size")],
).properties(height=130)
show_chart(bar, "memory-breakdown")

st.subheader("Max sequences vs context length")
DECADES = [10.0 ** k for k in range(-1, 8)]  # log-axis ticks at whole powers of ten, none between
ctx_grid = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
curve = pd.DataFrame(cached_curve("max_sequences_curve", scenario, contexts=ctx_grid,
                                  kv_dtypes=sorted({scenario.kv_dtype, *KV_DTYPES[::2]})))
curve = curve[curve["max_sequences"] > 0]  # log scale: a zero KV budget has no curve
if curve.empty:
    st.error("The KV budget is zero: no sequence fits at any context. Raise TP/PP or lower the weights precision.")
line = alt.Chart(curve).mark_line(point=True).encode(
    x=alt.X("context_tokens:Q", scale=alt.Scale(type="log", base=2), title="context tokens",
            axis=alt.Axis(values=ctx_grid, format="~s")),
    y=alt.Y("max_sequences:Q", scale=alt.Scale(type="log"), title="max concurrent sequences",
            axis=alt.Axis(values=DECADES, format="~s")),
    color=alt.Color("kv_dtype:N", title="KV dtype"),
    tooltip=["kv_dtype:N", "context_tokens:Q", alt.Tooltip("max_sequences:Q", format=",.1f")]).properties(height=320)
now = alt.Chart(pd.DataFrame([{"context_tokens": m.context_tokens, "max_sequences": m.max_sequences}]
                             if m.max_sequences > 0 else []))
show_chart(line + now.mark_point(size=140, color="red", shape="cross").encode(x="context_tokens:Q",
                                                                              y="max_sequences:Q"),
           "max-sequences")
st.caption("Red cross: the scenario's context and max sequences.")

c1, c2 = st.columns(2)
with c1:
    st.subheader("Paged vs contiguous")
    st.metric("Contiguous reservation per request", shown(m.contiguous_reservation_bytes, "bytes"),
              help="max context × KV/token: the pre-paged worst case")
    st.metric("Paged allocation per request", shown(m.paged_reservation_bytes, "bytes"),
              help=f"ceil(used / {scenario.serving.block_tokens}) blocks × block × KV/token")
with c2:
    st.subheader("Prefix sharing")
    st.metric("KV saved by sharing the prefix", shown(m.prefix_sharing_saved_bytes, "bytes"),
              help=f"{scenario.workload.prefix_tokens:,}-token prefix stored once instead of once per sequence")
    if scenario.workload.prefix_tokens == 0:
        st.caption("Set shared prefix tokens in the sidebar to see the saving.")
with st.expander("Derivations"):
    for key, dv in result.derivations.items():
        if key.startswith("memory."):
            st.markdown(derivation_md(dv, name=True))
