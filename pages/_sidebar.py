"""The shared scenario sidebar: every page reads the same widgets.

The address bar holds the scenario (``pages/_link.py``): a fresh session reads
it once, every run writes it back, so a page switch, a reload or a shared link
reproduces the view.  A model imported on the Catalog page lives in
``st.session_state["imported_models"]`` and is offered here beside the catalog's.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from pages._capacity import capacity_widgets
from pages._format import plain
from pages._link import (
    BASE,
    LOADED,
    PINNED,
    apply_pending,
    copy_link,
    imported_models,
    read_link_once,
    request_load,
    request_stored,
    saved_banner,
    show_problems,
    sync_url,
)
from pages._nav import VIA_APP, app_pages
from planner import INPUT_HELP, LINK_FIELDS, Plan, PlannerError, Scenario, load_catalog, plan, scenario_from_dict
from planner import scenario_data as _scenario_data
from planner import views as _curves

__all__ = [
    "DTYPES", "KV_DTYPES", "MODES", "cached_curve", "cached_plan", "cached_sweep", "frame", "imported_models",
    "page_plan", "page_scenario", "request_load", "request_stored",
]

DTYPES = ["bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"]
KV_DTYPES = ["bf16", "fp16", "fp8"]
SCENARIO_KEY = "_scenario"
MODES = ["colocated", "disaggregated"]
TPS, PPS, EPS = [1, 2, 4, 8, 16], [1, 2, 4, 8], [1, 2, 4, 8, 16, 32, 64]
DISTRIBUTIONS = ["fixed", "lognormal", "trace"]
LINKS = ["rdma", "nvlink"]
DEFAULT = Scenario()  # widget defaults are the Scenario's own defaults

# Scenario field named in an error message -> the widget that sets it (most specific first).
FIELD_WIDGET = {
    "serving.mode": "mode", "peak_requests_per_s": "peak", "trace": "dist", "lognormal": "dist",
    "workload.prefix_hit_rate": "hit", "prefix_hit_rate": "hit", "workload.prefix_tokens": "prefix",
    "prefix_tokens": "prefix", "workload.prompt_tokens": "prompt", "workload.output_tokens": "output",
    "workload.prompt_sigma": "psig", "workload.output_sigma": "osig",
    "workload.requests_per_s": "rps", "slo.ttft_s": "ttft_ms", "slo.itl_s": "itl_ms",
    "serving.batch_size": "batch", "serving.context_tokens": "ctx", "serving.chunk_tokens": "chunk",
    "serving.memory_utilization": "util", "cost.usd_per_gpu_hour": "price", "parallel.tp": "tp",
    "parallel.pp": "pp", "parallel.ep": "ep", "fleet.target_utilization": "target", "fleet.min_replicas": "minrep",
    "speculative.draft_tokens": "draft", "speculative.acceptance": "accept", "speculative.draft_cost": "dcost",
    "weights_dtype": "wd", "kv_dtype": "kd", "gpu": "gpu", "model": "model", "name": "name",
}


@st.cache_data(max_entries=512, show_spinner=False)
def _plan(scenario_json: str) -> Plan:
    return plan(Scenario.model_validate_json(scenario_json))


@st.cache_data(max_entries=512, show_spinner=False)
def _curve(name: str, scenario_json: str, kwargs: tuple[tuple[str, Any], ...]) -> Any:
    return getattr(_curves, name)(Scenario.model_validate_json(scenario_json), **dict(kwargs))


def cached_plan(scenario: Scenario) -> Plan:
    """``planner.sizing.plan``, cached on the scenario's JSON."""
    return _plan(scenario.model_dump_json())


def cached_curve(name: str, scenario: Scenario, **kwargs: Any) -> Any:
    """A ``planner.views.curves`` function, cached on (name, scenario JSON, arguments)."""
    frozen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kwargs.items()))
    return _curve(name, scenario.model_dump_json(), frozen)


@st.cache_data(max_entries=32, show_spinner=False)
def _sweep(scenario_json: str, axes: tuple[tuple[str, tuple[Any, ...]], ...]) -> list[dict[str, Any]]:
    from planner import sweep

    return list(sweep(Scenario.model_validate_json(scenario_json), **dict(axes))["rows"])


def cached_sweep(scenario: Scenario, **axes: Any) -> list[dict[str, Any]]:
    """``planner.views.sweep.sweep(...)["rows"]``, cached on the scenario and the axes."""
    return _sweep(scenario.model_dump_json(), tuple(sorted((k, tuple(v)) for k, v in axes.items())))


