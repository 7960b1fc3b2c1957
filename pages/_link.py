"""A link is the state: the address bar always holds the current scenario.

* A fresh session reads its URL once: ``?scenario=<slug>`` (a saved scenario),
  ``?s=<token>`` (a stateless link) and the widget parameters (``?gpu=h200-sxm&rps=50``).
  A value it refuses or a key it does not know is a warning naming it, never ignored.
* Every run writes the URL back from the scenario the sidebar built (a page switch,
  which drops the browser's query string, loses nothing): ``?scenario=<slug>`` while
  a loaded saved scenario is unedited, else the non-default widget values, else (an
  imported model, a trace, inputs without widgets) a ``?s=`` token.
* A loaded saved scenario shows a banner with its name and revision.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from pages._capacity import MEAN_GIVEN
from pages._format import code, plain
from planner import (
    MAX_TOKEN_CHARS,
    PlannerError,
    Scenario,
    link_params,
    parse_link,
    scenario_data,
    scenario_from_dict,
    scenario_from_token,
    share_token,
    widget_values,
)

READ = "_link_read"  # the URL of this session was read
PROBLEMS = "_link_problems"  # sentences about refused link values, shown until the scenario changes
PENDING = "_load_pending"  # (scenario, label, drift, pinned, saved) to apply before the widgets exist
LOADED = "_loaded"  # what was loaded last: label, drift, and for a saved one slug/name/version/json
PINNED = "_pinned"  # saved catalog entries (gpu/model spec, price) a drifted scenario plans with
BASE = "_base"  # the loaded scenario's inputs (those without widgets come from here)
IMPORTED = "imported_models"
INLINE_GPUS = "_inline_gpus"  # option -> GpuSpec JSON: inline GPUs of loaded scenarios, offered beside the catalog's
INLINE_SUFFIX = " (inline)"  # an inline spec whose id is also a catalog id: its own option, never the catalog's
DEFAULT_VALUES = widget_values(Scenario())


def imported_models() -> dict[str, dict[str, Any]]:
    """Models imported this session (id -> ModelSpec JSON)."""
    return st.session_state.setdefault(IMPORTED, {})


def inline_gpus() -> dict[str, dict[str, Any]]:
    """Inline GPU specs of scenarios loaded this session (option -> GpuSpec JSON)."""
    return st.session_state.setdefault(INLINE_GPUS, {})


def _inline_option(spec_id: str, catalog_ids: Any) -> str:
    return spec_id + INLINE_SUFFIX if spec_id in catalog_ids else spec_id


def _keep_inline(scenario: Scenario) -> dict[str, str]:
    """A loaded scenario's inline GPU and model specs, kept as given: each becomes a sidebar
    option of its own (``id``, or ``id (inline)`` when the catalog has that id), so the
    widgets select it instead of a catalog entry.  Returns the widget values that select them."""
    from planner import load_catalog

    cat = load_catalog()
    chosen: dict[str, str] = {}
    if not isinstance(scenario.gpu, str):
        option = _inline_option(scenario.gpu.id, cat.gpus)
        inline_gpus()[option] = scenario.gpu.model_dump(mode="json")
        chosen["gpu"] = option
    if not isinstance(scenario.model, str):  # offered like an imported one
        option = _inline_option(scenario.model.id, cat.models)
        imported_models()[option] = scenario.model.model_dump(mode="json")
        chosen["model"] = option
    return chosen


def request_load(scenario: Scenario, *, label: str, drift: tuple[str, ...] = (),
                 pinned: dict[str, Any] | None = None, saved: dict[str, Any] | None = None) -> None:
    """Make ``scenario`` the sidebar's scenario on the next run (call st.rerun after).
    ``saved`` ({slug, name, version}) marks a saved scenario: the URL keeps its slug until edited."""
    st.session_state[PENDING] = (scenario.model_dump(mode="json"), label, drift, pinned, saved)


def request_stored(stored: Any) -> None:
    """Queue a StoredScenario; when the catalog drifted since it was saved it plans
    with the saved entries until "Re-plan on the current catalog" is pressed."""
    drift = stored.catalog_drift()
    pinned = None
    if drift and stored.frozen_catalog is not None:
        fc = stored.frozen_catalog
        pinned = {"gpu": fc.gpu.model_dump(mode="json"), "model": fc.model.model_dump(mode="json"),
                  "usd_per_gpu_hour": fc.usd_per_gpu_hour}
    scenario = stored.scenario
    if scenario.name != stored.name:  # the name it was saved under is the scenario's name
        scenario = scenario.model_copy(update={"name": stored.name})
    request_load(scenario, label=f"saved scenario {stored.slug!r} (version {stored.version})", drift=drift,
                 pinned=pinned, saved={"slug": stored.slug, "name": stored.name, "version": stored.version})


def _from_url_ref() -> str | None:
    """``?scenario=<slug>`` or ``?s=<token>``: queue that scenario, or say why not."""
    qp = st.query_params
    if "scenario" in qp:
        from pages._store import store_engine
        from planner.store import get_scenario

        slug = qp["scenario"]
        kept: list[str] = []  # store_engine's message, kept for the rerun
        engine = store_engine(on_error=kept.append)
        if engine is None:
            return kept[0] if kept else None
        try:
            stored = get_scenario(engine=engine, ref=slug)
        except PlannerError as exc:
            return f"Share link `?scenario=`: {plain(str(exc))}"
        request_stored(stored)
    elif "s" in qp:
        try:
            request_load(scenario_from_token(qp["s"]), label="shared link")
        except PlannerError as exc:
            return plain(str(exc))  # the message starts "share link: ..."
    return None


def read_link_once(choices: dict[str, list[Any]]) -> None:
    """On a session's first run: queue a linked scenario and set the widgets the
    link names; every refused value or unknown key becomes a warning."""
    if st.session_state.get(READ):
        return
    st.session_state[READ] = True
    error = _from_url_ref()
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    values, problems = parse_link(params, choices)
    # Kept in session state: the session's first run is rerun at once (app.py), and what
    # it drew is gone.
    st.session_state[PROBLEMS] = {"json": None, "problems": problems, "errors": [error] if error else []}
    st.session_state["_link_values"] = values


def apply_pending() -> None:
    """Set the widgets from a queued scenario (a link, a Load button), then from the
    link's own widget parameters (they win: ``?scenario=x&rps=60`` is x at 60 req/s)."""
    from planner import scenario_from_dict as _validate

    pending = st.session_state.pop(PENDING, None)
    if pending is not None:
        data, label, drift, pinned, saved = pending
        scenario = _validate(data)
        for key, value in {**widget_values(scenario), **_keep_inline(scenario)}.items():
            st.session_state[key] = value
        st.session_state[LOADED] = {"label": label, "drift": list(drift), "saved": saved, "json": None}
        st.session_state[PINNED] = pinned
        st.session_state[BASE] = data
        st.session_state[MEAN_GIVEN] = True  # the loaded scenario's mean is given, not the example's
        trace = scenario.workload.trace
        st.session_state["_trace"] = [list(r) for r in trace] if trace else None
    values = st.session_state.pop("_link_values", None)
    if values:
        for key, value in values.items():
            st.session_state[key] = value
        if "rps" in values:
            st.session_state[MEAN_GIVEN] = True
        loaded = st.session_state.get(LOADED)
        if loaded and loaded.get("saved"):
            loaded["json"] = "edited by the link's own parameters"


