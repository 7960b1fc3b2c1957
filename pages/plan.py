"""Plan: the answer first (GPUs, replicas per pool, $/Mtok, the SLO check), then the
replica behind it, each number with its statistic and its derivation."""

from __future__ import annotations

import streamlit as st

from pages._deploy import deploy_section
from pages._format import MISSING, derivation_md, md, sequences, shown, usd
from pages._report import report_downloads
from pages._review import show_fleet_check, show_headline, show_plausibility
from pages._sidebar import page_plan, page_scenario

st.title("Plan")
scenario = page_scenario()
result = page_plan(scenario)
m, d, p, op = result.memory, result.decode, result.prefill, result.operating_point
st.caption(f"{result.model} on {result.gpu} · weights {result.weights_dtype} · KV {result.kv_dtype} · "
           f"{scenario.parallel.label()}: TP {scenario.parallel.tp} × PP {scenario.parallel.pp} = "
           f"{m.gpus_per_replica} GPU(s) on {m.nodes_per_replica} node(s) per replica · {scenario.serving.mode} · "
           f"{shown(scenario.workload.peak_rate, 'req/s')} at peak")
show_headline(result, scenario)
show_fleet_check(result, scenario)


@st.cache_data(max_entries=128, show_spinner=False)
def _mode_verdict(scenario_json: str) -> str:
    from planner import Scenario, mode_verdict
    from planner.simulate.referee import simulated_attainment

    return mode_verdict(Scenario.model_validate_json(scenario_json), referee=simulated_attainment)[0]


st.caption(md("Colocated or disaggregated, refereed by the simulator (the mode with fewer GPUs whose short "
              f"simulation meets the SLO): {_mode_verdict(scenario.model_dump_json())}."))
show_plausibility(result, scenario)

st.subheader("One replica")
if m.fits:
    st.caption(f"Fits: {sequences(m.max_sequences)} sequences of {m.context_tokens:,} tokens in the KV budget")
else:
    st.error("Does not fit: see the warnings below")
cols = st.columns(4)
cols[0].metric("Fits", "yes" if m.fits else "no")
cols[1].metric("Max sequences", sequences(m.max_sequences), help=f"whole sequences of {m.context_tokens:,} tokens each")
cols[2].metric("Decode batch", f"{d.batch_size:,}", help="the operating point's batch")
cols[3].metric("Bound", d.bound, help="decode step: memory- or compute-bound on the roofline")
cols = st.columns(2)  # two wide columns: the statistic qualifiers fit at 1024 px
# The operating point's ITL (prefill chunks interleaved when colocated); with no operating point,
# the decode step at the batch shown beside it.
cols[0].metric("ITL mean · no queueing", shown(op.itl_s if op.feasible else d.itl_s, "s"),
               help=(f"at the batch {d.batch_size:,}: decode step {shown(d.step_s, 's')}"
                     + (" + prefill chunks interleaved (the mean of every token gap, which is also the mean "
                        "TPOT)" if op.mode == "colocated" and op.feasible else "")
                     + f"; the target {shown(scenario.slo.itl_s, 's')} applies to each request's TPOT, whose "
                       f"p{scenario.slo.itl_percentile * 100:g} is in the SLO check above"))
cols[1].metric("TTFT mean · queueing included", shown(op.ttft_s, "s") if op.feasible else MISSING,
               help=(f"operating point: M/G/c queue over the fleet's prefill servers + prefill; the p90 is in the "
                     "SLO check above. "
                     f"Prefill alone (no queueing): {shown(p.time_s, 's')}"))
cols = st.columns(2)
cols[0].metric("tok/s per sequence", shown(d.tok_s_per_sequence, fmt=",.1f"))
cols[1].metric("tok/s per replica", shown(d.tok_s_per_replica, fmt=",.0f"))
u = result.uncertainty
if u is not None:  # the error band beside ITL, TTFT and $/Mtok (planner/sizing/uncertainty.py)
    # each band beside the number it qualifies, named with its statistic (not the SLO check's p90)
    parts = [f"{name} ({b.statistic}) {fmt(b.value)}: {fmt(b.low)} – {fmt(b.high)}, {b.describe()} "
             f"({b.basis}: {b.rows} rows)" for name, b, fmt in (
        ("ITL", u.itl_s, lambda v: shown(v, "s")), ("TTFT", u.ttft_s, lambda v: shown(v, "s")),
        ("$/Mtok output", u.usd_per_mtok_output, lambda v: usd(v, "/Mtok"))) if b is not None]
    st.caption(md(f"Likely range ({u.level:.0%}) of " + " · ".join(parts) + f". {u.note}.") if parts else md(u.note))
cols = st.columns(4)
cols[0].metric("Weights per GPU", shown(m.weight_bytes_per_gpu, "bytes"))
cols[1].metric("KV budget per GPU", shown(m.kv_budget_bytes, "bytes"))
cols[2].metric("MBU", shown(d.mbu, "fraction"), help="memory-bandwidth utilization of a decode step")
cols[3].metric("Prefill MFU", shown(p.mfu, "fraction"), help="compute utilization of a prefill")
if op.feasible:
    st.caption(md(f"Costs: {usd(result.cost.usd_per_hour, '/hour')} for the fleet, "
                  f"{usd(result.cost.usd_per_mtok_blended, '/Mtok')} blended (input + output tokens)."))
for w in result.warnings:
    st.warning(w)
st.subheader("How these numbers were derived")
groups = {"Memory": ("memory",), "Decode": ("decode",), "Prefill and TTFT": ("prefill", "ttft_s", "operating_point"),
          "Fleet and cost": ("fleet", "cost"), "Roofline": ("roofline",)}
reason = None if op.feasible else f"no operating point meets the SLO: {op.reason}"
for title, prefixes in groups.items():
    with st.expander(title):
        for key, dv in result.derivations.items():
            if key.split(".")[0] in prefixes:
                st.markdown(derivation_md(dv, name=True, reason=reason))

# Deploy (issue 27): the files that run the plan; the report lists the chosen target's commands.
target = deploy_section(scenario)
# Review report (issue 16, item 6): the download, a separate block at the end of the page.
report_downloads(scenario, deploy_target=target)
