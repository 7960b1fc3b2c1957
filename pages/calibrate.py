"""Calibrate: bring your own benchmark files (vLLM, SGLang, GuideLLM, AIPerf, MLPerf, llm-d),
see them beside the prediction, fit the efficiencies on them and use or save the result.

Uploads are read in memory, refused by size before they are read, and never written to
disk.  The sidebar scenario says what served the runs (GPU, model, layout); the inputs
beside it give what the scenario does not (engine, precision, GPUs behind the endpoint,
the name the model was served under).  Everything here is planner.benchimport: the same
code as ``python -m planner import-bench`` / ``calibrate`` and the Live probe page's fit.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._format import plain
from pages._link import request_load
from pages._sidebar import page_scenario
from pages._store import store_engine
from planner import PlannerError
from planner.benchimport import (
    MAX_BENCH_FILE_BYTES,
    MAX_BENCH_FILES,
    TOOL_CHOICES,
    calibrate_runs,
    calibrated_from_scenario,
    calibration_chart_rows,
    check_run,
    compare_rows,
    comparison_chart_rows,
    comparison_table,
    page_setup,
    parse_bench,
    run_rows,
    save_bench_run,
)
from planner.store.repository import save_scenario

ENGINES = ("vllm", "sglang", "trtllm", "llama.cpp", "other")

st.title("Calibrate")
scenario = page_scenario()
st.caption("Upload the result files your team already has. The sidebar scenario says what served them "
           f"(GPU, model, layout); each file is at most {MAX_BENCH_FILE_BYTES // 1_000_000} MB, "
           f"{MAX_BENCH_FILES} files at a time, read in memory only.")
files = st.file_uploader("Benchmark result files", accept_multiple_files=True, key="cb_files",
                         type=["json", "jsonl", "txt", "yaml", "yml"])
c = st.columns(5)
tool = c[0].selectbox("Format", TOOL_CHOICES, key="cb_tool", help="auto: told from the file")
engine = c[1].selectbox("Engine", ENGINES, key="cb_engine")
precision = c[2].text_input("Precision", "", key="cb_precision", placeholder="the scenario's",
                            help="bf16, fp8, fp4, int4 …: sets weights and KV formats as published runs use them")
n_gpus = c[3].number_input("GPUs behind the endpoint", 0, 100_000, 0, key="cb_gpus",
                           help="0: one replica of the scenario's layout")
served = c[4].text_input("Served model name", "", key="cb_served",
                         help="the name the endpoint served the model under, when it is not the catalog's")

loaded = []
if files:
    if len(files) > MAX_BENCH_FILES:
        st.error(f"{len(files)} files: at most {MAX_BENCH_FILES} at a time")
        files = []
    for f in files:
        if f.size > MAX_BENCH_FILE_BYTES:  # refused by its size, before its bytes are read
            st.error(f"{plain(f.name)}: {f.size:,} bytes is over the limit of {MAX_BENCH_FILE_BYTES:,} bytes")
            continue
        try:
            run = parse_bench(f.getvalue(), f.name, tool)
            setup = page_setup(scenario, engine=engine if engine != "other" else "", precision=precision,
                               n_gpus=int(n_gpus) or None, served_model=served, file_model=run.model)
            check_run(run, setup)
            loaded.append((run, setup))
        except PlannerError as exc:
            st.error(plain(str(exc)))

if loaded:
    pairs = []
    for run, setup in loaded:
        rows = run_rows(run, setup)
        pairs.append((run, compare_rows(rows, [setup] * len(rows))))
        for note in run.notes:
            st.caption(f"{plain(run.label)}: {plain(note)}")
    st.subheader("Measured beside predicted")
    long = pd.DataFrame(comparison_chart_rows(pairs))
    if not long.empty:
        show_chart(alt.Chart(long).mark_line(point=True).encode(
            x=alt.X("load:Q", title="concurrency (or req/s)"), y=alt.Y("value:Q", title=None),
            color="source:N", strokeDash="run:N", tooltip=["run", "metric", "load", "source", "value"],
        ).properties(width=200, height=170).facet(column=alt.Column("metric:N", title=None)).resolve_scale(
            y="independent"), name="measured-vs-predicted")
    st.dataframe(pd.DataFrame(comparison_table(pairs)), hide_index=True, key="cb_table")
    c = st.columns(2)
    if c[0].button("Save runs to the store", key="cb_save_runs") and (engine_db := store_engine()) is not None:
        ids = [save_bench_run(engine=engine_db, run=run, setup=setup) for run, setup in loaded]
        st.success(f"Saved as store runs {', '.join(str(i) for i in ids)} (beside the probe runs)")
    if c[1].button("Fit the efficiencies", key="cb_fit", type="primary"):
        try:
            cal = calibrate_runs(loaded)
            st.session_state["cb_cal"] = (cal, calibrated_from_scenario(loaded[0][1].scenario, cal))
        except PlannerError as exc:
            st.session_state.pop("cb_cal", None)
            st.error(plain(str(exc)))

if "cb_cal" in st.session_state and loaded:
    cal, calibrated = st.session_state["cb_cal"]
    e = cal.efficiency
    ho = cal.held_out_median_abs_error_pct
    st.subheader("The fit")
    st.write(f"bandwidth {e['bandwidth']:.3f} · compute {e['compute']:.3f} · step overhead "
             f"{e['step_overhead_s'] * 1e3:.2f} ms · per-layer overhead {e['layer_overhead_s'] * 1e6:.1f} µs")
    st.write(f"median |error| in sample {cal.in_sample_median_abs_error_pct:.1f}% · {cal.cross_validation}: "
             + ("—" if ho is None else f"{ho:.1f}% (worst {cal.held_out_max_abs_error_pct:.1f}%)"))
    for text in cal.warnings:
        st.warning(f"Calibration: {plain(text)}", icon=None)
    fit = pd.DataFrame(calibration_chart_rows(cal))
    show_chart(alt.Chart(fit).mark_line(point=True).encode(
        x=alt.X("load:Q", title="concurrency (or req/s)"), y=alt.Y("value:Q", title=None), color="source:N",
        strokeDash="run:N", tooltip=["run", "metric", "load", "source", "value"],
    ).properties(width=260, height=170).facet(column=alt.Column("metric:N", title=None)).resolve_scale(
        y="independent"), name="calibration-fit")
    st.dataframe(pd.DataFrame([r.model_dump() for r in cal.rows]), hide_index=True, key="cb_rows")
    c = st.columns(2)
    if c[0].button("Use the calibrated scenario", key="cb_use"):
        request_load(calibrated, label=f"calibrated from {cal.calibrated_from}")
        st.rerun()
    if c[1].button("Save the calibrated scenario", key="cb_save") and (engine_db := store_engine()) is not None:
        stored = save_scenario(engine=engine_db, scenario=calibrated, name=f"calibrated {cal.runs[0]}"[:100],
                               description=f"efficiencies calibrated from {cal.calibrated_from}", tags=["calibrated"])
        st.success(f"Saved as {stored.slug}")
