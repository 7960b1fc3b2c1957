"""Autoscaling: a day of traffic, the replicas each policy holds per interval, what elasticity
saves against the static peak fleet, and (on demand) the simulated SLO attainment."""

from __future__ import annotations

import math
import os
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st
from streamlit import runtime as st_runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from pages._charts import downsample_max, show_chart
from pages._format import MISSING, derivation_md, md, plain, round3, shown, usd
from pages._sidebar import page_scenario
from planner import PlannerError, Scenario, scenario_from_dict
from planner.simulate.day import DEFAULT_STEP_REQUESTS, simulate_day
from planner.sizing.autoscale import MIN_DAY_INTERVAL_S, POLICIES, AutoscaleResult, compare_policies
from planner.spec.profile import MAX_PROFILE_CSV_BYTES, diurnal_profile, parse_profile_csv

st.title("Autoscaling")
base = page_scenario()
MIN_PEAK_REQ_S = 0.001  # the "Peak req/s" field's minimum


class _VisitorLeft(Exception):
    """The page's session is no longer connected: its work is for nobody."""


def _visitor_connected() -> bool:
    """Whether this run's browser session is still connected (True outside a server, e.g. AppTest)."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None or not st_runtime.exists():
        return True
    return bool(st_runtime.get_instance().is_active_session(ctx.session_id))


def _clamped(label: str, value: float, low: float) -> float:
    """``value`` raised to the field's minimum, saying so (a link or a saved scenario can hold less)."""
    if value >= low:
        return value
    st.warning(f"{label}: the scenario's {value:g} is below this field's minimum of {low:g}; using {low:g}.")
    return low


@st.cache_data(max_entries=16, show_spinner="Sizing every interval ...")
def _policies(scenario_json: str) -> dict[str, AutoscaleResult]:
    return compare_policies(Scenario.model_validate_json(scenario_json))


# The day's shapes; the first is the default: the scenario's own load (its profile, else flat at the
# peak, as the Plan page sizes it), never a curve nobody entered.
SHAPES = ("The scenario's load (flat unless it has a profile)", "Diurnal shape", "CSV upload (t_s,requests_per_s)")


def _profile() -> list[dict[str, float]] | None:
    src = st.radio("Traffic over the day", SHAPES, horizontal=True, key="as_shape")
    if src == SHAPES[0]:
        return None  # the scenario's workload.profile, or flat at its peak rate
    if src.startswith("CSV"):
        up = st.file_uploader("Profile CSV", type=["csv"], help=f"at most {MAX_PROFILE_CSV_BYTES:,} bytes")
        if up is None:
            st.info("Upload a CSV with columns t_s,requests_per_s to use it; the diurnal shape is used until then.")
        elif up.size > MAX_PROFILE_CSV_BYTES:
            st.error(f"profile: the CSV is over the limit of {MAX_PROFILE_CSV_BYTES:,} bytes")
        else:
            try:
                pts = parse_profile_csv(up.read(MAX_PROFILE_CSV_BYTES + 1).decode("utf-8", errors="replace"))
                return [p.model_dump() for p in pts]
            except PlannerError as exc:
                st.error(plain(str(exc)))
    c = st.columns(3)
    peak = c[0].number_input("Peak req/s", min_value=MIN_PEAK_REQ_S,
                             value=_clamped("Peak req/s", float(base.workload.peak_rate), MIN_PEAK_REQ_S),
                             key="as_peak")
    trough = c[1].number_input("Trough req/s", min_value=0.0, value=float(base.workload.peak_rate) / 10,
                               key="as_trough")
    hour = c[2].number_input("Peak hour", min_value=0.0, max_value=23.99, value=14.0, key="as_hour")
    try:
        return [p.model_dump() for p in diurnal_profile(peak=peak, trough=trough, peak_hour=hour)]
    except PlannerError as exc:
        st.error(plain(str(exc)))
        return None


