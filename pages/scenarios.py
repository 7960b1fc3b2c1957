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
from pages._store import load_revision, load_stored, store_engine
from planner import (
    COMPARE_MAX,
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
    LIST_MAX,
    LIST_PAGE_SIZE,
    NAME_MAX_CHARS,
    QUERY_MAX_CHARS,
    TAG_MAX_CHARS,
    TAGS_MAX,
    check_tags,
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
    hits = store.list_scenarios(engine=engine, query=name.strip()[:QUERY_MAX_CHARS], limit=LIST_MAX)
    if loaded and loaded["name"].strip().lower() == wanted:
        return next((h for h in hits if h.slug == loaded["slug"]), None)
    return next((h for h in hits if h.name.strip().lower() == wanted), None)


def _nothing_new(existing: store.ScenarioSummary, desc: str, tags: str) -> bool:
    """The description and tags fields add nothing to ``existing`` (empty keeps its own, as Update
    does): right after a save they still hold what was saved, which is no change."""
    if desc and desc != existing.description:
        return False
    if not _tags(tags):
        return True
    try:
        return check_tags(_tags(tags)) == list(existing.tags)
    except PlannerError:
        return False  # Update says why


def _first_page() -> None:
    st.session_state["sc_page"] = 1


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
elif unedited_saved(scenario) == existing.slug and existing.name == name.strip() and _nothing_new(existing, desc, tags):
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
query = st.text_input("Search name or slug", key="sc_query", max_chars=QUERY_MAX_CHARS, on_change=_first_page)
wanted_page = int(st.session_state.get("sc_page") or 1)
try:  # one page of summaries: no payload is read until a scenario is picked below
    listing = store.scenario_page(engine=engine, query=query or None, page=wanted_page, page_size=LIST_PAGE_SIZE)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
if listing.page != wanted_page or "sc_page" not in st.session_state:
    st.session_state["sc_page"] = listing.page  # past the end (rows deleted): the last page
saved = list(listing.items)
st.dataframe(pd.DataFrame([{"slug": s.slug, "name": s.name, "tags": ", ".join(s.tags), "version": s.version,
                            "size (kB)": round(s.stored_bytes / 1e3, 1),
                            "updated (UTC)": s.updated_at.strftime("%Y-%m-%d %H:%M")} for s in saved]),
             hide_index=True, key="sc_list")
if listing.pages > 1:
    st.number_input(f"Page (1 to {listing.pages})", min_value=1, max_value=listing.pages, step=1, key="sc_page")
st.caption(f"{listing.total:,} saved{' matching the search' if query else ''} · page {listing.page} of "
           f"{listing.pages}, {listing.page_size} a page")
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
    cur = load_stored(engine, slug)  # its payload read once, then reused while its version stands
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
actions[3].download_button("Export JSON", lambda: json.dumps(store.export_document(cur), indent=2),
                     file_name=f"{slug}.json", mime="application/json", key="sc_export", on_click="ignore")
new = st.text_input("New name", value=cur.name, key="sc_rename_to")
if st.button("Rename", key="sc_rename"):
    _do(lambda: store.rename_scenario(engine=engine, ref=slug, name=new, expected_version=cur.version),
        f"Renamed to '{plain(new)}'")
with st.expander(f"History ({cur.version} version{'s' if cur.version != 1 else ''})"):
    try:
        revs = store.list_revision_summaries(engine=engine, ref=slug)  # no payloads: two are read to diff
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    st.dataframe(pd.DataFrame([{"version": r.version, "name": r.name, "note": r.note,
                                "saved (UTC)": r.created_at.strftime("%Y-%m-%d %H:%M")} for r in revs]),
                 hide_index=True)
    versions = [r.version for r in revs]  # newest first
    if len(versions) > 1:
        c = st.columns(2)
        old_v = c[0].selectbox("From version", versions, index=1, key="sc_diff_from")
        new_v = c[1].selectbox("To version", versions, index=0, key="sc_diff_to")
        old_r, new_r = (load_revision(engine, owner=cur, version=v) for v in (old_v, new_v))
        changes = revision_changes(old_r.model_dump(), new_r.model_dump())
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
page_slugs = [s.slug for s in saved]  # this page's, and those picked on other pages
picked = st.multiselect(f"Two to {COMPARE_MAX} saved scenarios (from any page of the list)",
                        page_slugs + [p for p in st.session_state.get("sc_compare", []) if p not in page_slugs],
                        key="sc_compare", max_selections=COMPARE_MAX)
if len(picked) >= 2:
    try:
        loaded_s = [load_stored(engine, p) for p in picked]
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
