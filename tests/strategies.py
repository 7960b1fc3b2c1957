"""Hypothesis strategies shared by the property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from planner import load_catalog

CAT = load_catalog()
gpu_ids = st.sampled_from(sorted(CAT.gpus))
model_ids = st.sampled_from(sorted(CAT.models))
weights_dtypes = st.sampled_from(["bf16", "fp8", "int8", "int4", "nvfp4", "mxfp4"])
kv_dtypes = st.sampled_from(["bf16", "fp8"])
batches = st.integers(min_value=1, max_value=2048)
contexts = st.integers(min_value=1, max_value=200_000)
tps = st.sampled_from([1, 2, 4, 8])
efficiencies = st.floats(min_value=0.05, max_value=1.0)
