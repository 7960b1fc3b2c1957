"""Live probe: measure an OpenAI-compatible endpoint, set it beside the plan, calibrate.

Definitions (as in the README): TTFT from the scheduled time (client queueing
counts) and from the sent time; TPOT = (last token − first token) / (tokens − 1);
goodput = requests/s meeting both SLOs, failures counted as violations.
The API key lives only in this session's memory: never in the URL, the store or exports.
The probe runs in the background (planner.probe.ProbeJob); the page polls it and can cancel it.
What it shows is what happened: failures as errors with their reasons, a run where nothing
succeeded as a failure (saved only when asked), the client's own delay when it is in the
figures, and nothing of an older run once a new one starts or fails.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._format import plain
from pages._sidebar import page_scenario, request_load
from pages._store import store_engine
from planner import PlannerError
from planner.benchimport import bench_run_from_probe, calibrate_runs, calibrated_from_scenario, scenario_setup
from planner.probe import (
    MAX_WORKERS,
    ProbeJob,
    ProbeRun,
    failure_summary,
    level_label,
    measured_vs_predicted,
    probe_settings,
    save_run,
    with_prediction,
)
from planner.probe.client import ERROR_DETAIL_CHARS
from planner.probe.summary import first_failure
from planner.views.columns import display_rows

POLL_S = 0.5  # how often the page looks at a running probe
# the "API" choice → ProbeSettings.endpoint (None: the one the URL's path names)
ENDPOINT_CHOICES: dict[str, str | None] = {"from the URL": None, "completions (/v1/completions)": "completions",
                                           "chat (/v1/chat/completions)": "chat"}

st.title("Live probe")
scenario = page_scenario()
st.caption("The sidebar scenario says what the endpoint serves (GPU, model, layout): it gives the prediction "
           "and is what calibration updates. Allowed hosts: PROBE_ALLOWED_HOSTS (default loopback and private).")
c = st.columns([3, 2, 2, 2])
url = c[0].text_input("Endpoint URL", "http://127.0.0.1:8000", key="pr_url")
model = c[1].text_input("Model name sent", "default", key="pr_model")
api_key = c[2].text_input("API key (kept in memory only)", type="password", key="pr_key")
api = c[3].selectbox("API", tuple(ENDPOINT_CHOICES), key="pr_endpoint",
                     help="Which OpenAI API to send: by default the one the URL's path names "
                          "(/v1/chat/completions or /v1/completions), completions for a server root.")
c = st.columns(5)
levels = c[0].text_input("Concurrency levels", "1,2,4,8", key="pr_levels")
requests = c[1].number_input("Requests per level", 1, 10_000, 16, key="pr_requests")
prompt = c[2].number_input("Prompt tokens", 1, 1_000_000, 128, key="pr_prompt")
output = c[3].number_input("Output tokens", 1, 100_000, 64, key="pr_output")
workers = c[4].number_input("Client processes", 1, MAX_WORKERS, 1, key="pr_workers",
                            help="Processes sending the load, each its share of the streams (merged as one run). "
                                 "The load always runs outside the app's own process (busy serving pages); use more "
                                 "than one when a level warns that the client's own delay is in its figures.")

job: ProbeJob | None = st.session_state.get("probe_job")
if st.button("Run probe", type="primary", key="pr_run", disabled=job is not None):
    for stale in ("probe_run", "probe_cal", "probe_note"):  # an older run's results never sit under a new one
        st.session_state.pop(stale, None)
    try:
        conc = tuple(int(x) for x in levels.split(",") if x.strip())
        settings = probe_settings(url=url, model=model, endpoint=ENDPOINT_CHOICES[api], concurrency=conc,
                                  requests=int(requests), prompt_tokens=int(prompt), output_tokens=int(output),
                                  workers=int(workers), separate_process=True,
                                  slo_ttft_s=scenario.slo.ttft_s, slo_tpot_s=scenario.slo.itl_s)
        st.session_state["probe_job"] = job = ProbeJob.start(settings, api_key=api_key or None)
    except ValueError:
        st.error("Concurrency levels: give comma-separated integers, e.g. 1,2,4,8")
    except PlannerError as exc:
        st.error(plain(str(exc)))


@st.fragment(run_every=POLL_S)
def _running() -> None:
    job: ProbeJob | None = st.session_state.get("probe_job")
    if job is None:
        return
    if not job.done:
        label, done, total = job.progress
        st.progress(min(done / max(total, 1), 1.0), text="cancelling…" if job.cancelled else label)
        if st.button("Cancel probe", key="pr_cancel", disabled=job.cancelled):
            job.cancel()
        return
    del st.session_state["probe_job"]
    st.session_state.pop("probe_cal", None)
    st.session_state.pop("probe_run", None)
    try:
        run = job.result()
        st.session_state["probe_run"] = run
        st.session_state["probe_run"] = with_prediction(run, scenario)
    except PlannerError as exc:
        st.session_state["probe_note"] = ("error", str(exc))
    st.rerun()


def _outcome(run: ProbeRun) -> None:
    """The run's verdict first: green only when every request succeeded."""
    if run.cancelled:
        st.warning(f"Run {run.run_id} was cancelled: what it measured before is shown.")
    if run.outcome == "failed":
        st.error(f"Run {run.run_id}: no request succeeded, so there is nothing to compare or calibrate. "
                 "It is not saved unless you save it below.")
    elif run.outcome == "partial":
        st.warning(f"Run {run.run_id} finished with failures ({run.succeeded} requests succeeded): "
                   "the figures are from the successful requests only.")
    elif run.outcome == "ok" and not run.cancelled:
        st.success(f"Done: run {run.run_id}, {run.succeeded} requests over {len(run.levels)} levels, none failed.")
    for lv in run.levels:
        if text := failure_summary(lv, detail=False):
            st.error(text)
            first = first_failure(lv)
            if first is not None and first.error_detail:  # the endpoint's words: text, never Markdown
                st.caption(f"The first failure ({first.error}) said, redacted and cut to {ERROR_DETAIL_CHARS} "
                           "characters:")
                st.code(first.error_detail, language=None, wrap_lines=True)
        if lv.client is not None and lv.client.warning:
            st.warning(f"{level_label(lv)}: {lv.client.warning}")