def _scenario(profile: list[dict[str, float]] | None) -> Scenario | None:
    f = base.fleet
    c = st.columns(4)
    interval = c[0].number_input("Scale interval (s)", min_value=MIN_DAY_INTERVAL_S,
                                 value=_clamped("Scale interval (s)", float(f.scale_interval_s), MIN_DAY_INTERVAL_S),
                                 key="as_int", help=f"at least {MIN_DAY_INTERVAL_S:g} s (MAX_DAY_INTERVALS per day)")
    auto = f.scale_up_delay_s is None
    delay = c[1].number_input("Scale-up delay (s, 0 = derived)", min_value=0.0,
                              value=0.0 if auto else float(f.scale_up_delay_s or 0.0), key="as_delay",
                              help="0: engine start + weights per GPU / load bytes/s")
    warm = c[2].number_input("Warm pool replicas", min_value=0, value=int(f.warm_pool_replicas), key="as_warm")
    down = c[3].number_input("Scale-down delay (s)", min_value=0.0, value=float(f.scale_down_delay_s), key="as_down")
    data: dict[str, Any] = base.model_dump(mode="json")
    data["fleet"].update(scale_interval_s=interval, scale_up_delay_s=delay or None, warm_pool_replicas=int(warm),
                         scale_down_delay_s=down)
    if profile is not None:
        data["workload"]["profile"] = profile
    try:
        return scenario_from_dict(data)
    except PlannerError as exc:
        st.error(plain(str(exc)))
        return None


scenario = _scenario(_profile())
if scenario is None:
    st.stop()
try:
    results = _policies(scenario.model_dump_json())
except PlannerError as exc:
    st.error(plain(str(exc)))
    st.stop()

sim_key = "autoscale_sim"
c1, c2 = st.columns([1, 3])
per_step = c1.number_input("Requests per interval", min_value=50, max_value=100_000, value=DEFAULT_STEP_REQUESTS,
                           step=50, key="as_reqs")
if c2.button("Simulate the day (every policy)"):
    bar = st.progress(0.0, text="simulating intervals ...")
    shown_bar = [0.0, "simulating intervals ..."]
    done: dict[str, AutoscaleResult] = {}

    def _beat() -> None:
        # while the workers run: once the visitor has left (their session is no longer
        # connected), raise, and simulate_day stops its worker processes at once
        if not _visitor_connected():
            raise _VisitorLeft
        bar.progress(shown_bar[0], text=str(shown_bar[1]))

    try:
        for i, pol in enumerate(POLICIES):
            def _tick(d: int, n: int, i: int = i, pol: str = pol) -> None:
                shown_bar[:] = [(i + d / n) / len(POLICIES), f"{pol}: interval {d} of {n}"]
                _beat()

            done[pol] = simulate_day(scenario, results[pol], requests_per_step=int(per_step),
                                     workers=os.cpu_count(), progress=_tick, heartbeat=_beat)
    except PlannerError as exc:
        bar.empty()
        st.error(plain(str(exc)))
        st.stop()
    except _VisitorLeft:
        st.stop()  # nobody to show it to
    bar.empty()
    st.session_state[sim_key] = (scenario.model_dump_json(), int(per_step), done)
saved = st.session_state.get(sim_key)
if saved and saved[0] == scenario.model_dump_json():
    results = saved[2]
    st.caption(f"Simulated: {saved[1]:,} requests per interval from its busiest moment, replicas joining after "
               "their scale-up delay with an empty prefix cache.")

