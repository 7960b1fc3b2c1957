"""Scenarios: save (a new scenario, or a new revision of an existing one), load,
rename, duplicate, delete, history with field-by-field differences, compare, share,
import/export."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages._format import MISSING, code, plain, shown
from pages._link import LOADED, unedited_saved
from pages._sidebar import cached_plan, cached_sweep, page_plan, page_scenario, request_stored
from pages._store import store_engine
from planner import (
    ConflictError,
    PlannerError,
    csv_text,
    field_text,
    input_differences,
    label_for,
    plan_row,
    review_csv_text,
    revision_changes,
    share_token,
    store,
)
from planner.store import (
    DESCRIPTION_MAX_CHARS,
    IMPORT_MAX_BYTES,
    NAME_MAX_CHARS,
    QUERY_MAX_CHARS,
    TAG_MAX_CHARS,
    TAGS_MAX,
    parse_import_bytes,
)

UPLOAD_NAME_MAX_CHARS = 80  # how much of an uploaded file's name a message repeats

st.title("Scenarios")
scenario = page_scenario()
found_engine = store_engine()
if found_engine is None:
    st.stop()
engine: Engine = found_engine  # narrowed for the store actions' lambdas below


def _do(action: Callable[[], object], done: str | Callable[[Any], str], *, load: bool = False) -> None:
    """Run a store action; on success remember a message (``done``: text, or a function of
    the result) and rerun, else show why.  ``load``: the sidebar takes the saved result."""
    try:
        result = action()
    except ConflictError as exc:
        st.error(f"Not saved: someone else saved this scenario since you loaded it. {plain(str(exc))}. "
                 "Use “Save as a copy” to keep yours beside theirs.")
        return
    except PlannerError as exc:
        st.error(plain(str(exc)))  # an import's message can quote the document
        return
    loaded = (st.session_state.get(LOADED) or {}).get("saved")
    if isinstance(result, store.StoredScenario) and (load or (loaded and loaded["slug"] == result.slug)):
        request_stored(result)  # the sidebar holds this saved scenario at its new version
    st.session_state["sc_flash"] = done(result) if callable(done) else done
    st.rerun()


def _tags(text: str) -> list[str]:
    return [t for t in text.split(",") if t.strip()]


def _match(name: str) -> store.ScenarioSummary | None:
    """The saved scenario this name would overwrite: the one loaded in the sidebar if the
    name is its name, else one with exactly this name (any case)."""
    wanted = name.strip().lower()
    if not wanted:
        return None
    loaded = (st.session_state.get(LOADED) or {}).get("saved")
    hits = store.list_scenarios(engine=engine, query=name.strip()[:QUERY_MAX_CHARS])
    if loaded and loaded["name"].strip().lower() == wanted:
        return next((h for h in hits if h.slug == loaded["slug"]), None)
    return next((h for h in hits if h.name.strip().lower() == wanted), None)


if msg := st.session_state.pop("sc_flash", None):
    st.success(msg)
st.subheader("Save the current scenario")
st.session_state.setdefault("sc_name", scenario.name if scenario.name != "untitled" else "")
name = st.text_input("Name", key="sc_name", max_chars=NAME_MAX_CHARS)
desc = st.text_input("Description", key="sc_desc", max_chars=DESCRIPTION_MAX_CHARS)
tags = st.text_input("Tags (comma-separated)", key="sc_tags", max_chars=TAGS_MAX * (TAG_MAX_CHARS + 1))
named = scenario.model_copy(update={"name": name.strip() or scenario.name})
try:
    existing = _match(name)
except PlannerError as exc:
    st.error(plain(str(exc)))
    existing = None
if existing is None:
    if st.button("Save", key="sc_save", type="primary", disabled=not name.strip()):
        _do(lambda: store.save_scenario(engine=engine, scenario=named, name=name, description=desc, tags=_tags(tags)),
            lambda r: f"Saved '{plain(r.name)}' as {code(r.slug)}, version {r.version}", load=True)
elif unedited_saved(scenario) == existing.slug and existing.name == name.strip() and not (desc or tags):
    st.caption(f"This is {code(existing.slug)} version {existing.version}, unchanged since it was loaded: nothing to save.")
    if st.button("Save as a copy", key="sc_copy"):
        _do(lambda: store.save_scenario(engine=engine, scenario=named, name=name, description=desc, tags=_tags(tags)),
            lambda r: f"Saved a copy as {code(r.slug)}, version {r.version}", load=True)
else:
    loaded = (st.session_state.get(LOADED) or {}).get("saved")
    seen = loaded["version"] if loaded and loaded["slug"] == existing.slug else existing.version
    st.warning(f"A saved scenario is named '{plain(existing.name)}' ({code(existing.slug)}, version {existing.version}). "
               "Update it (a new revision, its history kept) or save a copy?")
    slug_now = existing.slug
    pair = st.columns(2)
    if pair[0].button(f"Update {slug_now} to version {seen + 1}", key="sc_update", type="primary"):
        _do(lambda: store.update_scenario(engine=engine, ref=slug_now, expected_version=seen, scenario=named,
                                          name=name, description=desc or None, tags=_tags(tags) or None,
                                          note="update from the app"),
            lambda r: f"Updated {code(r.slug)} to version {r.version}", load=True)
    if pair[1].button("Save as a copy", key="sc_copy"):
        _do(lambda: store.save_scenario(engine=engine, scenario=named, name=name, description=desc, tags=_tags(tags)),
            lambda r: f"Saved a copy as {code(r.slug)}, version {r.version}", load=True)

plan = page_plan(scenario)
downloads = st.columns(3)
stem = (scenario.name if scenario.name != "untitled" else "plan").replace(" ", "-")[:60]
downloads[0].download_button("Plan CSV (with units)", review_csv_text(plan_row(scenario, plan.to_json_dict())),
                     file_name=f"{stem}.csv", mime="text/csv", key="sc_plan_csv", on_click="ignore")
downloads[1].download_button("Sweep CSV", lambda: csv_text(cached_sweep(scenario)), file_name=f"{stem}-sweep.csv",
                     mime="text/csv", key="sc_sweep_csv", on_click="ignore")
downloads[2].markdown(f"[Stateless share link](./?s={share_token(scenario)})")
st.subheader("Saved scenarios")
query = st.text_input("Search name or slug", key="sc_query", max_chars=QUERY_MAX_CHARS)
try:
    saved = store.list_scenarios(engine=engine, query=query or None)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
st.dataframe(pd.DataFrame([{"slug": s.slug, "name": s.name, "tags": ", ".join(s.tags), "version": s.version,
                            "updated (UTC)": s.updated_at.strftime("%Y-%m-%d %H:%M")} for s in saved]),
             hide_index=True, key="sc_list")
up = st.file_uploader("Import a scenario JSON", type="json", key="sc_import",
                      max_upload_size=max(1, IMPORT_MAX_BYTES // 2**20))
if up is not None and st.button("Import", key="sc_import_go"):
    label = repr(up.name[:UPLOAD_NAME_MAX_CHARS])  # a stranger's file name: plain() where it is shown
    # The upload's bytes, size-capped and parsed here; its scenario is validated as untrusted
    # (a path-shaped model is refused, never opened).
    upload = up.getvalue()
    _do(lambda: store.import_scenario(engine=engine, document=parse_import_bytes(upload, source=label)),
        f"Imported {plain(label)}")
if not saved:
    st.stop()
slug = st.selectbox("Scenario", [s.slug for s in saved], key="sc_pick")
try:
    cur = store.get_scenario(engine=engine, ref=slug)
    export_doc = json.dumps(store.export_scenario(engine=engine, ref=slug), indent=2)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
st.markdown(f"Share: [{code('?scenario=' + cur.slug)}](./?scenario={quote(cur.slug, safe='')}) · "
            f"[stateless link](./?s={share_token(cur.scenario)})")
actions = st.columns(4)
if actions[0].button("Load", key="sc_load", type="primary"):
    request_stored(cur)
    st.rerun()
if actions[1].button("Duplicate", key="sc_dup"):
    _do(lambda: store.duplicate_scenario(engine=engine, ref=slug), f"Duplicated {code(slug)}")
if actions[2].button("Delete", key="sc_del"):
    _do(lambda: store.delete_scenario(engine=engine, ref=slug, expected_version=cur.version), f"Deleted {code(slug)}")
actions[3].download_button("Export JSON", export_doc,
                     file_name=f"{slug}.json", mime="application/json", key="sc_export", on_click="ignore")
new = st.text_input("New name", value=cur.name, key="sc_rename_to")
if st.button("Rename", key="sc_rename"):
    _do(lambda: store.rename_scenario(engine=engine, ref=slug, name=new, expected_version=cur.version),
        f"Renamed to '{plain(new)}'")
with st.expander(f"History ({cur.version} version{'s' if cur.version != 1 else ''})"):
    try:
        revs = store.list_revisions(engine=engine, ref=slug)
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    st.dataframe(pd.DataFrame([{"version": r.version, "name": r.name, "note": r.note,
                                "saved (UTC)": r.created_at.strftime("%Y-%m-%d %H:%M")} for r in revs]),
                 hide_index=True)
    versions = [r.version for r in revs]  # newest first
    by_version = {r.version: r for r in revs}
    if len(versions) > 1:
        c = st.columns(2)
        old_v = c[0].selectbox("From version", versions, index=1, key="sc_diff_from")
        new_v = c[1].selectbox("To version", versions, index=0, key="sc_diff_to")
        changes = revision_changes(by_version[old_v].model_dump(), by_version[new_v].model_dump())
        if changes:
            # st.table renders each cell as Markdown: stored names, descriptions and tags are a stranger's text
            st.table(pd.DataFrame([{"field": ch.label, f"version {old_v}": plain(ch.old), f"version {new_v}": plain(ch.new)}
                                   for ch in changes]))
        else:
            st.caption(f"Versions {old_v} and {new_v} have the same inputs.")
    ver = st.selectbox("Version to restore", versions, key="sc_rev")
    if st.button("Restore this version", key="sc_restore", help="saves it as a new version; nothing is lost"):
        _do(lambda: store.restore_revision(engine=engine, ref=slug, version=ver, expected_version=cur.version),
            lambda r: f"Restored version {ver} of {code(slug)} as version {r.version}")
st.subheader("Compare saved scenarios")
st.caption("For figures side by side (GPUs, $/Mtok, TTFT, ITL, KV headroom) see the Compare page; here every input.")
picked = st.multiselect("Two or more saved scenarios", [s.slug for s in saved], key="sc_compare")
if len(picked) >= 2:
    try:
        loaded_s = [store.get_scenario(engine=engine, ref=p) for p in picked]
        outs = [cached_plan(s.scenario) for s in loaded_s]
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    diff = input_differences([s.scenario for s in loaded_s])
    table = pd.DataFrame([{"input": label_for(r["input"]),
                           **dict(zip(picked, (field_text(r["input"], v) for v in r["values"]), strict=True)),
                           "differs": r["differs"]} for r in diff])
    for label, get, unit in (("GPUs total", lambda p: p.fleet.gpus_total, ""),
                             ("$/Mtok output", lambda p: p.cost.usd_per_mtok_output, "USD"),
                             ("ITL mean", lambda p: p.operating_point.itl_s, "s"),
                             ("TTFT p90 · queueing included", lambda p: p.operating_point.ttft_p90_s, "s")):
        vals = [shown(get(p), unit) if p.operating_point.feasible else MISSING for p in outs]
        table.loc[len(table)] = {"input": f"→ {label}", **dict(zip(picked, vals, strict=True)), "differs": len(set(vals)) > 1}
    reasons = [p.operating_point.reason if not p.operating_point.feasible else "" for p in outs]
    if any(reasons):
        table.loc[len(table)] = {"input": f"→ why {MISSING}", **dict(zip(picked, reasons, strict=True)),
                                 "differs": len(set(reasons)) > 1}
    st.dataframe(table.style.apply(lambda r: ["background-color: #fff3b0" if r["differs"] else ""] * len(r), axis=1),
                 hide_index=True, key="sc_diff")
