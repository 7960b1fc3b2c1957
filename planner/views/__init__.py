"""Tables for pages and the sweep: curves, review tables, the vectorised sweep.  Imports sizing
and below.
"""

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
    MAX_SWEEP_CANDIDATES,
    pareto_front,
    sweep,
)

__all__ = [
    "DEFAULT_DTYPES",
    "DEFAULT_PP",
    "DEFAULT_TP",
    "MAX_SWEEP_CANDIDATES",
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