pick = st.radio("Policy on the chart", POLICIES, index=POLICIES.index(scenario.fleet.policy), horizontal=True)
res = results[pick]
disagg = scenario.serving.mode == "disaggregated"
rows = []
for stp in res.steps:
    hour = stp.t_s / 3600
    rows.append({"hour": hour, "series": "requests/s", "value": stp.requests_per_s, "axis": "traffic"})
    if disagg:
        rows.append({"hour": hour, "series": "prefill replicas", "value": stp.prefill_replicas, "axis": "replicas"})
        rows.append({"hour": hour, "series": "decode replicas", "value": stp.decode_replicas, "axis": "replicas"})
    else:
        rows.append({"hour": hour, "series": "replicas", "value": stp.replicas, "axis": "replicas"})
    rows.append({"hour": hour, "series": "replicas needed", "value": stp.needed_replicas, "axis": "replicas"})
df, binned = downsample_max(pd.DataFrame(rows), by="series")
if binned > 1:
    st.caption(f"{len(res.steps):,} intervals drawn as {math.ceil(len(res.steps) / binned):,} points per series: "
               f"each the highest of {binned} consecutive intervals.")
# The day's axis: 0 to 24 h, never padded below 0 (a bar chart's default), a tick every 2 h.
DAY_TICKS_H = list(range(0, 25, 2))
x = alt.X("hour:Q", title="hour of day", scale=alt.Scale(domain=[0, 24], nice=False, clamp=True),
          axis=alt.Axis(values=DAY_TICKS_H))
traffic = alt.Chart(df[df.axis == "traffic"]).mark_area(opacity=0.25, interpolate="step-after").encode(
    x=x, y=alt.Y("value:Q", title="requests/s"), tooltip=["hour", "value"])
reps = alt.Chart(df[df.axis == "replicas"]).mark_line(interpolate="step-after").encode(
    x=x, y=alt.Y("value:Q", title="replicas"), color=alt.Color("series:N", title=None),
    strokeDash=alt.condition(alt.datum.series == "replicas needed", alt.value([4, 3]), alt.value([1, 0])),
    tooltip=["hour", "series", "value"])
show_chart(alt.layer(traffic, reps).resolve_scale(y="independent").properties(
    title=f"{pick}: traffic and replicas per interval"), f"autoscale-{pick}", height=360)

att = [s.slo_attainment for s in res.steps]
if any(a is not None for a in att):
    adf = pd.DataFrame({"hour": [s.t_s / 3600 for s in res.steps], "attainment": att})
    adf["end"] = adf["hour"].shift(-1).fillna(24.0).clip(upper=24.0)  # each bar spans its interval
    show_chart(alt.Chart(adf).mark_bar().encode(
        x=x, x2="end:Q", y=alt.Y("attainment:Q", title="simulated SLO attainment",
                                                       scale=alt.Scale(domain=[0, 1]))), f"autoscale-att-{pick}",
        height=240)
else:
    st.caption("Analytic verdict per interval: " + ", ".join(
        f"{s.t_s / 3600:g} h" for s in res.steps if not s.meets_slo) + " miss the SLO" if not all(
        s.meets_slo for s in res.steps) else "Analytic verdict: every interval meets the SLO.")

st.subheader("The three policies")
table = {p: {"GPU-hours / day": round3(r.summary.gpu_hours), "$ / day": usd(r.summary.usd_per_day),
             "$ / Mtok output": usd(r.summary.usd_per_mtok_output),
             "Savings vs static": f"{r.summary.savings_fraction:.1%}",
             "Intervals meeting the SLO (analytic)": f"{r.summary.steps_meeting_slo:.0%}",
             "Simulated attainment (day)": shown(r.summary.slo_attainment, "fraction"),
             "Worst interval (simulated)": shown(r.summary.worst_step_slo_attainment, "fraction"),
             "GPUs: fewest / most": f"{r.summary.min_gpus:,.0f} / {r.summary.peak_gpus:,.0f}"}
         for p, r in results.items()}
st.table(pd.DataFrame(table).astype(str).fillna(MISSING))

st.subheader("Derivations")
for dv in res.derivations.values():
    with st.expander(md(f"{dv.name}: {shown(dv.value, dv.unit if dv.unit in ('s', 'USD') else '')}")):
        st.markdown(derivation_md(dv))
