"""The shared scenario sidebar: every page reads the same widgets.

Widgets are bound to the URL's query params, so the address bar always
reproduces the view and a page switch or reload loses nothing.  A model
imported on the Catalog page lives in ``st.session_state["imported_models"]``
and is offered here beside the catalog's.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from pages._format import plain
from pages._nav import VIA_APP, app_pages
from planner import Plan, PlannerError, Scenario, load_catalog, plan, scenario_from_dict
from planner import views as _curves

DTYPES = ["bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"]
KV_DTYPES = ["bf16", "fp16", "fp8"]
IMPORTED = "imported_models"
SCENARIO_KEY = "_scenario"
MODES = ["colocated", "disaggregated"]
DEFAULT = Scenario()  # widget defaults are the Scenario's own defaults
PENDING = "_load_pending"  # (scenario, label, drift, pinned) to apply before the widgets exist
LOADED = "_loaded"  # {"label", "drift"} of the scenario last loaded (for the drift banner)
PINNED = "_pinned"  # saved catalog entries (gpu/model spec, price) a drifted scenario plans with

# A number's text in a link: 17 significant digits, a sign, a point and an exponent fit in 32;
# anything longer is not a number a person typed.
QUERY_NUMBER_MAX_CHARS = 32
# JavaScript's Number.MAX_SAFE_INTEGER: the browser's number input holds no larger whole number.
WIDGET_INT_MAX = 2**53 - 1
QUERY_ECHO_MAX_CHARS = 40  # how much of a rejected link value a message repeats

# Scenario field named in an error message -> the widget that sets it (most specific first).
FIELD_WIDGET = {
    "serving.mode": "mode",
    "workload.prefix_hit_rate": "hit", "prefix_hit_rate": "hit", "workload.prefix_tokens": "prefix",
    "prefix_tokens": "prefix", "workload.prompt_tokens": "prompt", "workload.output_tokens": "output",
    "workload.requests_per_s": "rps", "slo.ttft_s": "ttft_ms", "slo.itl_s": "itl_ms",
    "serving.batch_size": "batch", "serving.context_tokens": "ctx", "serving.chunk_tokens": "chunk",
    "serving.memory_utilization": "util", "cost.usd_per_gpu_hour": "price", "parallel.tp": "tp",
    "parallel.pp": "pp", "parallel.ep": "ep", "weights_dtype": "wd", "kv_dtype": "kd", "gpu": "gpu",
    "model": "model",
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


def imported_models() -> dict[str, dict[str, Any]]:
    """Models imported this session (id -> ModelSpec JSON)."""
    return st.session_state.setdefault(IMPORTED, {})


def _echo(raw: str) -> str:
    """A rejected link value for a message: shortened, inside a code span (no markdown, no links)."""
    text = raw if len(raw) <= QUERY_ECHO_MAX_CHARS else raw[:QUERY_ECHO_MAX_CHARS] + "…"
    return "`" + text.replace("`", "'") + "`"


def _link_value(key: str) -> str | None:
    """The link's (last) value for ``key``, None when absent."""
    values = st.query_params.get_all(key)
    return values[-1] if values else None


def _drop_link_value(key: str, why: str) -> None:
    """Refuse a link parameter before its widget reads it: one warning naming it,
    and the widget starts from its default."""
    st.warning(f"Link parameter `{key}`: {why}; the default is used instead.")
    with contextlib.suppress(KeyError, StreamlitAPIException):
        del st.query_params[key]
    # Streamlit seeds a bound widget from the URL as first loaded, not from st.query_params:
    # forget the value there too, or the widget reads it anyway (an int widget given
    # 1e400 raises OverflowError inside Streamlit).
    from streamlit.runtime.state.session_state_proxy import get_session_state

    with get_session_state().query_params() as qp:
        initial = getattr(qp, "_initial_query_params", None)
        if isinstance(initial, dict):
            initial.pop(key, None)


def _check_number_link(key: str, *, integer: bool, low: float | None = None) -> None:
    raw = _link_value(key)
    if not raw:
        return
    if len(raw) > QUERY_NUMBER_MAX_CHARS:
        _drop_link_value(key, f"{len(raw):,} characters is not a number (at most {QUERY_NUMBER_MAX_CHARS})")
        return
    try:
        x = float(raw)
    except ValueError:
        _drop_link_value(key, f"{_echo(raw)} is not a number")
        return
    if not math.isfinite(x):
        _drop_link_value(key, f"{_echo(raw)} is not a finite number")
    elif integer and (not x.is_integer() or abs(x) > WIDGET_INT_MAX):
        _drop_link_value(key, f"{_echo(raw)} is not a whole number up to {WIDGET_INT_MAX:,}")
    elif low is not None and x < low:
        _drop_link_value(key, f"{_echo(raw)} is below the minimum {low:g}")


