"""An iteration-level serving simulator on the planner's one step-time physics."""

from planner.simulate.arrivals import Request, arrival_times, generate_requests, load_trace, parse_trace_csv
from planner.simulate.engine import SimRun, StepTimes, simulate
from planner.simulate.fleetcheck import (
    PLAN_ATTAINMENT_TARGET,
    FleetCheck,
    FleetSim,
    describe_knee,
    fleet_check,
    fleet_sim,
    knee_rates,
)
from planner.simulate.options import SimOptions, sim_options
from planner.simulate.report import find_knee, latency_stats, rate_sweep, summarize
from planner.simulate.router import ReplicaLoad, affinity_score, choose_replica

__all__ = [
    "PLAN_ATTAINMENT_TARGET",
    "FleetCheck",
    "FleetSim",
    "describe_knee",
    "fleet_check",
    "fleet_sim",
    "knee_rates",
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
    "load_trace",
    "parse_trace_csv",
    "rate_sweep",
    "sim_options",
    "simulate",
    "summarize",
]
