"""The Plan page's Deploy section (issue 27): pick a target, see the files that run the
plan (engine commands or Kubernetes manifests, each headed by the scenario, its revision
and the plan's headline numbers) and download them; the review report lists the chosen
target's commands.  The files are built by ``planner.deploy`` (no formula here)."""

from __future__ import annotations

import streamlit as st

from pages._link import LOADED
from planner import PlannerError, Scenario
from planner.deploy import TARGETS, deploy

__all__ = ["DEPLOY_TARGET_KEY", "deploy_section", "scenario_revision"]

DEPLOY_TARGET_KEY = "deploy_target"
_LABELS = {"vllm": "vLLM (vllm serve)", "sglang": "SGLang (sglang.launch_server)",
           "trtllm": "TensorRT-LLM (trtllm-serve + YAML)", "kserve": "KServe InferenceService",
           "llm-d": "llm-d Helm values", "dynamo": "Dynamo DynamoGraphDeployment"}


def scenario_revision(scenario: Scenario) -> str:
    """The saved scenario's slug and version when the sidebar holds it unedited, else "unsaved"."""
    loaded = st.session_state.get(LOADED)
    saved = loaded.get("saved") if loaded else None
    if saved and loaded.get("json") == scenario.model_dump_json():
        return f"{saved['slug']} version {saved['version']}"
    return "unsaved"


@st.cache_data(max_entries=64, show_spinner=False)
def _files(scenario_json: str, target: str, revision: str, weights: str) -> tuple[list[tuple[str, str, str]], str]:
    """The target's files as (name, text, language), or the one line saying why it cannot express the plan."""
    try:
        d = deploy(Scenario.model_validate_json(scenario_json), target, revision=revision, weights=weights or None)
    except PlannerError as exc:
        return [], str(exc)
    return [(f.name, f.text, f.language) for f in d.files], ""


def deploy_section(scenario: Scenario) -> str:
    """The Deploy section; returns the chosen target (for the review report)."""
    st.subheader("Deploy")
    st.caption("The engine command or Kubernetes manifests that run this plan as reviewed; every flag is one "
               "the engine's own source defines (planner/deploy/flags.py), every object checked against its "
               "schema. `python -m planner deploy --target ...` writes the same files.")
    cols = st.columns([2, 3])
    target = cols[0].selectbox("Target", TARGETS, format_func=lambda t: _LABELS[t], key=DEPLOY_TARGET_KEY)
    weights = cols[1].text_input("Pre-quantized checkpoint (optional)", key="deploy_weights", max_chars=300,
                                 help="a repository or path to load instead of the catalog model's, e.g. an FP8 "
                                      "checkpoint for TensorRT-LLM")
    files, why = _files(scenario.model_dump_json(), target, scenario_revision(scenario), weights.strip())
    if why:
        st.error(why)
        return target
    row = st.container(horizontal=True)
    for name, text, _ in files:
        row.download_button(name, data=text, file_name=name, mime="text/x-shellscript" if name.endswith(".sh")
                            else "application/yaml", key=f"deploy_dl_{name}", on_click="ignore",
                            icon=":material/download:")
    for name, text, language in files:
        st.markdown(f"**{name}**")
        st.code(text, language=language)
    return target