def _check_choice_link(key: str, options: list[Any]) -> None:
    raw = _link_value(key)
    if raw and raw not in {str(o) for o in options}:
        _drop_link_value(key, f"{_echo(raw)} is not one of the choices")


def _num(label: str, key: str, value: float | int | None, step: float | int, holes: dict[str, Any],
         help: str | None = None, **kw: Any) -> Any:
    _check_number_link(key, integer=isinstance(value, int) and isinstance(step, int), low=kw.get("min_value"))
    out = st.number_input(label, value=value, step=step, key=key, bind="query-params", persist_state="session",
                          help=help, **kw)
    holes[key] = st.empty()
    return out


def _select(label: str, options: list[Any], default: Any, key: str, holes: dict[str, Any]) -> Any:
    _check_choice_link(key, options)
    out = st.selectbox(label, options, index=options.index(default), key=key, bind="query-params",
                       persist_state="session")
    holes[key] = st.empty()
    return out


def widget_values(scenario: Scenario) -> dict[str, Any]:
    """The sidebar widget values (by key) that reproduce ``scenario``'s inputs."""
    w, sv = scenario.workload, scenario.serving
    return {
        "gpu": scenario.gpu if isinstance(scenario.gpu, str) else scenario.gpu.id,
        "model": scenario.model if isinstance(scenario.model, str) else scenario.model.id,
        "wd": scenario.weights_dtype, "kd": scenario.kv_dtype, "tp": scenario.parallel.tp,
        "pp": scenario.parallel.pp, "ep": scenario.parallel.ep, "mode": sv.mode,
        "prompt": w.prompt_tokens, "output": w.output_tokens, "rps": float(w.requests_per_s),
        "prefix": w.prefix_tokens, "hit": float(w.prefix_hit_rate), "ttft_ms": scenario.slo.ttft_s * 1e3,
        "itl_ms": scenario.slo.itl_s * 1e3, "batch": sv.batch_size or 0, "ctx": sv.context_tokens or 0,
        "chunk": sv.chunk_tokens, "util": float(sv.memory_utilization or 0.0),
        "price": scenario.cost.usd_per_gpu_hour,
    }


def request_load(scenario: Scenario, *, label: str, drift: tuple[str, ...] = (),
                 pinned: dict[str, Any] | None = None) -> None:
    """Make ``scenario`` the sidebar's scenario on the next run (call st.rerun after)."""
    st.session_state[PENDING] = (scenario.model_dump(mode="json"), label, drift, pinned)


def request_stored(stored: Any) -> None:
    """Queue a StoredScenario; when the catalog drifted since it was saved it plans
    with the saved entries until "Re-plan on the current catalog" is pressed."""
    drift = stored.catalog_drift()
    pinned = None
    if drift and stored.frozen_catalog is not None:
        fc = stored.frozen_catalog
        pinned = {"gpu": fc.gpu.model_dump(mode="json"), "model": fc.model.model_dump(mode="json"),
                  "usd_per_gpu_hour": fc.usd_per_gpu_hour}
    request_load(stored.scenario, label=f"saved scenario {stored.slug!r} (version {stored.version})",
                 drift=drift, pinned=pinned)


def _from_url() -> None:
    """``?scenario=<slug>`` or ``?s=<token>``: queue that scenario (once) or show why not."""
    qp = st.query_params
    if "scenario" in qp:
        from pages._store import store_engine
        from planner.store import get_scenario

        slug = qp["scenario"]
        del qp["scenario"]
        engine = store_engine()
        if engine is None:
            return
        try:
            stored = get_scenario(engine=engine, ref=slug)
        except PlannerError as exc:
            st.error(f"Share link `?scenario=`: {plain(str(exc))}")
            return
        request_stored(stored)
    elif "s" in qp:
        from planner import scenario_from_token

        token = qp["s"]
        del qp["s"]
        try:
            request_load(scenario_from_token(token), label="shared link")
        except PlannerError as exc:
            st.error(plain(str(exc)))  # the message starts "share link: ..."


def _apply_pending() -> None:
    pending = st.session_state.pop(PENDING, None)
    if pending is None:
        return
    data, label, drift, pinned = pending
    scenario = scenario_from_dict(data)
    if not isinstance(scenario.model, str):  # an inline model: offer it like an imported one
        imported_models()[scenario.model.id] = scenario.model.model_dump(mode="json")
    for key, value in widget_values(scenario).items():
        st.session_state[key] = value
    st.session_state[LOADED] = {"label": label, "drift": list(drift)}
    st.session_state[PINNED] = pinned
    st.session_state["_base"] = data


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


