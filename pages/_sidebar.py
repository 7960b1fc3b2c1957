"""The shared scenario sidebar: every page reads the same widgets.

The address bar holds the scenario (``pages/_link.py``): a fresh session reads
it once, every run writes it back, so a page switch, a reload or a shared link
reproduces the view.  A model imported on the Catalog page lives in
``st.session_state["imported_models"]`` and is offered here beside the catalog's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from pages._capacity import capacity_widgets, mean_given
from pages._format import code, plain
from pages._link import (
    BASE,
    INLINE_SUFFIX,
    LOADED,
    PINNED,
    apply_pending,
    copy_link,
    imported_models,
    inline_gpus,
    read_link_once,
    request_load,
    request_stored,
    saved_banner,
    show_problems,
    sync_url,
)
from pages._nav import VIA_APP, app_pages
from pages._pools import pool_block
from planner import (
    INPUT_HELP,
    LINK_FIELDS,
    SPECULATIVE_METHODS,
    Plan,
    PlannerError,
    Scenario,
    human,
    layout_caption,
    load_catalog,
    plan,
    scenario_from_dict,
    widget_values,
)
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
TPS, PPS, EPS = [1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8], [1, 2, 4, 8, 16, 32, 64]
DP_ATTENTION = [False, True]
DISTRIBUTIONS = ["fixed", "lognormal", "trace"]
LINKS = ["rdma", "nvlink"]
ENGINES = ["vllm", "sglang", "trtllm"]
DEFAULT = Scenario()  # widget defaults are the Scenario's own defaults



@dataclass(frozen=True)
class Widget:
    """One sidebar widget.  Its key is also its link parameter, and ``planner.LINK_FIELDS``
    holds its scenario field, kind and unit scale (ms for s, % for fractions): the one
    map that URL sync (``pages/_link.py``) and scenario building (``scenario_data``) read."""

    key: str
    label: str  # with the unit
    step: float | int = 1  # number inputs
    help: str | None = None
    default: Any = None  # None: the Scenario's own default, in the widget's unit
    min_value: int | None = None
    options: str = ""  # select boxes: the key of ``_choices``
    phrases: tuple[str, ...] = ()  # words of a validation message (besides the field) that name this widget


def _w(key: str, label: str, step: float | int = 1, help: str | None = None, **kw: Any) -> Widget:
    return Widget(key, label, step, help, **kw)


# The sidebar's widgets, drawn in this order (the capacity inputs between Targets and the
# serving engine come from pages/_capacity.py); a row's "layout" group places it.
SIDEBAR: tuple[tuple[str, str, tuple[Widget, ...]], ...] = (
    ("header", "Scenario", (
        _w("name", "Scenario name", help="shown in exports and reports"),
        _w("gpu", "GPU", options="gpu"),
        _w("model", "Model", options="model"),
    )),
    ("columns", "", (_w("wd", "Weights", options="wd"), _w("kd", "KV cache", options="kd"))),
    ("columns", "", (
        _w("tp", "TP", help="tensor parallel: GPUs per pipeline stage (past a node's GPUs the group spans "
           "nodes, its collectives over the NICs); GPUs per replica = TP × PP", options="tp"),
        _w("pp", "PP", help="pipeline parallel: GPUs splitting the layers", options="pp"),
        _w("ep", "EP", help="expert parallel (mixture-of-experts models): lays the experts over the TP GPUs a "
           "stage already has; must divide TP; adds no GPUs", options="ep"),
    )),
    ("rows", "", (
        _w("dpa", "DP attention", options="dpa",
           help="attention data-parallel over the TP GPUs: each rank its own sequences and their whole KV "
                "(SGLang --enable-dp-attention, TensorRT-LLM enable_attention_dp); MoE layers all-to-all over EP"),
    )),
    ("rows", "", (
        _w("mode", "Serving mode", options="mode",
           help="colocated: prefill and decode share replicas (chunked prefill); disaggregated: separate pools"),
    )),
    ("subheader", "Workload", (
        _w("prompt", "Prompt tokens (mean)", 100),
        _w("output", "Output tokens (mean)", 50),
        _w("rps", "Requests/s (mean)", 1.0, INPUT_HELP["workload.requests_per_s"]),
        _w("prefix", "Shared prefix tokens", 100, "tokens every prompt shares (a system prompt)",
           phrases=("prefix_tokens",)),
        _w("hit", "Prefix hit rate (0 to 1)", 0.1, "share of requests that find the prefix cached",
           phrases=("prefix_hit_rate",)),
    )),
    ("subheader", "Targets", (
        _w("ttft_ms", "TTFT target, p90 (ms)", 50.0, "time to first token; the plan checks its p90, queueing included"),
        _w("itl_ms", "ITL target (ms)", 5.0, "inter-token latency; the plan checks it at its percentile (p90 unless "
           "the scenario sets slo.itl_percentile) at its batch, prefill chunk stalls included"),
    )),
    ("capacity", "", ()),
    ("expander", "Serving engine", (
        _w("batch", "Batch (0 = largest that fits)", 1, min_value=0),
        _w("ctx", "Context tokens (0 = prompt + output)", 256, min_value=0),
        _w("chunk", "Prefill chunk tokens", 128, "vLLM's max_num_batched_tokens (default 2,048)"),
        _w("util", "Memory utilization (0 = HBM − weights − reserved)", 0.05,
           "vLLM's gpu_memory_utilization (default 0.9)"),
        _w("engine", "Engine", options="engine",
           help="whose memory fraction and scheduler the plan follows: vLLM, SGLang or TensorRT-LLM"),
        _w("recv", "SGLang receive interval (decode passes)", 1, min_value=1,
           help="SGLang --scheduler-recv-interval: new requests are taken in every N decode passes "
                "(1 = every iteration; InferenceX's recipes use 10 and 30); the wait is in the TTFT"),
        _w("adpbal", "TensorRT-LLM attention-DP balance timeout (passes)", 1, min_value=0,
           help="attention_dp_config enable_balance with this timeout_iters (0 = off, the default): with "
                "attention DP, new prompts wait until every rank has one or this many passes; the wait is in "
                "the TTFT (InferenceX's recipes use 60)"),
    )),
)
# Widgets drawn by pages/_capacity.py: only the message words that name them.
CAPACITY_PHRASES: dict[str, tuple[str, ...]] = {
    "peak": ("peak_requests_per_s",), "dist": ("trace", "lognormal"),
}


def _field_widget() -> dict[str, str]:
    """Text in an error message -> the widget to show it beside: every widget's scenario
    field (``LINK_FIELDS``) and message words, the longest (most specific) first, so
    ``parallel.tp`` wins over ``model`` in "the model's 32 attention heads"."""
    pairs = [(f.path, f.key) for f in LINK_FIELDS]
    pairs += [(w, row.key) for _, _, rows in SIDEBAR for row in rows for w in row.phrases]
    pairs += [(w, key) for key, words in CAPACITY_PHRASES.items() for w in words]
    return dict(sorted(pairs, key=lambda pair: -len(pair[0])))


FIELD_WIDGET = _field_widget()
DEFAULT_VALUES = widget_values(DEFAULT)  # each widget's default: the Scenario's, in the widget's unit


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
    held = st.session_state.get(key)
    if held is not None and held not in options:  # a loaded value no option shows (TP 3): kept, offered
        options = [*options, held]
    out = st.selectbox(label, options, index=options.index(default), key=key, persist_state="session", help=help)
    holes[key] = st.empty()
    return out


def _choices(cat: Any) -> dict[str, list[Any]]:
    extra, gpus = imported_models(), inline_gpus()
    return {"gpu": sorted(cat.gpus) + sorted(k for k in gpus if k not in cat.gpus),
            "model": sorted(cat.models) + sorted(k for k in extra if k not in cat.models),
            "wd": DTYPES, "kd": KV_DTYPES, "tp": TPS, "pp": PPS, "ep": EPS, "dpa": DP_ATTENTION, "mode": MODES,
            "dist": DISTRIBUTIONS, "link": LINKS, "smethod": list(SPECULATIVE_METHODS), "engine": ENGINES}


def _banner(gpu: str, model: str) -> None:
    loaded = st.session_state.get(LOADED)
    pinned = st.session_state.get(PINNED)
    if not loaded or not loaded["drift"] or not pinned:
        return
    if pinned["gpu"]["id"] != gpu or pinned["model"]["id"] != model:
        return
    st.warning(f"The catalog changed since {plain(loaded['label'])} was saved; it plans with the entries as saved:  \n"
               + "  \n".join(code(line) for line in loaded["drift"]))
    if st.button("Re-plan on the current catalog", key="replan_current"):
        st.session_state[PINNED] = None
        st.rerun()


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _draw(w: Widget, choices: dict[str, list[Any]], holes: dict[str, Any]) -> None:
    default = DEFAULT_VALUES[w.key] if w.default is None else w.default
    if w.options:
        _select(w.label, choices[w.options], default, w.key, holes, help=w.help)
    elif w.key == "name":
        st.text_input(w.label, value=default, key=w.key, max_chars=200, help=w.help)
        holes[w.key] = st.empty()
    else:
        kw: dict[str, Any] = {} if w.min_value is None else {"min_value": w.min_value}
        if w.key == "rps":
            kw["on_change"] = mean_given
        _num(w.label, w.key, default, w.step, holes, help=w.help, **kw)


def _inline_note(key: str, cat: Any) -> None:
    """Under the GPU and model widgets: say when the choice is an inline spec (from a loaded
    scenario or an import), not a catalog entry, with what it is."""
    value = st.session_state.get(key)
    if key == "gpu" and value in inline_gpus() and value not in cat.gpus:
        g = inline_gpus()[value]
        st.caption(plain(f"inline GPU: {g.get('name') or g['id']}, {human(g['hbm_bytes'], 'bytes')} "
                         "(the loaded scenario's own spec, not the catalog's; it plans and saves as given)"))
    elif key == "model" and value in imported_models() and value not in cat.models:
        m = imported_models()[value]
        where = "the loaded scenario's own spec" if str(value).endswith(INLINE_SUFFIX) else "not from the catalog"
        st.caption(plain(f"inline model: {m.get('name') or m['id']} ({where}; it plans and saves as given)"))


def _widgets(cat: Any, holes: dict[str, Any]) -> None:
    """The scenario's widgets (the ``SIDEBAR`` table); their values are read back from session state by key."""
    choices = _choices(cat)
    with st.sidebar:
        for layout, title, rows in SIDEBAR:
            if layout == "capacity":
                capacity_widgets(_num, _select, holes)
            elif layout == "columns":
                for col, w in zip(st.columns(len(rows)), rows, strict=True):
                    with col:
                        _draw(w, choices, holes)
            elif layout == "expander":
                with st.expander(title):
                    for w in rows:
                        _draw(w, choices, holes)
            else:
                if layout == "header":
                    st.header(title)
                elif layout == "subheader":
                    st.subheader(title)
                for w in rows:
                    _draw(w, choices, holes)
                    if w.key in ("gpu", "model"):
                        _inline_note(w.key, cat)


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
    if gpu in inline_gpus() and gpu not in cat.gpus:  # an inline GPU kept from the loaded scenario
        data["gpu"] = inline_gpus()[gpu]
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
    data = pool_block(data, gpus=sorted(cat.gpus), tps=TPS)  # disaggregated pools' own GPU and TP (pages/_pools.py)
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
        result = cached_plan(scenario)
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    st.sidebar.caption(plain(layout_caption(scenario, result)))
    return result
