"""Catalog: the GPUs and models the planner knows, with their sources; import a
model from a Hugging Face config.json and use it at once."""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from pages._format import plain, shown, web_url
from pages._sidebar import imported_models, page_scenario
from planner import ModelSpec, PlannerError, load_catalog, param_counts, sig3
from planner.store import parse_json_bytes

log = logging.getLogger(__name__)
# Real config.json files are 1-50 KB; 1 MiB is ample and is read, decoded and parsed at once.
HF_CONFIG_MAX_BYTES = 1_048_576
HF_CONFIG_MAX_DEPTH = 16  # config.json nests 3-4 levels (quantization_config, rope_scaling)
HF_ID_MAX_CHARS = 120  # a model id, as long as a slug


def _import() -> None:
    """Button callback: parse the pasted or uploaded config (its bytes, never a
    path), store it, select it; any failure is one message."""
    upload = st.session_state.get("hf_file")
    data = upload.getvalue() if upload is not None else str(st.session_state.get("hf_text", "")).encode()
    try:
        cfg = parse_json_bytes(data, label="config.json", max_bytes=HF_CONFIG_MAX_BYTES, max_depth=HF_CONFIG_MAX_DEPTH)
        spec = ModelSpec.from_hf_config(cfg, id=st.session_state.get("hf_id") or None)
    except PlannerError as exc:
        st.session_state["hf_error"] = plain(str(exc))  # it can quote the config's values
        return
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:  # a shape the importer misreads
        log.warning("config.json import failed: %r", exc)
        st.session_state["hf_error"] = f"config.json: not a config this importer understands ({type(exc).__name__})"
        return
    imported_models()[spec.id] = spec.model_dump(mode="json")
    st.session_state["model_pending"] = spec.id
    st.session_state["hf_error"] = None
    st.session_state["hf_done"] = spec.id


st.title("Catalog")
scenario = page_scenario()
cat = load_catalog()
current = scenario.model if isinstance(scenario.model, str) else scenario.model.id
st.caption(f"Sidebar scenario: {current} on {scenario.gpu if isinstance(scenario.gpu, str) else scenario.gpu.id}")
gpus, models, imp = st.tabs(["GPUs", "Models", "Import a model"])
with gpus:
    st.dataframe(pd.DataFrame([{
        # One unit per column: GB, TB/s, dense TFLOP/s.
        "id": g.id, "name": g.name, "architecture": g.architecture or "not stated", "HBM (GB, datasheet)": round(g.hbm_bytes / 1e9),
        "HBM (GB, CUDA-visible)": f"{g.cuda_visible_hbm_bytes / 1e9:,.1f}" if g.cuda_visible_hbm_bytes else "not recorded", "bandwidth (TB/s)": round(g.hbm_bytes_per_s / 1e12, 2),
        "BF16 dense (TFLOP/s)": round(g.flops_per_s.bf16 / 1e12),
        "FP8 dense (TFLOP/s)": f"{round(g.flops_per_s.fp8 / 1e12):,}" if g.flops_per_s.fp8 else "no FP8",
        "NVLink domain (GPUs)": g.scaleup_domain_gpus, "$/GPU-hour (catalog default)": shown(g.usd_per_gpu_hour, "USD"),
        "source": g.source_url, "note": g.source_note} for g in cat.gpus.values()]),
        hide_index=True, width="stretch", column_config={"source": st.column_config.LinkColumn()})
with models:
    rows = []
    for m in [*cat.models.values(), *(ModelSpec.model_validate(v) for v in imported_models().values())]:
        pc = param_counts(m)
        rows.append({"id": m.id, "name": m.name, "parameters": f"{sig3(pc.total / 1e9)} B",
                     "active parameters": f"{sig3(pc.active / 1e9)} B",
                     "layers": m.layers, "heads": m.heads, "KV heads": m.kv_heads, "head dim": m.head_dim,
                     "attention": m.attention_kind,
                     "experts": f"{m.experts} ({m.experts_per_token} active)" if m.experts else "dense",
                     "max context (tokens)": f"{m.max_context_tokens:,}" if m.max_context_tokens else "not stated",
                     # an imported or linked model's source_url is a stranger's: only http(s) is a link
                     "source": web_url(m.source_url) or ("imported" if not m.source_url else None),
                     "note": m.source_note})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={"source": st.column_config.LinkColumn()})
with imp:
    st.write("Paste or upload a Hugging Face `config.json` (Llama, Mistral, Qwen2/3, Mixtral, Qwen-MoE, "
             "DeepSeek-V2/V3). The model is added to the sidebar's model list for this session and selected.")
    st.text_area("config.json", key="hf_text", height=220)
    st.file_uploader("or upload config.json", type=["json"], key="hf_file",
                     max_upload_size=max(1, HF_CONFIG_MAX_BYTES // 2**20))
    st.text_input("Model id (optional)", key="hf_id", placeholder="derived from the config", max_chars=HF_ID_MAX_CHARS)
    st.button("Import and use", key="hf_import", on_click=_import, type="primary")
    if st.session_state.get("hf_error"):
        st.error(st.session_state["hf_error"])
    elif st.session_state.get("hf_done"):
        st.success(f"Imported {st.session_state['hf_done']}: it is now the sidebar's model.")
