"""Compare: two to four options side by side (the workload on other GPUs, other
layouts on this GPU, or saved scenarios): GPUs, $/Mtok, p90 TTFT, TPOT, the share of
requests meeting both targets (analytic and simulated), KV headroom, the refereed
verdict, and one chart.  From any scenario, "H100 vs H200" is the page plus one click."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import gpu_colors, show_chart
from pages._format import MISSING, shown, usd
from pages._sidebar import MODES, page_scenario, request_load
from planner import (
    COMPARE_MAX,
    COMPARE_MIN,
    COMPARE_PAIRS,
    PlannerError,
    compare_columns,
    gpu_variants,
    layout_label,
    layout_variants,
    load_catalog,
    partner_gpu,
)
from planner.simulate.referee import simulated_attainment

SOURCES = ["GPUs for this workload", "Layouts on this GPU", "Saved scenarios"]
SHORT = {"h100-sxm": "H100", "h200-sxm": "H200", "b200": "B200"}


def _preset(pair: tuple[str, str]) -> None:
    st.session_state["cmp_source"] = SOURCES[0]
    st.session_state["cmp_gpus"] = list(pair)


st.title("Compare")
scenario = page_scenario()
own_gpu = scenario.gpu if isinstance(scenario.gpu, str) else scenario.gpu.id
row = st.container(horizontal=True)
for a, b in COMPARE_PAIRS:
    row.button(f"{SHORT.get(a, a)} vs {SHORT.get(b, b)}", key=f"cmp_pair_{a}_{b}", on_click=_preset, args=((a, b),))
source = st.radio("Compare", SOURCES, horizontal=True, key="cmp_source")
options = []
try:
    if source == SOURCES[0]:
        gpus_all = sorted(load_catalog().gpus)
        default = [own_gpu, partner_gpu(own_gpu)] if own_gpu in gpus_all else ["h100-sxm", "h200-sxm"]
        st.session_state.setdefault("cmp_gpus", default)
        gpus = st.multiselect(f"GPUs ({COMPARE_MIN} to {COMPARE_MAX})", gpus_all, key="cmp_gpus",
                              max_selections=COMPARE_MAX)
        keep = st.toggle("Keep the sidebar's layout on every GPU", key="cmp_keep",
                         help="off: each GPU in its cheapest layout that meets the SLO (TP 1–8, either serving mode)")
        options = gpu_variants(scenario, gpus, keep_layout=keep, referee=simulated_attainment)
        st.caption("Each GPU at its catalog price; a price typed in the sidebar applies to its own GPU only.")
    elif source == SOURCES[1]:
        choices = [f"TP{tp} {mode}" for tp in (1, 2, 4, 8) for mode in MODES]
        own = f"TP{scenario.parallel.tp} {scenario.serving.mode}"
        other = f"TP{scenario.parallel.tp} {MODES[1 - MODES.index(scenario.serving.mode)]}"
        st.session_state.setdefault("cmp_layouts", [c for c in (own, other) if c in choices])
        picked = st.multiselect(f"Layouts on {own_gpu} ({COMPARE_MIN} to {COMPARE_MAX})", choices, key="cmp_layouts",
                                max_selections=COMPARE_MAX)
        options = layout_variants(scenario, [(int(p.split()[0][2:]), p.split()[1]) for p in picked])
    else:
        from pages._store import load_stored, store_engine
        from planner.store import LIST_PAGE_SIZE, QUERY_MAX_CHARS, scenario_page

        engine = store_engine()
        if engine is None:
            st.stop()
        # The choices: one page of summaries (no payload), narrowed by a search; a payload is read
        # only for a picked scenario, once while its version stands.
        found = st.text_input("Search saved scenarios (name or slug)", key="cmp_saved_query", max_chars=QUERY_MAX_CHARS)
        listing = scenario_page(engine=engine, query=found or None, page_size=LIST_PAGE_SIZE)
        shown_slugs = [s.slug for s in listing.items]
        chosen = [p for p in st.session_state.get("cmp_saved", []) if p not in shown_slugs]
        picked = st.multiselect(f"Saved scenarios ({COMPARE_MIN} to {COMPARE_MAX}; the sidebar's is first)",
                                shown_slugs + chosen, key="cmp_saved", max_selections=COMPARE_MAX - 1)
        if listing.total > len(listing.items):
            st.caption(f"The {len(listing.items)} newest of {listing.total:,} saved scenarios"
                       f"{' matching the search' if found else ''}: search to find others.")
        options = [("sidebar: " + layout_label(scenario), scenario)]
        options += [(slug, load_stored(engine, slug).scenario) for slug in picked]
    if len(options) < COMPARE_MIN:
        st.info(f"Choose at least {COMPARE_MIN} options.")
        st.stop()
    cols = compare_columns(options, referee=simulated_attainment)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()

slo = scenario.slo
table = pd.DataFrame({c.label: {
    "GPUs": shown(c.gpus_total, fmt=",.0f"),
    "Replicas": c.pools,
    "$/Mtok output": usd(c.usd_per_mtok_output),
    "$/hour": usd(c.usd_per_hour),
    "$/GPU-hour": usd(c.usd_per_gpu_hour),
    f"TTFT p90 · queueing included (target {shown(slo.ttft_s, 's')})": shown(c.ttft_p90_s, "s"),
    f"TPOT p{slo.itl_percentile * 100:g} per request · no queueing (target {shown(slo.itl_s, 's')})":
        shown(c.itl_s, "s"),
    "ITL mean · no queueing": shown(c.itl_mean_s, "s"),
    "Token-gap p99 (chunk stall)": shown(c.itl_gap_p99_s, "s"),
    f"Requests meeting both targets, analytic (target ≥ {slo.attainment:.0%})": shown(c.slo_attainment, "fraction"),
    "Requests meeting both targets, simulated": (shown(c.simulated_attainment, "fraction")
                                                 if c.simulated_attainment is not None else "not simulated"),
    "KV headroom at the batch": shown(c.kv_headroom, "fraction"),
    "Verdict": c.verdict,
} for c in cols})
st.table(table)
if any(not c.meets_slo for c in cols):
    st.caption(f"{MISSING}: no such number, since that option has no operating point meeting the SLO (its verdict says why).")
st.caption(f"A request meets the SLO when its TTFT and its TPOT (its own mean inter-token time) meet the targets; "
           f"an option meets it when at least {slo.attainment:.0%} of requests do. The pick is the cheapest option "
           "whose short simulation at its own fleet and peak rate confirms it (options are simulated cheapest first). "
           f"The TPOT p{slo.itl_percentile * 100:g} is at least the mean ITL; the token-gap p99 is the stall a "
           "prefill chunk adds to one iteration, which a request's TPOT averages over its output.")
st.caption("KV headroom: the share of the KV budget still free at the operating batch (the plan runs the largest "
           "batch that meets the targets, so it is usually small).")
chart_rows = [{"option": c.label, "gpu": c.label.split()[0], "usd_per_mtok_output": c.usd_per_mtok_output,
               "text": f"{usd(c.usd_per_mtok_output)} · {shown(c.gpus_total, fmt=',.0f')} GPUs"}
              for c in cols if c.meets_slo]
if chart_rows:
    data = pd.DataFrame(chart_rows)
    y = alt.Y("option:N", sort=[r["option"] for r in chart_rows], title=None, axis=alt.Axis(labelLimit=320))
    top = float(data["usd_per_mtok_output"].max()) * 1.4  # room for the label beside the longest bar
    x = alt.X("usd_per_mtok_output:Q", title="$/Mtok output", scale=alt.Scale(domain=[0, top], nice=False),
              axis=alt.Axis(format="$.2f", tickCount=6))
    bars = alt.Chart(data).mark_bar(size=28).encode(
        x=x, y=y,
        color=alt.Color("gpu:N", title="GPU", scale=gpu_colors(list(data["gpu"]))),
        tooltip=[alt.Tooltip("option:N"), alt.Tooltip("text:N", title="cost")])
    text = alt.Chart(data).mark_text(align="left", dx=6, fontSize=12).encode(x=x, y=y, text="text:N")
    # A band per option (Streamlit draws a fixed height otherwise, and bars would overlap).
    show_chart((bars + text).properties(height=alt.Step(44), title="$/Mtok output of the options that meet the SLO"),
               "compare")
pick = st.selectbox("Make one the sidebar's scenario", [c.label for c in cols], key="cmp_pick")
if st.button("Use it", key="cmp_use", type="primary"):
    chosen = next(c for c in cols if c.label == pick)
    request_load(chosen.scenario, label=f"comparison option {pick}")
    st.rerun()