def show_problems(scenario: Scenario | None) -> None:
    """The link's refused values, as warnings, until the scenario changes."""
    box = st.session_state.get(PROBLEMS)
    if not box or not (box["problems"] or box["errors"]):
        return
    now = scenario.model_dump_json() if scenario is not None else ""
    if box["json"] is None:
        box["json"] = now
    if box["json"] != now:
        box["problems"], box["errors"] = [], []
        return
    for e in box["errors"]:
        st.error(e)
    for p in box["problems"]:
        st.warning(p)


def _saved_link(scenario: Scenario) -> dict[str, str] | None:
    loaded = st.session_state.get(LOADED)
    saved = loaded.get("saved") if loaded else None
    if not saved:
        return None
    now = scenario.model_dump_json()
    if loaded["json"] is None:
        loaded["json"] = now
    return {"scenario": saved["slug"]} if loaded["json"] == now else None


def link_for(scenario: Scenario, values: dict[str, Any]) -> dict[str, str] | None:
    """The query parameters that reopen ``scenario`` in a fresh browser (None: no
    link can hold it, e.g. a trace too long for a token)."""
    saved = _saved_link(scenario)
    if saved is not None:
        return saved
    params = link_params(values, DEFAULT_VALUES)
    try:
        if scenario_from_dict(scenario_data({**DEFAULT_VALUES, **values})) == scenario:
            return params
    except PlannerError:
        pass  # a widget value only this session knows (an imported model): a token carries it
    token = share_token(scenario)
    return {"s": token} if len(token) <= MAX_TOKEN_CHARS else None


def sync_url(scenario: Scenario | None, values: dict[str, Any]) -> dict[str, str] | None:
    """Write the current scenario's link into the address bar (only when it changed)."""
    if scenario is None:
        return None
    wanted = link_for(scenario, values)
    if wanted is None:
        return None
    current = {k: st.query_params.get_all(k)[-1] for k in st.query_params}
    if current != wanted:
        st.query_params.from_dict(wanted)
    return wanted


def unedited_saved(scenario: Scenario) -> str | None:
    """The slug of the saved scenario the sidebar holds, when it is unedited since loaded."""
    loaded = st.session_state.get(LOADED)
    saved = loaded.get("saved") if loaded else None
    if saved and loaded["json"] == scenario.model_dump_json():
        return str(saved["slug"])
    return None


def saved_banner(scenario: Scenario | None) -> None:
    """Which saved scenario is loaded, its revision, and whether it was edited since."""
    loaded = st.session_state.get(LOADED)
    saved = loaded.get("saved") if loaded else None
    if not saved or scenario is None:
        return
    edited = loaded["json"] is not None and loaded["json"] != scenario.model_dump_json()
    text = f"Saved scenario **{plain(saved['name'])}** ({code(saved['slug'])}, version {saved['version']})"
    if edited:
        st.info(text + " · edited since it was loaded: save it on the Scenarios page to keep the change.")
    else:
        st.info(text + " · the link is " + code(f"?scenario={saved['slug']}"))


def copy_link(params: dict[str, str] | None) -> None:
    """The address of this view, with a copy button (st.code's own)."""
    from urllib.parse import urlencode

    if params is None:
        st.caption("This scenario is too large for a link (its trace): save it on the Scenarios page and "
                   "share its `?scenario=` link.")
        return
    base = st.context.url or ""
    st.code(base + ("?" + urlencode(params) if params else ""), language=None, wrap_lines=True)
