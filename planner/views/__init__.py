"""Tables for pages and the sweep: curves, review tables, the vectorised sweep.  Imports sizing
and below.
"""

from __future__ import annotations

from planner.views.curves import (
    Row,
    batch_curve,
    chunk_curve,
    log_grid,
    max_sequences_curve,
    memory_breakdown,
    parallel_options,
    roof_lines,
    roofline_points,
    speculative_curve,
    ttft_curve,
)
from planner.views.inputs import INPUT_HELP, TRACE_MAX_BYTES, TRACE_MAX_ROWS, trace_from_upload
from planner.views.link import LINK_FIELDS, LinkField, link_params, parse_link, scenario_data, widget_values
from planner.views.plausibility import LARGEST_CLUSTER_GPUS, plausibility_warnings
from planner.views.review import (
    MODES,
    RATE_GRID_FRACTIONS,
    fleet_derivations,
    input_differences,
    knee_rate_grid,
    mode_scenarios,
    sweep_row_scenario,
)
from planner.views.sweep import (
    DEFAULT_DTYPES,
    DEFAULT_PP,
    DEFAULT_TP,
    pareto_front,
    sweep,
)
from planner.views.vocabulary import (
    FIELD_LABELS,
    Headline,
    SloCheck,
    blended_note,
    label_for,
    latency_label,
    plan_headline,
    plan_slo_checks,
    pools_text,
    price_source,
)

__all__ = [
    "INPUT_HELP",
    "LINK_FIELDS",
    "LinkField",
    "TRACE_MAX_BYTES",
    "TRACE_MAX_ROWS",
    "link_params",
    "parse_link",
    "scenario_data",
    "trace_from_upload",
    "widget_values",
    "FIELD_LABELS",
    "LARGEST_CLUSTER_GPUS",
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
    "DEFAULT_DTYPES",
    "DEFAULT_PP",
    "DEFAULT_TP",
    "MODES",
    "RATE_GRID_FRACTIONS",
    "Row",
    "batch_curve",
    "chunk_curve",
    "fleet_derivations",
    "input_differences",
    "knee_rate_grid",
    "log_grid",
    "max_sequences_curve",
    "memory_breakdown",
    "mode_scenarios",
    "parallel_options",
    "pareto_front",
    "roof_lines",
    "roofline_points",
    "speculative_curve",
    "sweep",
    "sweep_row_scenario",
    "ttft_curve",
]
