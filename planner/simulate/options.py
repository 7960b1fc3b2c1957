"""Simulator settings: everything a run depends on beyond the Scenario.

Validated like a Scenario: a bad value raises one ScenarioError naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import ScenarioError
from planner.physics.link import DEFAULT_KV_LINK_EFFICIENCY, RDMA_BYTES_PER_S
from planner.spec.scenario import validation_message

__all__ = [
    "DEFAULT_KV_LINK_BYTES_PER_S",
    "DEFAULT_KV_LINK_EFFICIENCY",
    "DEFAULT_KV_TRANSFER_SETUP_S",
    "DEFAULT_LENGTH_SIGMA",
    "Router",
    "SimOptions",
    "sim_options",
]

# Disaggregated KV transfer: the plan's link (planner.physics.link): the scenario's
# fleet.link (one 400 Gb/s NIC per GPU, or one direction of NVLink) and setup time,
# at the shared sustained efficiency.  The options override them only when set.
DEFAULT_KV_LINK_BYTES_PER_S = RDMA_BYTES_PER_S
DEFAULT_KV_TRANSFER_SETUP_S = None
# Lognormal shape of prompt and output lengths (assumed; the means come from the
# scenario's workload.prompt_tokens / output_tokens).
DEFAULT_LENGTH_SIGMA = 0.5

Router = Literal["round_robin", "least_loaded", "prefix_affinity"]

PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class SimOptions(BaseModel):
    """How to drive the simulator (the scenario says what is served, on what)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rate_req_s: PosFloat | None = None  # None: the scenario's workload.requests_per_s
    requests: Annotated[int, Field(ge=1, le=10_000_000)] = 1000
    arrival: Literal["poisson", "gamma"] = "poisson"
    burstiness: PosFloat = 1.0  # gamma shape (vLLM benchmark convention): 1 = Poisson, < 1 burstier
    # "scenario": the workload's own distribution (fixed, lognormal σ, or trace rows).
    lengths: Literal["scenario", "lognormal", "fixed"] = "scenario"
    length_sigma: NonNegFloat = DEFAULT_LENGTH_SIGMA
    multi_turn: Annotated[int, Field(ge=1, le=1000)] = 1  # turns per chat session (1: single-turn)
    think_s: NonNegFloat = 5.0  # mean user think time between turns (exponential)
    concurrency: Annotated[int, Field(ge=1)] | None = None  # closed loop: this many requests in flight
    router: Router = "round_robin"
    replicas: Annotated[int, Field(ge=1, le=4096)] = 1
    prefill_replicas: Annotated[int, Field(ge=1, le=4096)] = 1  # serving.mode = disaggregated
    decode_replicas: Annotated[int, Field(ge=1, le=4096)] = 1
    chunked_prefill: bool = True
    kv_capacity_tokens: Annotated[int, Field(ge=1)] | None = None  # None: the plan's KV budget
    max_batch: Annotated[int, Field(ge=1)] | None = None  # None: serving.batch_size or the engine default
    seed: Annotated[int, Field(ge=0)] = 0
    w_affinity: NonNegFloat = 1.0
    w_queue: NonNegFloat = 0.5
    w_kv: NonNegFloat = 0.5
    queue_norm_tokens: PosFloat = 8192.0
    slo_attainment: Annotated[float, Field(gt=0, le=1)] = 0.99
    kv_link_bytes_per_s: PosFloat | None = None  # per GPU; None: the scenario's fleet.link (as the plan)
    kv_link_efficiency: Annotated[float, Field(gt=0, le=1)] = DEFAULT_KV_LINK_EFFICIENCY
    kv_transfer_setup_s: NonNegFloat | None = DEFAULT_KV_TRANSFER_SETUP_S  # None: fleet.kv_transfer_setup_s
    timeline_points: Annotated[int, Field(ge=2, le=100_000)] = 200


def sim_options(**kwargs: Any) -> SimOptions:
    """Validated SimOptions; a bad value raises ScenarioError naming the field."""
    try:
        return SimOptions(**kwargs)
    except ValidationError as exc:
        raise ScenarioError(validation_message(exc)) from None