def sidebar_scenario() -> Scenario | None:
    """Build the Scenario from the sidebar; show a message next to the offending
    widget (and on the page) and return None if it is invalid."""
    _from_url()
    _apply_pending()
    cat = load_catalog()
    holes: dict[str, Any] = {}
    extra = imported_models()
    if "model_pending" in st.session_state:  # a model just imported on the Catalog page
        st.session_state["model"] = st.session_state.pop("model_pending")
    with st.sidebar:
        st.header("Scenario")
        gpu = _select("GPU", sorted(cat.gpus), DEFAULT.gpu, "gpu", holes)
        model = _select("Model", sorted(cat.models) + sorted(k for k in extra if k not in cat.models),
                        DEFAULT.model, "model", holes)
        c1, c2 = st.columns(2)
        with c1:
            wd = _select("Weights", DTYPES, DEFAULT.weights_dtype, "wd", holes)
        with c2:
            kd = _select("KV cache", KV_DTYPES, DEFAULT.kv_dtype, "kd", holes)
        c1, c2, c3 = st.columns(3)
        with c1:
            tp = _select("TP", [1, 2, 4, 8, 16], 1, "tp", holes)
        with c2:
            pp = _select("PP", [1, 2, 4, 8], 1, "pp", holes)
        with c3:
            ep = _select("EP", [1, 2, 4, 8, 16, 32, 64], 1, "ep", holes)
        mode = _select("Serving mode", MODES, DEFAULT.serving.mode, "mode", holes)
        st.subheader("Workload")
        prompt = _num("Prompt tokens", "prompt", DEFAULT.workload.prompt_tokens, 100, holes)
        output = _num("Output tokens", "output", DEFAULT.workload.output_tokens, 50, holes)
        rps = _num("Requests/s", "rps", DEFAULT.workload.requests_per_s, 1.0, holes)
        prefix = _num("Shared prefix tokens", "prefix", 0, 100, holes)
        hit = _num("Prefix hit rate", "hit", 0.0, 0.1, holes, help="0 to 1")
        st.subheader("Targets")
        ttft_ms = _num("TTFT target (ms)", "ttft_ms", DEFAULT.slo.ttft_s * 1e3, 50.0, holes)
        itl_ms = _num("ITL target (ms)", "itl_ms", DEFAULT.slo.itl_s * 1e3, 5.0, holes)
        st.subheader("Serving")
        batch = _num("Batch (0 = largest that fits)", "batch", 0, 1, holes, min_value=0)
        ctx = _num("Context tokens (0 = prompt + output)", "ctx", 0, 256, holes, min_value=0)
        chunk = _num("Prefill chunk tokens", "chunk", DEFAULT.serving.chunk_tokens, 128, holes)
        util = _num("Memory utilization (0 = HBM − weights − reserved)", "util", DEFAULT.serving.memory_utilization, 0.05, holes)
        price = _num("Price override ($/GPU-hour, empty = catalog)", "price", None, 0.1, holes)
    model_value: Any = extra[model] if model in extra and model not in cat.models else model
    data = {
        "gpu": gpu, "model": model_value, "weights_dtype": wd, "kv_dtype": kd,
        "parallel": {"tp": int(tp), "pp": int(pp), "ep": int(ep)},
        "workload": {"prompt_tokens": prompt, "output_tokens": output, "requests_per_s": rps,
                     "prefix_tokens": prefix, "prefix_hit_rate": hit},
        "slo": {"ttft_s": ttft_ms / 1e3 if ttft_ms is not None else None,
                "itl_s": itl_ms / 1e3 if itl_ms is not None else None},
        "serving": {"batch_size": int(batch) or None if batch is not None else None,
                    "context_tokens": int(ctx) or None if ctx is not None else None,
                    "chunk_tokens": chunk, "memory_utilization": util or None},
        "cost": {"usd_per_gpu_hour": price},
    }
    data["serving"]["mode"] = mode
    base = st.session_state.get("_base")
    if base:  # inputs the sidebar has no widget for (speculative, fleet, efficiency ...) come from the loaded one
        data = _merge({k: v for k, v in base.items() if k not in ("gpu", "model")}, data)
    pinned = st.session_state.get(PINNED)
    if pinned and pinned["gpu"]["id"] == gpu and pinned["model"]["id"] == model:
        data["gpu"], data["model"] = pinned["gpu"], pinned["model"]
        if price is None:
            data["cost"]["usd_per_gpu_hour"] = pinned["usd_per_gpu_hour"]
    _banner(gpu, model)
    try:
        return scenario_from_dict(data)
    except PlannerError as exc:
        msg = str(exc)
        key = next((w for field, w in FIELD_WIDGET.items() if field in msg), None)
        (holes[key] if key else st.sidebar).error(msg)
        st.error(f"The scenario is not valid: {msg}")
        return None


def frame() -> None:
    """What ``app.py`` draws around every page: the page config and the sidebar's scenario.
    Whatever the core raises (PlannerError: a bad input, an unusable store) is one message."""
    st.set_page_config(page_title="Ridgeline", layout="wide")
    st.session_state[VIA_APP] = True
    try:
        st.session_state[SCENARIO_KEY] = sidebar_scenario()
    except PlannerError as exc:
        st.session_state[SCENARIO_KEY] = None
        st.error(plain(str(exc)))


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
