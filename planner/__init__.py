"""Ridgeline's planner core: pure functions over frozen specs (no Streamlit here).

The layers, each importing only those below it (import-linter keeps them: see
``.importlinter`` and ``make lint``):

- ``planner.errors``: the error tree; ``planner.io``: formatting, flat exports, capped JSON reads.
- ``planner.spec``: what is planned: GPU and model specs, the catalog, Hugging Face import,
  precisions, parameter counts, the Scenario schema, share tokens, fitted defaults.
- ``planner.physics``: the seeds' physics: roofline, memory and KV, decode/prefill steps,
  techniques, length distributions; array-broadcasting pure functions.
- ``planner.sizing``: replica sections with derivations, operating point, fleet, ``plan``.
- ``planner.views``: curves and review tables for pages, the vectorised sweep, the review report.
- ``planner.simulate``, ``planner.validate``, ``planner.store``: the discrete-event simulator,
  validation against published measurements, saved scenarios and runs.
- ``planner.probe``: the live probe of real endpoints (it may save runs in the store).
- ``planner.cli``: ``python -m planner``; imported by nothing.

Pages import this module's public names (and ``planner.store``, ``planner.probe``,
``planner.simulate``), never the CLI.
"""

from planner import views
from planner.errors import (
    CatalogError,
    ConflictError,
    InsufficientMemoryError,
    NoFeasibleConfigError,
    PlannerError,
    ProbeError,
    ScenarioError,
)
from planner.io.export import column_unit, csv_text, plan_row, review_csv_text
from planner.io.formatting import derivation_value, human, readable, sig3
from planner.io.pdf import chromium_path, html_to_pdf, no_chromium_message
from planner.physics.memory import (
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
from planner.physics.roofline import (
    attainable_flops_per_s,
    decode_intensity,
    peak_flops_per_s,
    prefill_intensity,
    ridge_flop_per_byte,
)
from planner.physics.speculative import SPECULATIVE_METHODS
from planner.physics.step import DecodeStep, PrefillStep, decode_step, prefill_flops, prefill_step
from planner.physics.techniques import (
    chunked_prefill,
    kv_transfer_s,
    mbu,
    mfu,
    pipeline_bubble,
    speculative_speedup,
    speculative_tokens_per_pass,
    static_batch_utilization,
)
from planner.simulate import RateSweep, SimOptions, SimReport, SimRun, rate_sweep
from planner.sizing.plan import Plan, plan
from planner.spec.catalog import Catalog, get_gpu, get_model, load_catalog
from planner.spec.context import Resolved, resolve
from planner.spec.derivation import Derivation
from planner.spec.params import ParamCounts, param_counts
from planner.spec.precision import bits_per_weight, bytes_per_kv_element, bytes_per_weight
from planner.spec.scenario import (
    POOL_ROLES,
    Pool,
    Scenario,
    apply_overrides,
    scenario_from_dict,
)
from planner.spec.share import MAX_TOKEN_CHARS, scenario_from_token, share_token
from planner.spec.specs import DenseFlops, GpuSpec, ModelSpec
from planner.views.compare import (
    COMPARE_MAX,
    COMPARE_MIN,
    COMPARE_PAIRS,
    CompareColumn,
    best_layout,
    compare_columns,
    gpu_variants,
    layout_caption,
    layout_label,
    layout_variants,
    partner_gpu,
)
from planner.views.curves import log_grid, roof_lines
from planner.views.inputs import INPUT_HELP, TRACE_MAX_BYTES, TRACE_MAX_ROWS, trace_from_upload
from planner.views.labels import room_for_labels
from planner.views.link import LINK_FIELDS, link_params, parse_link, scenario_data, widget_values
from planner.views.plausibility import plausibility_warnings
from planner.views.pools import (
    pool_data,
    pool_derivations,
    pool_rows,
    xpyd_text,
)
from planner.views.referee import REFEREE_MAX_SIMULATED, RefereePick, referee_pick, slo_status
from planner.views.report import report_file_name, review_report, review_report_html
from planner.views.review import (
    fleet_derivations,
    input_differences,
    knee_rate_grid,
    mode_scenarios,
    mode_verdict,
    sweep_row_scenario,
)
from planner.views.revisions import FieldChange, field_text, revision_changes
from planner.views.sweep import SweepResult, SweepRow, sweep, sweep_result
from planner.views.vocabulary import (
    Attainment,
    Headline,
    SloCheck,
    blended_note,
    label_for,
    latency_label,
    plan_attainment,
    plan_headline,
    plan_slo_checks,
    pools_text,
    price_source,
)

__all__ = [
    "POOL_ROLES",
    "Pool",
    "pool_data",
    "pool_derivations",
    "pool_rows",
    "xpyd_text",
    "Attainment",
    "REFEREE_MAX_SIMULATED",
    "RefereePick",
    "mode_verdict",
    "plan_attainment",
    "referee_pick",
    "slo_status",
    "chromium_path",
    "html_to_pdf",
    "no_chromium_message",
    "report_file_name",
    "review_report",
    "review_report_html",
    "room_for_labels",
    "csv_text",
    "column_unit",
    "review_csv_text",
    "plan_row",
    "human",
    "INPUT_HELP",
    "FieldChange",
    "revision_changes",
    "field_text",
    "COMPARE_MAX",
    "COMPARE_MIN",
    "COMPARE_PAIRS",
    "CompareColumn",
    "best_layout",
    "compare_columns",
    "gpu_variants",
    "layout_caption",
    "layout_label",
    "layout_variants",
    "partner_gpu",
    "LINK_FIELDS",
    "MAX_TOKEN_CHARS",
    "TRACE_MAX_BYTES",
    "TRACE_MAX_ROWS",
    "link_params",
    "parse_link",
    "scenario_data",
    "trace_from_upload",
    "widget_values",
    "derivation_value",
    "readable",
    "sig3",
    "Headline",
    "SloCheck",
    "blended_note",
    "label_for",
    "latency_label",
    "plan_headline",
    "plan_slo_checks",
    "plausibility_warnings",
    "pools_text",
    "price_source",
    "log_grid",
    "roof_lines",
    "fleet_derivations",
    "input_differences",
    "knee_rate_grid",
    "mode_scenarios",
    "sweep_row_scenario",
    "sweep",
    "sweep_result",
    "SweepResult",
    "SweepRow",
    "views",
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
    "RateSweep",
    "Resolved",
    "Scenario",
    "ScenarioError",
    "SimOptions",
    "SimReport",
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
    "SPECULATIVE_METHODS",
    "speculative_speedup",
    "speculative_tokens_per_pass",
    "static_batch_utilization",
    "weight_bytes",
    "weight_bytes_per_gpu",
]
