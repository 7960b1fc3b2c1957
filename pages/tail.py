"""Tail latency: the iteration-level simulator, by default on the plan's own fleet
(its colocated replicas or its prefill and decode pools) at the peak rate, long
enough to reach steady state."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages._charts import show_chart
from pages._format import MISSING, round3, shown
from pages._layout import metric_cells
from pages._sidebar import page_plan, page_scenario
from planner import PlannerError, Scenario
from planner.simulate import (
    MAX_RATE_REQ_S,
    PLAN_ATTAINMENT_TARGET,
    RateSweep,
    ReplicaTimeline,
    SimOptions,
    SimReport,
    describe_knee,
    fleet_sim,
    knee_rates,
    rate_sweep,
    sim_options,
    simulate,
    summarize,
)

ROUTERS = ("round_robin", "least_loaded", "prefix_affinity")
ROUTER_NAMES = {"round_robin": "round robin", "least_loaded": "least loaded", "prefix_affinity": "prefix affinity"}
TIMELINE_REPLICAS = 8  # replicas drawn on the timelines (a legend of 22 is unreadable)
ROUTER_REQUESTS = 400  # the router comparison is relative: a short run ranks the routers
DEFAULT = Scenario()
MIN_RATE_REQ_S = 0.001  # the "Offered req/s" field's range (the simulator's MAX_RATE_REQ_S above)


def _sim_json(scenario: Scenario) -> str:
    """The scenario as the simulator reads it, the key of its cached runs: the name and
    the price change no simulated number (the fleet comes from the options), so a rename
    or a new $/GPU-hour reuses the runs instead of simulating again."""
    return scenario.model_copy(update={"name": DEFAULT.name, "cost": DEFAULT.cost}).model_dump_json()


@st.cache_data(max_entries=64, show_spinner=False)
def _run(scenario_json: str, options_json: str) -> SimReport:
    s, o = Scenario.model_validate_json(scenario_json), SimOptions.model_validate_json(options_json)
    return summarize(simulate(s, o), slo_ttft_s=s.slo.ttft_s, slo_itl_s=s.slo.itl_s, timeline=True)


@st.cache_data(max_entries=32, show_spinner=False)
def _rates(scenario_json: str, options_json: str, rates: tuple[float, ...]) -> RateSweep:
    return rate_sweep(Scenario.model_validate_json(scenario_json), SimOptions.model_validate_json(options_json), rates)


def _name(timeline: ReplicaTimeline, i: int) -> str:
    return f"{timeline.role} {i}" if timeline.role != "colocated" else f"replica {i}"


st.title("Tail latency")
scenario = page_scenario()
sj = _sim_json(scenario)
plan = page_plan(scenario)
disagg = scenario.serving.mode == "disaggregated"
fs = fleet_sim(plan, scenario)
if fs is None:
    st.warning(f"No operating point meets the SLO ({plan.operating_point.reason}), so the plan has no fleet: "
               "choose one below.")
custom = st.toggle("Simulate a different fleet", value=fs is None, key="tl_custom", disabled=fs is None)
try:
    if custom or fs is None:
        c = st.columns(4)
        if disagg:
            pre = c[0].number_input("Prefill replicas", 1, 4096, fs.prefill_replicas if fs else 1, key="tl_prefill")
            dec = c[1].number_input("Decode replicas", 1, 4096, fs.decode_replicas if fs else 1, key="tl_decode")
            pools: dict[str, int] = {"prefill_replicas": int(pre), "decode_replicas": int(dec)}
        else:
            rep = c[0].number_input("Replicas", 1, 4096, fs.replicas if fs else 1, key="tl_replicas")
            c[1].caption("colocated: prefill and decode share each replica")
            pools = {"replicas": int(rep)}
        asked = float(fs.rate_req_s if fs else scenario.workload.peak_rate)
        if not MIN_RATE_REQ_S <= asked <= MAX_RATE_REQ_S:
            clamped = min(max(asked, MIN_RATE_REQ_S), MAX_RATE_REQ_S)
            st.warning(f"Offered req/s: the scenario's {asked:g} is outside this field's range {MIN_RATE_REQ_S:g} to "
                       f"{MAX_RATE_REQ_S:g}; using {clamped:g}.")
            asked = clamped
        rate = c[2].number_input("Offered req/s", MIN_RATE_REQ_S, MAX_RATE_REQ_S, asked, key="tl_rate")
        n = c[3].number_input("Requests", 50, 20_000, min(max(fs.options.requests if fs else 400, 50), 20_000), 100,
                              key="tl_requests")
        opts = sim_options(requests=int(n), rate_req_s=float(rate), seed=0, slo_attainment=PLAN_ATTAINMENT_TARGET,
                           max_batch=plan.operating_point.batch_size if plan.operating_point.feasible else None, **pools)
        fleet_words = ", ".join(f"{v:,} {k.replace('_', ' ').removesuffix('s') if v == 1 else k.replace('_', ' ')}"
                                for k, v in pools.items())
        st.caption(f"Your fleet: {fleet_words} at {shown(float(rate), 'req/s')}, {int(n):,} requests.")
    else:
        opts = fs.options
        st.caption(f"Simulating {fs.describe()}; each replica's batch is capped at the plan's "
                   f"{plan.operating_point.batch_size:,}.")
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
with st.spinner("Simulating"):
    try:
        one = _run(sj, opts.model_dump_json())
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
target = PLAN_ATTAINMENT_TARGET
ok = one.slo_attainment + 1e-12 >= target
m = metric_cells(4)  # two a row: labels and values fit at 1024 px
m[0].metric("Requests meeting both targets", f"{one.slo_attainment:.1%}",
            help=f"TTFT ≤ {shown(scenario.slo.ttft_s, 's')} and the request's mean ITL ≤ "
                 f"{shown(scenario.slo.itl_s, 's')}; the plan promises {target:.0%} (it sizes TTFT at its p90)")
m[1].metric(f"Plan's {target:.0%}", "met" if ok else "missed",
            help=f"the plan promises that at least {target:.0%} of requests meet both targets")
m[2].metric("Goodput", shown(one.goodput_req_s, "req/s"), help="requests/s meeting both targets")
m[3].metric("Preemptions", f"{one.preemptions:,}", help="sequences evicted from the KV cache and recomputed")
if not ok:
    st.warning(f"Only {one.slo_attainment:.1%} of simulated requests meet both targets, below the {target:.0%} "
               "the plan promises for this fleet.")
st.subheader(f"Percentiles at {shown(opts.rate_req_s or scenario.workload.requests_per_s, 'req/s')}, in ms")
rows = {"TTFT · queueing included": one.ttft_s, "ITL · every token gap": one.itl_s,
        "ITL · each request's mean (TPOT)": one.tpot_s, "End-to-end · queueing included": one.e2e_s}
st.dataframe(pd.DataFrame({label: {stat: round3(value * 1e3) for stat, value in v.model_dump().items()}
                           for label, v in rows.items()}).T, key="tl_pct",
             column_config={stat: st.column_config.NumberColumn(format="localized")
                            for stat in ("mean", "p50", "p90", "p99")})
if plan.operating_point.feasible:
    op_ = plan.operating_point
    st.caption(f"Targets: TTFT {shown(scenario.slo.ttft_s, 's')} (p90 {shown(op_.ttft_p90_s, 's')} analytic) and "
               f"TPOT {shown(scenario.slo.itl_s, 's')} per request (p{op_.itl_percentile * 100:g} "
               f"{shown(op_.itl_percentile_s, 's')} analytic; ITL mean {shown(op_.itl_s, 's')}; token-gap p99 "
               f"{shown(op_.itl_gap_p99_s, 's')}): the plan is feasible when at least "
               f"{scenario.slo.attainment:.0%} of requests meet both ({op_.slo_attainment:.1%} analytic), as the "
               "simulation scores them.")
else:
    st.caption(f"Targets: TTFT {shown(scenario.slo.ttft_s, 's')}, ITL {shown(scenario.slo.itl_s, 's')}; the plan has "
               f"no analytic value to set beside them ({MISSING}: no operating point meets the SLO).")

st.subheader("Knee: the highest rate that still meets the target")
if st.button("Find the knee", key="tl_knee", help="simulates six rates from 0.5× to 2× the analytic capacity"):
    st.session_state["tl_knee_for"] = (sj, opts.model_dump_json())
if st.session_state.get("tl_knee_for") == (sj, opts.model_dump_json()):
    rates = (knee_rates(plan, fs) if fs is not None and not custom
             else tuple(round(opts.rate_req_s * x, 3) for x in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)) if opts.rate_req_s
             else (scenario.workload.requests_per_s,))
    with st.spinner("Sweeping the offered rate"):
        try:
            sw = _rates(sj, opts.model_dump_json(), rates)
        except PlannerError as exc:
            st.error(str(exc))
            st.stop()
    st.markdown("**Knee:** " + describe_knee(rates=rates, knee=sw.knee_rate_req_s, target=target))
    curve = pd.DataFrame([{"offered (req/s)": lv.offered_rate_req_s, "goodput (req/s)": lv.goodput_req_s,
                           "meeting both targets (%)": round(lv.slo_attainment * 100, 1)} for lv in sw.levels])
    chart = alt.Chart(curve).mark_line(point=True).encode(
        x=alt.X("offered (req/s):Q"), y=alt.Y("goodput (req/s):Q"), tooltip=list(curve.columns))
    if sw.knee_rate_req_s is not None:
        chart = chart + alt.Chart(pd.DataFrame({"knee": [sw.knee_rate_req_s]})).mark_rule(
            color="#d62728", strokeDash=[4, 4]).encode(x=alt.X("knee:Q", title="offered (req/s)"))
    show_chart(chart.properties(height=260, title="Goodput vs offered rate (knee dashed)"), "tail-goodput")
else:
    st.caption("Press the button to sweep the offered rate (about 6 runs).")

st.subheader("KV cache and batch over time")
# Disaggregated: the decode pool holds the KV cache and the batches (a prefill replica's stay near 0).
timelines = [r for r in one.timeline or () if r.role != "prefill"]
shown_tl = timelines[:TIMELINE_REPLICAS]
tl = pd.concat([pd.DataFrame({"t (s)": r.t_s, "batch (sequences)": r.batch_size,
                              "KV used (%)": [x * 100 for x in r.kv_utilization],
                              "replica": _name(r, i), "order": i})
                for i, r in enumerate(shown_tl)])
if disagg:
    st.caption(f"The decode pool ({min(len(timelines), TIMELINE_REPLICAS)} of its {len(timelines):,} replicas): it holds "
               "the KV cache and the batches; prefill replicas hand each request on after its first token.")
elif len(timelines) > TIMELINE_REPLICAS:
    st.caption(f"{TIMELINE_REPLICAS} of {len(timelines):,} replicas.")
legend_order = [_name(r, i) for i, r in enumerate(shown_tl)]
for col, name in (("KV used (%)", "tail-kv"), ("batch (sequences)", "tail-batch")):
    show_chart(alt.Chart(tl).mark_line().encode(x="t (s):Q", y=f"{col}:Q",
                                                color=alt.Color("replica:N", sort=legend_order, title=None,
                                                                legend=alt.Legend(orient="bottom", columns=8)))
               .properties(height=200, title=f"{col.split(' (')[0]} over time"), name, height=330)
st.subheader("Routers on 4-turn chat")
reps = max(2, opts.prefill_replicas if disagg else opts.replicas)
if st.button("Compare routers", key="tl_routers_go", help=f"three short runs of {ROUTER_REQUESTS} requests"):
    st.session_state["tl_routers_for"] = (sj, opts.model_dump_json())
if st.session_state.get("tl_routers_for") == (sj, opts.model_dump_json()):
    rows_r = []
    for router in ROUTERS:
        o = opts.model_copy(update={"router": router, "multi_turn": 4, "requests": ROUTER_REQUESTS,
                                    ("prefill_replicas" if disagg else "replicas"): reps})
        try:
            r = _run(sj, o.model_dump_json())
        except PlannerError as exc:
            st.error(f"{ROUTER_NAMES[router]}: {exc}")
            st.stop()
        rows_r.append({"router": ROUTER_NAMES[router],
                       "TTFT p50 · queueing included (ms)": round3(r.ttft_s.p50 * 1e3),
                       "TTFT p99 · queueing included (ms)": round3(r.ttft_s.p99 * 1e3),
                       "prefix hit rate (%)": round(r.prefix_hit_rate * 100, 1),
                       "meeting both targets (%)": round(r.slo_attainment * 100, 1)})
    st.caption(f"{ROUTER_REQUESTS} requests, {reps} {'colocated ' if not disagg else 'prefill '}replicas; a short run "
               "that ranks the routers.")
    st.dataframe(pd.DataFrame(rows_r), hide_index=True, key="tl_routers")
else:
    st.caption("Press the button to compare round robin, least loaded and prefix affinity on multi-turn chat.")
