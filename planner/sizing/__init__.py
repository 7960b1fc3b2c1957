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
    FleetSections,
    OperatingPoint,
    RoutingResult,
    fleet_sections,
    plan_fleet,
    routing_section,
)
from planner.sizing.load import (
    LoadKind,
    LoadPoint,
    replica_load,
)
from planner.sizing.modes import (
    ModeLoad,
    colocated_load,
    disaggregated_load,
)
from planner.sizing.operating import (
    KV_TAIL_Z,
    MAX_PREFILL_POOL_GROWTH,
    MAX_PROMPT_CLASSES,
    OperatingArrays,
    ReplicaMemory,
    WorkloadStats,
    cycle_at,
    operating_arrays,
    replica_memory,
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

__all__ = [
    "CEIL_TOLERANCE",
    "CostResult",
    "DecodeResult",
    "FleetArrays",
    "FleetResult",
    "FleetSections",
    "KV_TAIL_Z",
    "LoadKind",
    "LoadPoint",
    "MAX_PREFILL_POOL_GROWTH",
    "MAX_PROMPT_CLASSES",
    "MemoryResult",
    "ModeLoad",
    "OperatingArrays",
    "OperatingPoint",
    "Plan",
    "PrefillResult",
    "ReplicaMemory",
    "RooflineResult",
    "RoutingResult",
    "WorkloadStats",
    "colocated_load",
    "cycle_at",
    "decode_at",
    "derive_context",
    "disaggregated_load",
    "fleet_arrays",
    "fleet_sections",
    "memory_section",
    "operating_arrays",
    "plan",
    "plan_fleet",
    "plan_resolved",
    "pool_groups",
    "prefill_section",
    "replica_load",
    "replica_memory",
    "roofline_section",
    "routing_section",
    "workload_stats",
]
