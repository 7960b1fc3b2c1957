"""Empirical factors with their origin.

These are the planner's assumptions where a scenario leaves a field empty.
Each carries the origin label the Plan shows beside numbers that used it.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_COMPUTE_EFFICIENCY",
    "DEFAULT_EFFICIENCY_ORIGIN",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_STEP_OVERHEAD_S",
]

# Sustained fraction of datasheet HBM bandwidth in decode. Seeds 001: "aggregate
# MBU 60-80%" is a healthy decode.
DEFAULT_BANDWIDTH_EFFICIENCY = 0.8
# Sustained fraction of dense peak in prefill. Seeds 001: "~66 ms at a realistic
# 50% of peak ... 40-60% is a strong prefill".
DEFAULT_COMPUTE_EFFICIENCY = 0.5
# Fixed per-iteration cost (scheduling, sampling, kernel launches not hidden by
# CUDA graphs). Seeds 002: "kernel launch and host scheduling are decode taxes".
DEFAULT_STEP_OVERHEAD_S = 1.0e-3
DEFAULT_EFFICIENCY_ORIGIN = "default"
# Engines cap the running batch (vLLM max_num_seqs, TRT-LLM max_batch_size).
DEFAULT_MAX_BATCH = 1024
