"""What is planned: frozen GPU and model specs, the catalog, Hugging Face import, precisions,
parameter counts, the Scenario schema, share tokens, fitted defaults and the resolved context.
Imports only ``planner.errors`` and ``planner.io``.
"""

from __future__ import annotations

from planner.spec.catalog import (
    Catalog,
    PriceQuote,
    catalog_dir,
    get_gpu,
    get_model,
    load_catalog,
)
from planner.spec.context import (
    Resolved,
    StepKwargs,
    resolve,
)
from planner.spec.defaults import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_COMPUTE_EFFICIENCY,
    DEFAULT_EFFICIENCY_ORIGIN,
    DEFAULT_LAYER_OVERHEAD_S,
    DEFAULT_MAX_BATCH,
    DEFAULT_STEP_OVERHEAD_S,
)
from planner.spec.derivation import (
    Derivation,
    Origin,
    fmt_num,
)
from planner.spec.fitted import (
    FITTED_EFFICIENCY,
    FITTED_GPU_ROWS,
    FITTED_ON,
    MIN_ROWS_COVERED,
)
from planner.spec.hf_import import (
    SUPPORTED_MODEL_TYPES,
    load_hf_config,
    spec_kwargs_from_hf_config,
)
from planner.spec.params import (
    ParamCounts,
    param_counts,
)
from planner.spec.precision import (
    KV_DTYPES,
    WEIGHTS_DTYPES,
    ComputeDtype,
    KvDtype,
    WeightsDtype,
    bits_per_weight,
    bytes_per_kv_element,
    bytes_per_weight,
    compute_dtype_candidates,
)
from planner.spec.scenario import (
    SCHEMA_VERSION,
    Cost,
    Efficiency,
    Fleet,
    Parallel,
    Scenario,
    Serving,
    Slo,
    Speculative,
    Workload,
    apply_overrides,
    load_scenario_file,
    resolve_gpu,
    resolve_model,
    scenario_from_dict,
    validation_message,
)
from planner.spec.share import (
    MAX_TOKEN_CHARS,
    scenario_from_token,
    share_token,
)
from planner.spec.specs import (
    DenseFlops,
    GpuSpec,
    ModelSpec,
)

__all__ = [
    "Catalog",
    "ComputeDtype",
    "Cost",
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_COMPUTE_EFFICIENCY",
    "DEFAULT_EFFICIENCY_ORIGIN",
    "DEFAULT_LAYER_OVERHEAD_S",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_STEP_OVERHEAD_S",
    "DenseFlops",
    "Derivation",
    "Efficiency",
    "FITTED_EFFICIENCY",
    "FITTED_GPU_ROWS",
    "FITTED_ON",
    "Fleet",
    "GpuSpec",
    "KV_DTYPES",
    "KvDtype",
    "MAX_TOKEN_CHARS",
    "MIN_ROWS_COVERED",
    "ModelSpec",
    "Origin",
    "Parallel",
    "ParamCounts",
    "PriceQuote",
    "Resolved",
    "StepKwargs",
    "SCHEMA_VERSION",
    "SUPPORTED_MODEL_TYPES",
    "Scenario",
    "Serving",
    "Slo",
    "Speculative",
    "WEIGHTS_DTYPES",
    "WeightsDtype",
    "Workload",
    "apply_overrides",
    "bits_per_weight",
    "bytes_per_kv_element",
    "bytes_per_weight",
    "catalog_dir",
    "compute_dtype_candidates",
    "fmt_num",
    "get_gpu",
    "get_model",
    "load_catalog",
    "load_hf_config",
    "load_scenario_file",
    "param_counts",
    "resolve",
    "resolve_gpu",
    "resolve_model",
    "scenario_from_dict",
    "scenario_from_token",
    "share_token",
    "spec_kwargs_from_hf_config",
    "validation_message",
]
