"""From physics to a fleet: the replica's sections with their derivations, the operating point,
fleet sizing and ``plan``.  Imports physics and below.
"""

from planner.sizing.fleet import (
    CEIL_TOLERANCE,
    FleetArrays,
    fleet_arrays,
    pool_groups,
)
from planner.sizing.fleet_plan import (
    CostResult,
    FleetResult,
    OperatingPoint,
    RoutingResult,
    fleet_sections,
    routing_section,
)
from planner.sizing.load import (
    LoadKind,
    LoadPoint,
    replica_load,
)
from planner.sizing.operating import (
    KV_TAIL_Z,
    MAX_PREFILL_POOL_GROWTH,
    MAX_PROMPT_CLASSES,
    OperatingArrays,
    WorkloadStats,
    operating_arrays,
    workload_stats,
)
from planner.sizing.plan import (
    Plan,
    plan,
    plan_resolved,
)
from planner.sizing.replica import (
    DecodeResult,
    MemoryResult,
    PrefillResult,
    RooflineResult,
    decode_at,
    derive_context,
    memory_section,
    prefill_section,
    roofline_section,
)
from planner.sizing.uncertainty import (
    BAND_LEVEL,
    MIN_BAND_ROWS,
    Band,
    Uncertainty,
    nearest_residuals,
    plan_uncertainty,
)

__all__ = [
    "BAND_LEVEL",
    "Band",
    "MIN_BAND_ROWS",
    "Uncertainty",
    "nearest_residuals",
    "plan_uncertainty",
    "CEIL_TOLERANCE",
    "CostResult",
    "DecodeResult",
    "FleetArrays",
    "FleetResult",
    "KV_TAIL_Z",
    "LoadKind",
    "LoadPoint",
    "MAX_PREFILL_POOL_GROWTH",
    "MAX_PROMPT_CLASSES",
    "MemoryResult",
    "OperatingArrays",
    "OperatingPoint",
    "Plan",
    "PrefillResult",
    "RooflineResult",
    "RoutingResult",
    "WorkloadStats",
    "decode_at",
    "derive_context",
    "fleet_arrays",
    "fleet_sections",
    "memory_section",
    "operating_arrays",
    "plan",
    "plan_resolved",
    "pool_groups",
    "prefill_section",
    "replica_load",
    "roofline_section",
    "routing_section",
    "workload_stats",
]
