"""Latency & throughput: the batch trade-off, TTFT, chunked prefill, speculation."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._format import shown
from pages._layout import metric_cells
from pages._sidebar import cached_curve, page_plan, page_scenario
from planner import room_for_labels

st.title("Latency & throughput")
scenario = page_scenario()
result = page_plan(scenario)
d = result.decode
op = result.operating_point
cols = metric_cells(4)  # two a row: the statistic qualifiers fit at 1024 px
cols[0].metric("ITL mean · no queueing", shown(op.itl_s if op.feasible else d.itl_s, "s"),
               help=f"the Plan's ITL mean at the batch {d.batch_size:,}"
                    + (" (prefill chunks interleaved: every token gap's mean, = the mean TPOT)"
                       if op.feasible and op.mode == "colocated" else "")
                    + f"; the decode step alone is {shown(d.step_s, 's')}; TPOT "
                      f"p{scenario.slo.itl_percentile * 100:g} per request {shown(op.itl_percentile_s, 's')}, "
                      f"token-gap p99 {shown(op.itl_gap_p99_s, 's')}")
cols[1].metric("tok/s per replica", shown(d.tok_s_per_replica, fmt=",.0f"))
cols[2].metric("Prefill time · no queueing", shown(result.prefill.time_s, "s"),
               help=f"one prompt alone; TTFT p90 at the operating point, queueing included: {shown(op.ttft_p90_s, 's')}")
cols[3].metric("Chunked TTFT · no queueing", shown(result.prefill.chunked_ttft_s, "s"),
               help=f"{result.prefill.chunks} chunk(s) of {result.prefill.chunk_tokens:,} tokens, each beside a decode step")

st.subheader("Throughput vs ITL as the batch grows")
batches = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, d.batch_size})
bc = pd.DataFrame(cached_curve("batch_curve", scenario, batches=batches))
bc["itl_ms"] = bc["itl_s"] * 1e3
bc["KV cache"] = bc["fits"].map({True: "fits", False: "does not fit"})
# Label a batch only where there is room: small batches crowd at the left.
order = sorted(range(len(bc)), key=lambda i: -int(bc["batch_size"].iloc[i]))
room = room_for_labels([bc["itl_ms"].iloc[i] for i in order], [bc["tok_s_per_replica"].iloc[i] for i in order],
                       min_dx=0.06, min_dy=0.07)
bc["label"] = ""
for i, keep in zip(order, room, strict=True):
    if keep:
        bc.loc[bc.index[i], "label"] = f"B={int(bc['batch_size'].iloc[i]):,}"
base = alt.Chart(bc).encode(x=alt.X("itl_ms:Q", title="decode step at batch B, no prefill chunks, no queueing (ms)"),
                            y=alt.Y("tok_s_per_replica:Q", title="tok/s per replica"))
curve = base.mark_line(point=True).encode(
    color=alt.Color("KV cache:N", title="KV cache", scale=alt.Scale(domain=["fits", "does not fit"],
                                                                  range=["#4c78a8", "#bbbbbb"])),
    tooltip=[alt.Tooltip("batch_size:Q", title="batch"), alt.Tooltip("itl_ms:Q", title="decode step (ms)", format=".3~r"),
             alt.Tooltip("tok_s_per_replica:Q", title="tok/s per replica", format=",.0f"), "bound:N", "KV cache:N"])
labels = base.mark_text(dy=-10, fontSize=10).encode(text="label:N")
target = alt.Chart(pd.DataFrame([{"itl_ms": scenario.slo.itl_s * 1e3}])).mark_rule(
    color="red", strokeDash=[6, 4]).encode(x="itl_ms:Q")
op = alt.Chart(pd.DataFrame([{"itl_ms": d.itl_s * 1e3, "tok_s_per_replica": d.tok_s_per_replica}])).mark_point(
    size=220, shape="diamond", color="red", filled=True).encode(x="itl_ms:Q", y="tok_s_per_replica:Q")
show_chart((curve + labels + target + op).properties(height=380), "throughput-vs-itl")
st.caption("Red dashed line: ITL target (it applies to each request's TPOT, which adds the prefill chunk stalls "
           "to the decode step when colocated: the ITL mean above); red diamond: the plan's operating point (decode "
           "step at its batch); a batch B is labelled where there is room.")

c1, c2 = st.columns(2)
with c1:
    st.subheader("TTFT vs prompt length")
    tc = pd.DataFrame(cached_curve("ttft_curve", scenario, prompt_lengths=[128, 256, 512, 1024, 2048, 4096,
                                                                          8192, 16384, 32768]))
    tc["ttft_ms"] = tc["ttft_s"] * 1e3
    ttft = alt.Chart(tc).mark_line(point=True).encode(
        x=alt.X("prompt_tokens:Q", scale=alt.Scale(type="log", base=2), title="prompt tokens"), y=alt.Y("ttft_ms:Q", title="TTFT = prefill time, no queueing (ms)"),
        tooltip=[alt.Tooltip("prompt_tokens:Q", title="prompt tokens", format=","),
                 alt.Tooltip("ttft_ms:Q", title="TTFT (ms)", format=",.3~r"), "bound:N"])
    rule = alt.Chart(pd.DataFrame([{"ttft_ms": scenario.slo.ttft_s * 1e3}])).mark_rule(
        color="red", strokeDash=[6, 4]).encode(y="ttft_ms:Q")
    show_chart(ttft + rule, "ttft-vs-prompt")
with c2:
    st.subheader("Chunked prefill: chunk size trade-off")
    cc = pd.DataFrame(cached_curve("chunk_curve", scenario, chunk_sizes=[64, 128, 256, 512, 1024, 2048, 4096, 8192]))
    long = cc.melt(id_vars=["chunk_tokens"], value_vars=["ttft_s", "iteration_s"], var_name="metric")
    long["ms"] = long["value"] * 1e3
    long["metric"] = long["metric"].map({"ttft_s": "TTFT, no queueing", "iteration_s": "ITL worst (step + one chunk)"})
    show_chart(alt.Chart(long).mark_line(point=True).encode(
        x=alt.X("chunk_tokens:Q", scale=alt.Scale(type="log", base=2), title="chunk tokens"),
        y=alt.Y("ms:Q", scale=alt.Scale(type="log"), title="time (ms)"),
        color=alt.Color("metric:N", legend=alt.Legend(orient="bottom", title=None)),
        tooltip=[alt.Tooltip("chunk_tokens:Q", title="chunk tokens", format=","), "metric:N",
                 alt.Tooltip("ms:Q", title="ms", format=",.3~r")]), "chunk-tradeoff")
    st.caption("Worst ITL while a prompt is admitted = decode step + one chunk.")

st.subheader("Speculative decoding: speedup vs acceptance")
sc = pd.DataFrame(cached_curve("speculative_curve", scenario, acceptances=[i / 20 for i in range(21)],
                               draft_tokens=[1, 2, 4, 8]))
show_chart(alt.Chart(sc).mark_line().encode(
    x=alt.X("acceptance:Q", title="acceptance α"), y=alt.Y("speedup:Q", title="speedup over plain decode"),
    color=alt.Color("draft_tokens:O", title="draft tokens k"),
    tooltip=["draft_tokens:O", "acceptance:Q", alt.Tooltip("tokens_per_pass:Q", format=".2f"),
             alt.Tooltip("speedup:Q", format=".2f")]).properties(height=300), "speculative")
_dc = scenario.speculative.draft_cost
st.caption(f"At the plan's batch {d.batch_size}; method {scenario.speculative.method}; draft step "
           + (f"costs {_dc:g} of a target step." if _dc is not None else "timed by the step model (the drafter's own "
              "decode step)."))