def _num(label: str, key: str, value: float | int | None, step: float | int, holes: dict[str, Any],
         help: str | None = None, **kw: Any) -> Any:
    # A value set through session state (a link, a loaded scenario) is the widget's value.  The default
    # stays the same on every run: a browser resets a widget whose default changes between runs.
    out = st.number_input(label, value=value, step=step, key=key, persist_state="session", help=help, **kw)
    holes[key] = st.empty()
    return out


def _select(label: str, options: list[Any], default: Any, key: str, holes: dict[str, Any],
            help: str | None = None) -> Any:
    out = st.selectbox(label, options, index=options.index(default), key=key, persist_state="session", help=help)
    holes[key] = st.empty()
    return out


def _choices(cat: Any) -> dict[str, list[Any]]:
    extra = imported_models()
    return {"gpu": sorted(cat.gpus), "model": sorted(cat.models) + sorted(k for k in extra if k not in cat.models),
            "wd": DTYPES, "kd": KV_DTYPES, "tp": TPS, "pp": PPS, "ep": EPS, "mode": MODES,
            "dist": DISTRIBUTIONS, "link": LINKS}


def _banner(gpu: str, model: str) -> None:
    loaded = st.session_state.get(LOADED)
    pinned = st.session_state.get(PINNED)
    if not loaded or not loaded["drift"] or not pinned:
        return
    if pinned["gpu"]["id"] != gpu or pinned["model"]["id"] != model:
        return
    st.warning(f"The catalog changed since {loaded['label']} was saved; it plans with the entries as saved:  \n"
               + "  \n".join(f"`{line}`" for line in loaded["drift"]))
    if st.button("Re-plan on the current catalog", key="replan_current"):
        st.session_state[PINNED] = None
        st.rerun()


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _widgets(cat: Any, holes: dict[str, Any]) -> None:
    """The scenario's widgets; their values are read back from session state by key."""
    choices = _choices(cat)
    with st.sidebar:
        st.header("Scenario")
        st.text_input("Scenario name", value=DEFAULT.name, key="name", max_chars=200,
                      help="shown in exports and reports")
        holes["name"] = st.empty()
        _select("GPU", choices["gpu"], DEFAULT.gpu, "gpu", holes)
        _select("Model", choices["model"], DEFAULT.model, "model", holes)
        c1, c2 = st.columns(2)
        with c1:
            _select("Weights", DTYPES, DEFAULT.weights_dtype, "wd", holes)
        with c2:
            _select("KV cache", KV_DTYPES, DEFAULT.kv_dtype, "kd", holes)
        c1, c2, c3 = st.columns(3)
        with c1:
            _select("TP", TPS, 1, "tp", holes, help="tensor parallel: GPUs splitting each layer")
        with c2:
            _select("PP", PPS, 1, "pp", holes, help="pipeline parallel: GPUs splitting the layers")
        with c3:
            _select("EP", EPS, 1, "ep", holes, help="expert parallel (mixture-of-experts models)")
        _select("Serving mode", MODES, DEFAULT.serving.mode, "mode", holes,
                help="colocated: prefill and decode share replicas (chunked prefill); disaggregated: separate pools")
        st.subheader("Workload")
        _num("Prompt tokens (mean)", "prompt", DEFAULT.workload.prompt_tokens, 100, holes)
        _num("Output tokens (mean)", "output", DEFAULT.workload.output_tokens, 50, holes)
        _num("Requests/s (mean)", "rps", DEFAULT.workload.requests_per_s, 1.0, holes,
             help=INPUT_HELP["workload.requests_per_s"])
        _num("Shared prefix tokens", "prefix", 0, 100, holes, help="tokens every prompt shares (a system prompt)")
        _num("Prefix hit rate (0 to 1)", "hit", 0.0, 0.1, holes, help="share of requests that find the prefix cached")
        st.subheader("Targets")
        _num("TTFT target, p90 (ms)", "ttft_ms", DEFAULT.slo.ttft_s * 1e3, 50.0, holes,
             help="time to first token; the plan checks its p90, queueing included")
        _num("ITL target (ms)", "itl_ms", DEFAULT.slo.itl_s * 1e3, 5.0, holes,
             help="inter-token latency; the plan checks it at its percentile (p90 unless the scenario sets "
                  "slo.itl_percentile) at its batch, prefill chunk stalls included")
        capacity_widgets(_num, _select, holes)
        with st.expander("Serving engine"):
            _num("Batch (0 = largest that fits)", "batch", 0, 1, holes, min_value=0)
            _num("Context tokens (0 = prompt + output)", "ctx", 0, 256, holes, min_value=0)
            _num("Prefill chunk tokens", "chunk", DEFAULT.serving.chunk_tokens, 128, holes,
                 help="vLLM's max_num_batched_tokens (default 2,048)")
            _num("Memory utilization (0 = HBM − weights − reserved)", "util", DEFAULT.serving.memory_utilization,
                 0.05, holes, help="vLLM's gpu_memory_utilization (default 0.9)")


