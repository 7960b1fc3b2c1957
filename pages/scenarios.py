"""Scenarios: save, load, rename, duplicate, delete, history, compare, share, import/export."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from pages._format import MISSING, plain, shown
from pages._sidebar import cached_plan, cached_sweep, page_plan, page_scenario, request_stored
from pages._store import store_engine
from planner import PlannerError, csv_text, input_differences, plan_row, share_token, store
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
engine = store_engine()
if engine is None:
    st.stop()


def _do(action, done: str) -> None:  # type: ignore[no-untyped-def]
    try:
        action()
        st.session_state["sc_flash"] = done
        st.rerun()
    except PlannerError as exc:
        st.error(plain(str(exc)))  # an import's message can quote the document


if msg := st.session_state.pop("sc_flash", None):
    st.success(msg)
with st.form("sc_save"):
    st.subheader("Save the current scenario")
    name = st.text_input("Name", key="sc_name", max_chars=NAME_MAX_CHARS)
    desc = st.text_input("Description", key="sc_desc", max_chars=DESCRIPTION_MAX_CHARS)
    tags = st.text_input("Tags (comma-separated)", key="sc_tags", max_chars=TAGS_MAX * (TAG_MAX_CHARS + 1))
    if st.form_submit_button("Save"):
        _do(lambda: store.save_scenario(engine=engine, scenario=scenario, name=name, description=desc,
                                        tags=[t for t in tags.split(",") if t.strip()]), f"Saved {name!r}")
plan = page_plan(scenario)
c = st.columns(3)
c[0].download_button("Plan CSV", csv_text([plan_row(scenario, plan.to_json_dict())]), file_name="plan.csv",
                     mime="text/csv", key="sc_plan_csv", on_click="ignore")
c[1].download_button("Sweep CSV", lambda: csv_text(cached_sweep(scenario)), file_name="sweep.csv", mime="text/csv",
                     key="sc_sweep_csv", on_click="ignore")
c[2].markdown(f"[Stateless share link](./?s={share_token(scenario)})")
st.subheader("Saved scenarios")
query = st.text_input("Search name or slug", key="sc_query", max_chars=QUERY_MAX_CHARS)
try:
    saved = store.list_scenarios(engine=engine, query=query or None)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
st.dataframe(pd.DataFrame([{"slug": s.slug, "name": s.name, "tags": ", ".join(s.tags), "version": s.version,
                            "updated": s.updated_at} for s in saved]), hide_index=True, key="sc_list")
up = st.file_uploader("Import a scenario JSON", type="json", key="sc_import",
                      max_upload_size=max(1, IMPORT_MAX_BYTES // 2**20))
if up is not None and st.button("Import", key="sc_import_go"):
    label = repr(up.name[:UPLOAD_NAME_MAX_CHARS])
    # The upload's bytes, size-capped and parsed here; its scenario is validated as untrusted
    # (a path-shaped model is refused, never opened).
    _do(lambda: store.import_scenario(engine=engine, document=parse_import_bytes(up.getvalue(), source=label)),
        f"Imported {label}")
if not saved:
    st.stop()
slug = st.selectbox("Scenario", [s.slug for s in saved], key="sc_pick")
try:
    cur = store.get_scenario(engine=engine, ref=slug)
    export_doc = json.dumps(store.export_scenario(engine=engine, ref=slug), indent=2)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
st.markdown(f"Share: [`?scenario={cur.slug}`](./?scenario={cur.slug}) · "
            f"[stateless link](./?s={share_token(cur.scenario)})")
c = st.columns(4)
if c[0].button("Load", key="sc_load", type="primary"):
    request_stored(cur)
    st.rerun()
if c[1].button("Duplicate", key="sc_dup"):
    _do(lambda: store.duplicate_scenario(engine=engine, ref=slug), f"Duplicated {slug}")
if c[2].button("Delete", key="sc_del"):
    _do(lambda: store.delete_scenario(engine=engine, ref=slug, expected_version=cur.version), f"Deleted {slug}")
c[3].download_button("Export JSON", export_doc,
                     file_name=f"{slug}.json", mime="application/json", key="sc_export", on_click="ignore")
new = st.text_input("New name", value=cur.name, key="sc_rename_to")
if st.button("Rename", key="sc_rename"):
    _do(lambda: store.rename_scenario(engine=engine, ref=slug, name=new, expected_version=cur.version),
        f"Renamed to {new!r}")
with st.expander(f"History ({cur.version} versions)"):
    try:
        revs = store.list_revisions(engine=engine, ref=slug)
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    st.dataframe(pd.DataFrame([{"version": r.version, "name": r.name, "note": r.note, "saved": r.created_at}
                               for r in revs]), hide_index=True)
    ver = st.selectbox("Version", [r.version for r in revs], key="sc_rev")
    if st.button("Restore this version", key="sc_restore"):
        _do(lambda: store.restore_revision(engine=engine, ref=slug, version=ver, expected_version=cur.version),
            f"Restored version {ver} of {slug}")
st.subheader("Compare")
picked = st.multiselect("Two or more saved scenarios", [s.slug for s in saved], key="sc_compare")
if len(picked) >= 2:
    try:
        loaded = [store.get_scenario(engine=engine, ref=p) for p in picked]
        outs = [cached_plan(s.scenario) for s in loaded]
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    diff = input_differences([s.scenario for s in loaded])
    table = pd.DataFrame([{"input": r["input"], **dict(zip(picked, map(str, r["values"]), strict=True)),
                           "differs": r["differs"]} for r in diff])
    for label, get in (("GPUs total", lambda p: p.fleet.gpus_total), ("$/Mtok output", lambda p: p.cost.usd_per_mtok_output),
                       ("ITL (s)", lambda p: p.operating_point.itl_s), ("TTFT (s)", lambda p: p.ttft_s)):
        vals = [shown(get(p), fmt=".4g") for p in outs]
        table.loc[len(table)] = {"input": f"→ {label}", **dict(zip(picked, vals, strict=True)), "differs": len(set(vals)) > 1}
    reasons = [p.operating_point.reason if not p.operating_point.feasible else "" for p in outs]
    if any(reasons):
        table.loc[len(table)] = {"input": f"→ why {MISSING}", **dict(zip(picked, reasons, strict=True)),
                                 "differs": len(set(reasons)) > 1}
    st.dataframe(table.style.apply(lambda r: ["background-color: #fff3b0" if r["differs"] else ""] * len(r), axis=1),
                 hide_index=True, key="sc_diff")
