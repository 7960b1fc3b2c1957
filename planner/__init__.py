"""Ridgeline's planner core: pure functions over frozen specs (no Streamlit here)."""

from planner.catalog import Catalog, get_gpu, get_model, load_catalog
from planner.context import Resolved, resolve
from planner.derivation import Derivation
from planner.errors import (
    CatalogError,
    ConflictError,
    InsufficientMemoryError,
    NoFeasibleConfigError,
    PlannerError,
    ProbeError,
    ScenarioError,
)
from planner.memory import (
    contiguous_reservation_bytes,
    internal_fragmentation,
    kv_budget_bytes,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    max_sequences,
    paged_reservation_bytes,
    prefix_sharing_bytes,
    weight_bytes,
    weight_bytes_per_gpu,
)
from planner.params import ParamCounts, param_counts
from planner.plan import Plan, plan
from planner.precision import bits_per_weight, bytes_per_kv_element, bytes_per_weight
from planner.roofline import (
    attainable_flops_per_s,
    decode_intensity,
    peak_flops_per_s,
    prefill_intensity,
    ridge_flop_per_byte,
)
from planner.scenario import Scenario, apply_overrides, scenario_from_dict
from planner.share import scenario_from_token, share_token
from planner.simulate import SimOptions, SimRun, rate_sweep
from planner.specs import DenseFlops, GpuSpec, ModelSpec
from planner.step import DecodeStep, PrefillStep, decode_step, prefill_flops, prefill_step
from planner.techniques import (
    chunked_prefill,
    kv_transfer_s,
    mbu,
    mfu,
    pipeline_bubble,
    speculative_speedup,
    speculative_tokens_per_pass,
    static_batch_utilization,
)

__all__ = [
    "Catalog",
    "CatalogError",
    "ConflictError",
    "DecodeStep",
    "DenseFlops",
    "Derivation",
    "GpuSpec",
    "InsufficientMemoryError",
    "ModelSpec",
    "NoFeasibleConfigError",
    "ParamCounts",
    "Plan",
    "PlannerError",
    "PrefillStep",
    "ProbeError",
    "Resolved",
    "Scenario",
    "ScenarioError",
    "SimOptions",
    "SimRun",
    "apply_overrides",
    "attainable_flops_per_s",
    "bits_per_weight",
    "bytes_per_kv_element",
    "bytes_per_weight",
    "chunked_prefill",
    "contiguous_reservation_bytes",
    "decode_intensity",
    "decode_step",
    "get_gpu",
    "get_model",
    "internal_fragmentation",
    "kv_budget_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu",
    "kv_transfer_s",
    "load_catalog",
    "max_sequences",
    "mbu",
    "mfu",
    "paged_reservation_bytes",
    "param_counts",
    "peak_flops_per_s",
    "pipeline_bubble",
    "plan",
    "prefill_flops",
    "prefill_intensity",
    "prefill_step",
    "prefix_sharing_bytes",
    "rate_sweep",
    "resolve",
    "ridge_flop_per_byte",
    "scenario_from_dict",
    "scenario_from_token",
    "share_token",
    "speculative_speedup",
    "speculative_tokens_per_pass",
    "static_batch_utilization",
    "weight_bytes",
    "weight_bytes_per_gpu",
]