def _values() -> dict[str, Any]:
    return {f.key: st.session_state.get(f.key) for f in LINK_FIELDS if f.key in st.session_state}


def sidebar_scenario() -> Scenario | None:
    """Build the Scenario from the sidebar; show a message next to the offending
    widget (and on the page) and return None if it is invalid."""
    cat = load_catalog()
    read_link_once(_choices(cat))
    apply_pending()
    holes: dict[str, Any] = {}
    extra = imported_models()
    if "model_pending" in st.session_state:  # a model just imported on the Catalog page
        st.session_state["model"] = st.session_state.pop("model_pending")
    _widgets(cat, holes)
    values = _values()
    gpu, model = values["gpu"], values["model"]
    data = _scenario_data(values)
    if model in extra and model not in cat.models:
        data["model"] = extra[model]
    trace = st.session_state.get("_trace")
    if values.get("dist") == "trace" and trace:
        data["workload"]["trace"] = [tuple(r) for r in trace]
    base = st.session_state.get(BASE)
    if base:  # inputs the sidebar has no widget for (efficiency, block size ...) come from the loaded one
        data = _merge({k: v for k, v in base.items() if k not in ("gpu", "model")}, data)
        if values.get("dist") != "trace":
            data["workload"].pop("trace", None)
    pinned = st.session_state.get(PINNED)
    if pinned and pinned["gpu"]["id"] == gpu and pinned["model"]["id"] == model:
        data["gpu"], data["model"] = pinned["gpu"], pinned["model"]
        if values.get("price") is None:
            data["cost"]["usd_per_gpu_hour"] = pinned["usd_per_gpu_hour"]
    _banner(gpu, model)
    try:
        scenario = scenario_from_dict(data)
    except PlannerError as exc:
        msg = str(exc)
        key = next((w for field, w in FIELD_WIDGET.items() if field in msg), None)
        (holes[key] if key else st.sidebar).error(plain(msg))
        st.error(f"The scenario is not valid: {plain(msg)}")
        return None
    with st.sidebar.expander("Share this view"):
        copy_link(sync_url(scenario, values))
    return scenario


def frame() -> None:
    """What ``app.py`` draws around every page: the page config and the sidebar's scenario.
    Whatever the core raises (PlannerError: a bad input, an unusable store) is one message."""
    st.set_page_config(page_title="Ridgeline", layout="wide")
    st.session_state[VIA_APP] = True
    try:
        scenario = sidebar_scenario()
    except PlannerError as exc:
        scenario = None
        st.error(plain(str(exc)))
    st.session_state[SCENARIO_KEY] = scenario
    show_problems(scenario)
    saved_banner(scenario)


def through_app_py() -> None:
    """Make sure this run went through ``app.py``; else declare the navigation and rerun.

    Streamlit decides once per process whether a ``pages/`` folder beside the
    entrypoint means its older folder mode; a fresh server's first visitor who
    opens a page's own URL (``/fleet?model=...``) gets that page run alone.  A
    call of the public ``st.navigation`` ends the folder mode for the process,
    and the rerun then runs ``app.py``, which keeps the URL's page."""
    if st.session_state.pop(VIA_APP, False):
        return
    st.navigation(app_pages(), position="hidden")
    st.rerun()


def page_scenario() -> Scenario:
    """The scenario ``app.py`` built from the sidebar before this page ran, or stop
    the page (the sidebar has shown the message).  Call it once per run: it takes
    the marker app.py leaves for the page it runs."""
    through_app_py()
    scenario = st.session_state.get(SCENARIO_KEY)
    if scenario is None:
        st.stop()
    return scenario


def page_plan(scenario: Scenario) -> Plan:
    """The cached plan, or an error message and stop."""
    try:
        return cached_plan(scenario)
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
