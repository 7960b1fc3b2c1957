"""Explore: the design-space sweep for the sidebar scenario, its Pareto frontier,
the simulator-refereed cheapest candidate, and a button that makes a candidate the
current scenario."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import gpu_colors, show_chart
from pages._format import md, round3, shown, usd
from pages._sidebar import DTYPES, MODES, page_scenario, request_load
from planner import PlannerError, Scenario, csv_text, load_catalog, sweep_row_scenario


@st.cache_data(max_entries=64, show_spinner=False)
def _refereed(scenario_json: str, axes: tuple[tuple[str, tuple[Any, ...]], ...]) -> dict[str, Any]:
    from planner.simulate.referee import refereed_sweep

    return refereed_sweep(Scenario.model_validate_json(scenario_json), **dict(axes)).to_dict()


def refereed_sweep_dict(scenario: Scenario, **axes: Any) -> dict[str, Any]:
    """``planner.simulate.referee.refereed_sweep(...).to_dict()``, cached on the scenario and the axes."""
    return _refereed(scenario.model_dump_json(), tuple(sorted((k, tuple(v)) for k, v in axes.items())))


st.title("Explore")
scenario = page_scenario()
q = f"p{scenario.slo.itl_percentile * 100:g}"
# The table's columns as a reviewer reads them (ITL and TTFT in ms, one unit per view).
COLUMNS = {"candidate": "Candidate", "meets": "Meets the SLO", "slo_status": "SLO check",
           "pareto_cost_itl": "On the frontier", "usd_per_mtok_output": "$/Mtok output",
           "usd_per_mtok_blended": "$/Mtok blended", "gpus_total": "GPUs",
           "itl_ms": "ITL mean (ms)", "tpot_ms": f"TPOT {q} (ms)", "gap_ms": "Token-gap p99 (ms)",
           "ttft_p90_ms": "TTFT p90, queued (ms)", "attainment": "Attainment, analytic",
           "simulated": "Attainment, simulated", "batch_size": "Batch",
           "goodput_req_s_per_gpu": "Goodput per GPU (req/s)", "reason": "Why not"}

# The GPUs full width and the short lists as pills: every chosen value readable at 1024 px
# (a multiselect in a third of the page cut "disaggregated" and the fourth TP).
gpus = st.multiselect("GPUs", sorted(load_catalog().gpus), default=["h100-sxm", "h200-sxm", "b200"], key="ex_gpus")
c = st.columns(2)
modes = c[0].pills("Modes", MODES, default=MODES, selection_mode="multi", key="ex_modes")
dtypes = c[1].pills("Weights", DTYPES, default=["bf16", "fp8"], selection_mode="multi", key="ex_dtypes")
c = st.columns(2)
tps = c[0].pills("TP", [1, 2, 4, 8, 16], default=[1, 2, 4, 8], selection_mode="multi", key="ex_tps")
pps = c[1].pills("PP", [1, 2, 4, 8], default=[1, 2], selection_mode="multi", key="ex_pps")
if not (gpus and dtypes and tps and pps and modes):
    st.info("Choose at least one value in each list.")
    st.stop()
with st.status(f"Sweeping {len(gpus) * len(dtypes) * len(tps) * len(pps) * len(modes):,} candidates",
               expanded=False) as box:
    try:
        result = refereed_sweep_dict(scenario, gpus=gpus, dtypes=dtypes, tps=tps, pps=pps, modes=modes)
    except PlannerError as exc:
        box.update(state="error")
        st.error(str(exc))
        st.stop()
    rows = result["rows"]
    box.update(label=f"Swept {len(rows):,} candidates", state="complete")
df = pd.DataFrame(rows)
df.insert(0, "candidate", [f"{r.gpu} {r.weights_dtype} TP{r.tp}·PP{r.pp} chunk {r.chunk_tokens:,} {r.mode}"
                           for r in df.itertuples()])
df["itl_ms"] = (df["itl_s"] * 1e3).round(1)
df["tpot_ms"] = (df["itl_percentile_s"] * 1e3).round(1)
df["gap_ms"] = (df["itl_gap_p99_s"] * 1e3).round(1)
df["ttft_p90_ms"] = (df["ttft_p90_s"] * 1e3).round(0)
df["attainment"] = df["slo_attainment"].map(lambda v: None if v is None or v != v else round(float(v), 3))
df["simulated"] = df["simulated_attainment"].map(lambda v: None if v is None or v != v else round(float(v), 3))
# A candidate its simulation fails is never shown as meeting the SLO.
df["meets"] = df["feasible"] & ~df["slo_status"].str.startswith("misses in simulation")
df["goodput_req_s_per_gpu"] = df["goodput_req_s_per_gpu"].map(round3)
ok = df[df["meets"]]
st.metric("Candidates meeting the SLO", f"{len(ok):,} of {len(df):,}",
          help="analytically, less those the simulator failed; the others are not plotted (the table lists them "
               "with their reason)")
referee = result.get("referee") or {}
cheapest = result.get("cheapest")
if cheapest is not None:
    best = df.iloc[[i for i, r in enumerate(rows) if r["cheapest"]][0]]
    st.success(md(f"Cheapest that meets the SLO: {best['candidate']} at {usd(best['usd_per_mtok_output'])}/Mtok "
                  f"output, {shown(best['gpus_total'], fmt=',.0f')} GPUs; {best['slo_status']}"))
elif not ok.empty:
    st.warning("No candidate passed its simulation among the cheapest ones simulated: the analytic candidates "
               "below are unconfirmed.")
if referee:
    sims = ", ".join(f"{df.iloc[x['row']]['candidate']} {x['simulated_attainment']:.0%}"
                     for x in result.get("simulated", []))
    st.caption(md(f"Refereed by the simulator: {referee['note']}" + (f" ({sims})." if sims else ".")
                  + f" A request meets the SLO when its TTFT and its TPOT (its own mean inter-token time) meet the "
                    f"targets; TPOT {q} is the percentile of per-request TPOT, at least the mean ITL; the token-gap "
                    "p99 shows the chunk stall, which a request's TPOT averages over its output."))
if not ok.empty:
    pts = ok.assign(frontier=ok["pareto_cost_itl"].map({True: "on the frontier", False: "dominated"}))
    base = alt.Chart(pts).encode(
        x=alt.X("itl_ms:Q", title="ITL mean at the operating point (ms)"),
        y=alt.Y("usd_per_mtok_output:Q", title="$/Mtok output", scale=alt.Scale(type="log")))
    dots = base.mark_point(size=80, filled=True).encode(
        color=alt.Color("gpu:N", title="GPU", scale=gpu_colors(list(pts["gpu"]))),
        opacity=alt.Opacity("frontier:N", scale=alt.Scale(domain=["on the frontier", "dominated"], range=[1.0, 0.3]),
                            title=None),
        shape=alt.Shape("mode:N", title="mode"),
        tooltip=[alt.Tooltip("candidate:N"), alt.Tooltip("gpus_total:Q", title="GPUs", format=",.0f"),
                 alt.Tooltip("itl_ms:Q", title="ITL mean (ms)"),
                 alt.Tooltip("tpot_ms:Q", title=f"TPOT {q} (ms)"),
                 alt.Tooltip("usd_per_mtok_output:Q", title="$/Mtok output", format="$.3~r"),
                 alt.Tooltip("ttft_p90_ms:Q", title="TTFT p90 (ms)", format=",.0f")])
    line = base.transform_filter("datum.frontier == 'on the frontier'").mark_line(color="#444", strokeDash=[4, 3])
    show_chart((line + dots).properties(height=380, title="$/Mtok vs ITL (the frontier dashed)"), "explore-pareto")
table = df[list(COLUMNS)].sort_values(["meets", "usd_per_mtok_output"], ascending=[False, True])
st.dataframe(table.rename(columns=COLUMNS), hide_index=True, key="ex_table",
             column_config={"$/Mtok output": st.column_config.NumberColumn(format="dollar"),
                            "$/Mtok blended": st.column_config.NumberColumn(format="dollar"),
                            "TTFT p90, queued (ms)": st.column_config.NumberColumn(
                                help="p90 time to first token, queueing included (M/G/1 at the target utilization)"),
                            "ITL mean (ms)": st.column_config.NumberColumn(help="mean inter-token latency, no queueing"),
                            f"TPOT {q} (ms)": st.column_config.NumberColumn(
                                help="per-request TPOT (mean inter-token time) at slo.itl_percentile: the "
                                     "statistic the ITL target is scored on")})
st.download_button("Sweep CSV", csv_text(rows), file_name="sweep.csv", mime="text/csv", key="ex_csv",
                   on_click="ignore")
if not ok.empty:
    choice = st.selectbox("Candidate", ok.sort_values("usd_per_mtok_output")["candidate"].tolist(), key="ex_pick")
    if st.button("Load as current scenario", key="ex_load", type="primary"):
        row = ok[ok["candidate"] == choice].iloc[0].to_dict()
        request_load(sweep_row_scenario(scenario, row), label=f"sweep candidate {choice}")
        st.rerun()
