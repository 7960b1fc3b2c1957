"""Sidebar widgets for the capacity inputs: peak traffic, target utilization,
minimum replicas, the KV link, the price (with its catalog source), the length
distribution (lognormal σ or an uploaded trace) and speculative decoding.

Each says its unit and where its default comes from (``planner.INPUT_HELP``).
An uploaded trace is read as capped bytes, never as a path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from pages._format import md, plain
from planner import (
    INPUT_HELP,
    SPECULATIVE_METHODS,
    TRACE_MAX_BYTES,
    TRACE_MAX_ROWS,
    PlannerError,
    Scenario,
    price_source,
    trace_from_upload,
)

DEFAULT = Scenario()
TRACE = "_trace"  # the uploaded trace's rows (list of [prompt, output])
TRACE_ID = "_trace_file_id"
# True once the mean rate was given (typed, or set by a link or a loaded scenario): until then
# the mean follows a typed peak (a flat load), never the example's 10 req/s under it.
MEAN_GIVEN = "_rps_given"


def mean_given() -> None:
    """on_change of the mean widget: the mean is the user's from now on."""
    st.session_state[MEAN_GIVEN] = True


def _mean_follows_peak() -> None:
    """on_change of the peak widget: a peak typed over the example's mean carries the mean with it."""
    peak = st.session_state.get("peak")
    if peak and not st.session_state.get(MEAN_GIVEN):
        st.session_state["rps"] = float(peak)


def _trace_upload(holes: dict[str, Any]) -> None:
    up = st.file_uploader(f"Trace CSV (prompt_tokens,output_tokens; up to {TRACE_MAX_ROWS:,} rows)", type=["csv"],
                          key="trace_file", max_upload_size=max(1, TRACE_MAX_BYTES // 2**20),
                          help="each row one request's prompt and output tokens; the means come from it")
    if up is not None and up.file_id != st.session_state.get(TRACE_ID):
        st.session_state[TRACE_ID] = up.file_id
        try:
            st.session_state[TRACE] = [list(r) for r in trace_from_upload(up.getvalue(), label="trace CSV")]
            st.session_state.pop("_trace_error", None)
        except PlannerError as exc:
            st.session_state[TRACE] = None
            st.session_state["_trace_error"] = plain(str(exc))
    if err := st.session_state.get("_trace_error"):
        st.error(err)
    rows = st.session_state.get(TRACE)
    if rows:
        st.caption(f"Trace: {len(rows):,} requests, mean prompt {sum(r[0] for r in rows) / len(rows):,.0f} and "
                   f"output {sum(r[1] for r in rows) / len(rows):,.0f} tokens (they replace the means above).")
    else:
        st.caption("No trace loaded yet: upload one, or choose another distribution.")


def capacity_widgets(num: Callable[..., Any], select: Callable[..., Any], holes: dict[str, Any]) -> None:
    """The capacity inputs, drawn inside the sidebar (``num``/``select`` are its widget helpers)."""
    st.subheader("Fleet")
    num("Peak requests/s (empty = the mean)", "peak", None, 1.0, holes, help=INPUT_HELP["workload.peak_requests_per_s"],
        on_change=_mean_follows_peak)
    if st.session_state.get("peak") and not st.session_state.get(MEAN_GIVEN):
        st.caption("The mean follows the peak (a flat load) until you type a mean.")
    num("Target utilization (%)", "target", DEFAULT.fleet.target_utilization * 100, 5.0, holes,
        help=INPUT_HELP["fleet.target_utilization"])
    num("Minimum replicas per pool", "minrep", DEFAULT.fleet.min_replicas, 1, holes,
        help=INPUT_HELP["fleet.min_replicas"])
    select("KV link (disaggregated)", ["rdma", "nvlink"], DEFAULT.fleet.link, "link", holes,
           help=INPUT_HELP["fleet.link"])
    price = num("Price ($/GPU-hour, empty = catalog)", "price", None, 0.1, holes,
                help=INPUT_HELP["cost.usd_per_gpu_hour"])
    gpu = st.session_state.get("gpu", DEFAULT.gpu)
    st.markdown(":gray[Price: " + md(plain(price_source(gpu=gpu, usd_per_gpu_hour=price))) + "]")
    with st.expander("Length distribution"):
        dist = select("Distribution", ["fixed", "lognormal", "trace"], DEFAULT.workload.distribution, "dist", holes,
                      help=INPUT_HELP["workload.distribution"])
        if dist == "lognormal":
            num("Prompt length σ (ln tokens)", "psig", 0.5, 0.1, holes, help=INPUT_HELP["workload.prompt_sigma"])
            num("Output length σ (ln tokens)", "osig", 0.5, 0.1, holes, help=INPUT_HELP["workload.output_sigma"])
        elif dist == "trace":
            _trace_upload(holes)
    with st.expander("Speculative decoding"):
        num("Draft tokens per pass (0 = off)", "draft", DEFAULT.speculative.draft_tokens, 1, holes,
            help=INPUT_HELP["speculative.draft_tokens"])
        select("Method (what drafts)", list(SPECULATIVE_METHODS), DEFAULT.speculative.method, "smethod", holes,
               help=INPUT_HELP["speculative.method"])
        num("Acceptance α (0 to 1; empty = the method's sourced default)", "accept", None, 0.05, holes,
            help=INPUT_HELP["speculative.acceptance"])
        num("Draft step cost (× a target step; empty = timed by the step model)", "dcost", None, 0.01, holes,
            help=INPUT_HELP["speculative.draft_cost"])