if job is not None:
    _running()
if note := st.session_state.pop("probe_note", None):
    (st.error if note[0] == "error" else st.warning)(plain(note[1]))

run = st.session_state.get("probe_run")
if run is not None and not run.levels:
    st.warning(f"Run {run.run_id} measured nothing (cancelled before its first level).")
if run is not None and run.levels:
    _outcome(run)
    st.subheader(f"Run {run.run_id}: measured beside predicted")
    st.dataframe(pd.DataFrame(display_rows(run.csv_rows())), hide_index=True, key="pr_table")
    clients = display_rows({"level": level_label(lv), "event_loop": lv.client.event_loop,
                            "workers": lv.client.workers, "loop_lag_p50_s": lv.client.loop_lag_p50_s,
                            "loop_lag_p99_s": lv.client.loop_lag_p99_s, "cpu_share": lv.client.cpu_share,
                            "held_concurrency": lv.client.held_concurrency,
                            "requested_concurrency": lv.client.requested_concurrency}
                           for lv in run.levels if lv.client is not None)
    if clients:
        st.caption("The probe's own client: event-loop lag (a 5 ms timer's delay), CPU share, and the concurrency "
                   "it held (time-weighted requests in flight, ramp-up and tail included); — where it has no reading")
        st.dataframe(pd.DataFrame(clients), hide_index=True, key="pr_client")
    compared = [r for r in measured_vs_predicted(run) if r["measured"] is not None]
    if compared:
        long = pd.DataFrame(compared).melt(["load", "metric"], var_name="source").dropna(subset=["value"])
        show_chart(alt.Chart(long).mark_line(point=True).encode(
            x=alt.X("load:Q", title="concurrency"), y=alt.Y("value:Q", title=None), color="source:N",
            tooltip=["load", "metric", "source", "value"]).properties(width=220, height=180).facet(
            column=alt.Column("metric:N", title=None)).resolve_scale(y="independent"), name="probe-vs-plan")
    samples = pd.DataFrame(run.sample_rows())
    if not samples.empty and samples["ttft_s"].notna().any():
        show_chart(alt.Chart(samples.dropna(subset=["ttft_s"])).mark_bar().encode(
            x=alt.X("ttft_s:Q", bin=alt.Bin(maxbins=40), title="TTFT (s)"), y="count()",
            color="concurrency:N"), name="probe-ttft-histogram")
    st.caption("Engine counters scraped from /metrics (unavailable series are null, not zero)")
    st.json(run.metrics, expanded=False)
    st.download_button("Probe CSV", run.csv_text(), file_name=f"probe-{run.run_id}.csv", key="pr_csv")
    c = st.columns(2)
    save_label = "Save this failed run anyway" if run.outcome == "failed" else "Save run to the store"
    if c[0].button(save_label, key="pr_save") and (engine := store_engine()) is not None:
        st.success(f"Saved as probe run {save_run(engine=engine, run=run)}")
    if c[1].button("Calibrate this scenario", key="pr_cal", disabled=run.outcome == "failed"):
        try:
            # the Calibrate page's fit (planner.benchimport), on this run's levels
            cal = calibrate_runs([(bench_run_from_probe(run), scenario_setup(scenario))])
            st.session_state["probe_cal"] = (cal, calibrated_from_scenario(scenario, cal))
        except PlannerError as exc:
            st.error(str(exc))
    if "probe_cal" in st.session_state:
        cal, calibrated = st.session_state["probe_cal"]
        e = cal.efficiency
        ho = cal.held_out_median_abs_error_pct
        st.write(f"bandwidth {e['bandwidth']:.3f} · compute {e['compute']:.3f} · step overhead "
                 f"{e['step_overhead_s'] * 1e3:.2f} ms · median |error| {cal.in_sample_median_abs_error_pct:.1f}% · "
                 f"{cal.cross_validation} " + ("—" if ho is None else f"{ho:.1f}%"))
        for text in cal.warnings:  # a value at its bound, an error over the limit: the fit says nothing
            st.warning(f"Calibration: {text}", icon=None)
        st.dataframe(pd.DataFrame([r.model_dump() for r in cal.rows]), hide_index=True, key="pr_resid")
        if st.button("Use the calibrated scenario", key="pr_use"):
            request_load(calibrated, label=f"calibrated from probe run {cal.calibrated_from}")
            st.rerun()
