"""An iteration-level serving simulator on the planner's one step-time physics."""

from planner.simulate.arrivals import (
    Request,
    arrival_times,
    generate_requests,
    length_samples,
    load_trace,
    parse_trace_csv,
)
from planner.simulate.engine import CACHED_GRID_TOKENS, CONTEXT_GRID_TOKENS, KvBlocks, SimRun, StepTimes, simulate
from planner.simulate.options import (
    DEFAULT_KV_LINK_BYTES_PER_S,
    DEFAULT_KV_LINK_EFFICIENCY,
    DEFAULT_KV_TRANSFER_SETUP_S,
    DEFAULT_LENGTH_SIGMA,
    Router,
    SimOptions,
    sim_options,
)
from planner.simulate.report import find_knee, latency_stats, rate_sweep, summarize
from planner.simulate.router import ReplicaLoad, affinity_score, choose_replica

__all__ = [
    "CACHED_GRID_TOKENS",
    "CONTEXT_GRID_TOKENS",
    "DEFAULT_KV_LINK_BYTES_PER_S",
    "DEFAULT_KV_LINK_EFFICIENCY",
    "DEFAULT_KV_TRANSFER_SETUP_S",
    "DEFAULT_LENGTH_SIGMA",
    "Router",
    "KvBlocks",
    "ReplicaLoad",
    "Request",
    "SimOptions",
    "SimRun",
    "StepTimes",
    "affinity_score",
    "arrival_times",
    "choose_replica",
    "find_knee",
    "generate_requests",
    "latency_stats",
    "length_samples",
    "load_trace",
    "parse_trace_csv",
    "rate_sweep",
    "sim_options",
    "simulate",
    "summarize",
]
