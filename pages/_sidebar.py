"""The shared scenario sidebar: every page reads the same widgets.

Widgets are bound to the URL's query params, so the address bar always
reproduces the view and a page switch or reload loses nothing.
"""

from __future__ import annotations

import streamlit as st

from planner import PlannerError, Scenario, load_catalog, scenario_from_dict

DTYPES = ["bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"]


def sidebar_scenario() -> Scenario | None:
    """Build the Scenario from the sidebar; show a message and return None if invalid."""
    cat = load_catalog()
    with st.sidebar:
        st.header("Scenario")
        gpu = st.selectbox("GPU", sorted(cat.gpus), index=sorted(cat.gpus).index("h100-sxm"), key="gpu",
                           bind="query-params")
        model = st.selectbox("Model", sorted(cat.models), index=sorted(cat.models).index("llama-3.1-8b"),
                             key="model", bind="query-params")
        wd = st.selectbox("Weights dtype", DTYPES, key="wd", bind="query-params")
        kd = st.selectbox("KV dtype", ["bf16", "fp16", "fp8"], key="kd", bind="query-params")
        tp = st.selectbox("Tensor parallel (TP)", [1, 2, 4, 8], key="tp", bind="query-params")
        batch = st.number_input("Batch size (0 = largest that fits)", min_value=0, max_value=65536, value=0,
                                step=1, key="batch", bind="query-params")
        ctx = st.number_input("Context tokens (0 = prompt + output)", min_value=0, max_value=10_000_000, value=0,
                              step=256, key="ctx", bind="query-params")
        prompt = st.number_input("Prompt tokens", min_value=1, value=2000, step=100, key="prompt",
                                 bind="query-params")
        output = st.number_input("Output tokens", min_value=1, value=250, step=50, key="output",
                                 bind="query-params")
    data = {
        "gpu": gpu, "model": model, "weights_dtype": wd, "kv_dtype": kd, "parallel": {"tp": int(tp)},
        "workload": {"prompt_tokens": int(prompt), "output_tokens": int(output)},
        "serving": {"batch_size": int(batch) or None, "context_tokens": int(ctx) or None},
    }
    try:
        return scenario_from_dict(data)
    except PlannerError as exc:
        st.sidebar.error(str(exc))
        st.error(f"The scenario is not valid: {exc}")
        return None
