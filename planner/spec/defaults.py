"""Empirical factors with their origin.

These are the planner's assumptions where a scenario leaves a field empty.
Each carries the origin label the Plan shows beside numbers that used it.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_COMPUTE_EFFICIENCY",
    "DEFAULT_EFFICIENCY_ORIGIN",
    "DEFAULT_LAYER_OVERHEAD_S",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_STEP_OVERHEAD_S",
]

from typing import Final, Literal

from planner.spec.fitted import FITTED_EFFICIENCY

# Sustained fraction of datasheet HBM bandwidth in decode, fitted on published
# measurements (bench/fit_defaults.py; seeds 001: "aggregate MBU 60-80%").
DEFAULT_BANDWIDTH_EFFICIENCY = FITTED_EFFICIENCY["generic"]["bandwidth"]
# Sustained fraction of dense peak in prefill, fitted likewise (seeds 001: "40-60%
# is a strong prefill").
DEFAULT_COMPUTE_EFFICIENCY = FITTED_EFFICIENCY["generic"]["compute"]
# Fixed per-iteration cost (scheduling, sampling, launches not hidden by CUDA
# graphs), fitted likewise.
DEFAULT_STEP_OVERHEAD_S = FITTED_EFFICIENCY["generic"]["step_overhead_s"]
# Per-layer cost of each forward pass (launches, synchronization), fitted likewise.
DEFAULT_LAYER_OVERHEAD_S = FITTED_EFFICIENCY["generic"].get("layer_overhead_s", 0.0)
DEFAULT_EFFICIENCY_ORIGIN: Final[Literal["default (fitted on published data)"]] = "default (fitted on published data)"
# Engines cap the running batch (vLLM max_num_seqs, TRT-LLM max_batch_size): the
# plan, sweep and simulator search batches up to this.  vLLM's V1 engine defaults
# max_num_seqs to 1024 on large-memory GPUs (256 on smaller ones and in V0).
DEFAULT_MAX_BATCH = 1024
