"""Simulator settings: everything a run depends on beyond the Scenario.

Validated like a Scenario: a bad value raises one ScenarioError naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import ScenarioError, validation_message
from planner.physics.link import DEFAULT_KV_LINK_EFFICIENCY, RDMA_BYTES_PER_S
from planner.spec.scenario import MAX_LENGTH_SIGMA

__all__ = [
    "DEFAULT_KV_LINK_BYTES_PER_S",
    "DEFAULT_KV_LINK_EFFICIENCY",
    "DEFAULT_KV_TRANSFER_SETUP_S",
    "DEFAULT_LENGTH_SIGMA",
    "MAX_KV_CAPACITY_TOKENS",
    "MAX_RATE_REQ_S",
    "MAX_SIM_BATCH",
    "MAX_SIM_REQUESTS",
    "MAX_SIM_TOKEN_STEPS",
    "MAX_THINK_S",
    "Router",
    "SimOptions",
    "check_sim_size",
    "sim_options",
    "token_steps",
]

# Disaggregated KV transfer: the plan's link (planner.physics.link): the scenario's
# fleet.link (one 400 Gb/s NIC per GPU, or one direction of NVLink) and setup time,
# at the shared sustained efficiency.  The options override them only when set.
DEFAULT_KV_LINK_BYTES_PER_S = RDMA_BYTES_PER_S
DEFAULT_KV_TRANSFER_SETUP_S = None
# Lognormal shape of prompt and output lengths (assumed; the means come from the
# scenario's workload.prompt_tokens / output_tokens).
DEFAULT_LENGTH_SIGMA = 0.5

# Bounds on one run (each error names the option and its bound).
# Requests per run: measured on a 2-core machine (default scenario), 10,000
# requests took 2.3 s and 150 MB, 50,000 took 6 s and 400 MB, 100,000 took 10.5 s
# and 570 MB (10,000,000 ran past 3.7 GB before); after the issue-15 speed work
# (bench/simulate.py --requests 100000, one replica) 100,000 take 5.5 s and 690 MB
# (13.1 s and 1.35 GB just before it).  Also the most rows a trace holds.
MAX_SIM_REQUESTS = 100_000
# Work per run, checked on the request stream before the run allocates anything: every
# output token is one inter-token gap kept (8 B) and up to one iteration (time, batch and
# free blocks, 24 B, in arrays grown by doubling), every prefill chunk one iteration, so
# memory grows with output tokens + prefill chunks (prompt / serving.chunk_tokens), not
# with requests alone.  Measured on a 2-core machine (peak RSS of one run): 25 requests ×
# 1,000,000 output tokens one at a time (20 M iterations) peaked at 1.38 GB; 10 requests ×
# 1 M at the cap, one at a time (the worst case: one iteration per token), at 0.74 GB, of
# which ~0.3 GB is the process and the compiled kernel.  The Tail page's 20,000 requests
# fit up to a mean of about 500 output tokens; bench/simulate.py's 100,000 default-length
# requests (25 M) go past it, as a bench may.
MAX_SIM_TOKEN_STEPS = 10_000_000
# KV capacity per replica: 8 × 192 GB of HBM (B200) at the smallest KV per token
# in the catalog (DeepSeek-V3 MLA, fp8: 35 KB) is ~4.4e7 tokens; 1e9 is 20× that.
MAX_KV_CAPACITY_TOKENS = 1_000_000_000
# Running sequences per replica: the same bound as serving.batch_size.
MAX_SIM_BATCH = 65_536
# Offered load: a million requests/s is far beyond one simulated fleet.
MAX_RATE_REQ_S = 1e6
# Mean think time between chat turns: one day.
MAX_THINK_S = 86_400.0
# Gamma shape: 1e-3 (CV ≈ 32) to 1e3 (nearly periodic) covers every trace seen.
MIN_BURSTINESS, MAX_BURSTINESS = 1e-3, 1e3

Router = Literal["round_robin", "least_loaded", "prefix_affinity"]

PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
JoinTime = Annotated[float, Field(ge=0, le=MAX_THINK_S, allow_inf_nan=False)]


class SimOptions(BaseModel):
    """How to drive the simulator (the scenario says what is served, on what)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rate_req_s: Annotated[float, Field(gt=0, le=MAX_RATE_REQ_S, allow_inf_nan=False)] | None = None  # None: workload's
    requests: Annotated[int, Field(ge=1, le=MAX_SIM_REQUESTS)] = 1000
    arrival: Literal["poisson", "gamma"] = "poisson"
    # gamma shape (vLLM benchmark convention): 1 = Poisson, < 1 burstier
    burstiness: Annotated[float, Field(ge=MIN_BURSTINESS, le=MAX_BURSTINESS, allow_inf_nan=False)] = 1.0
    # "scenario": the workload's own distribution (fixed, lognormal σ, or trace rows).
    lengths: Literal["scenario", "lognormal", "fixed"] = "scenario"
    length_sigma: Annotated[float, Field(ge=0, le=MAX_LENGTH_SIGMA, allow_inf_nan=False)] = DEFAULT_LENGTH_SIGMA
    multi_turn: Annotated[int, Field(ge=1, le=1000)] = 1  # turns per chat session (1: single-turn)
    think_s: Annotated[float, Field(ge=0, le=MAX_THINK_S, allow_inf_nan=False)] = 5.0  # mean think time (exponential)
    # closed loop: this many requests in flight
    concurrency: Annotated[int, Field(ge=1, le=MAX_SIM_REQUESTS)] | None = None
    router: Router = "round_robin"
    replicas: Annotated[int, Field(ge=1, le=4096)] = 1
    prefill_replicas: Annotated[int, Field(ge=1, le=4096)] = 1  # serving.mode = disaggregated
    decode_replicas: Annotated[int, Field(ge=1, le=4096)] = 1
    chunked_prefill: bool = True
    kv_capacity_tokens: Annotated[int, Field(ge=1, le=MAX_KV_CAPACITY_TOKENS)] | None = None  # None: the plan's
    max_batch: Annotated[int, Field(ge=1, le=MAX_SIM_BATCH)] | None = None  # None: serving.batch_size or default
    seed: Annotated[int, Field(ge=0, le=2**64 - 1)] = 0
    w_affinity: NonNegFloat = 1.0
    w_queue: NonNegFloat = 0.5
    w_kv: NonNegFloat = 0.5
    queue_norm_tokens: PosFloat = 8192.0
    slo_attainment: Annotated[float, Field(gt=0, le=1)] = 0.99
    kv_link_bytes_per_s: PosFloat | None = None  # per GPU; None: the scenario's fleet.link (as the plan)
    kv_link_efficiency: Annotated[float, Field(gt=0, le=1)] = DEFAULT_KV_LINK_EFFICIENCY
    kv_transfer_setup_s: NonNegFloat | None = DEFAULT_KV_TRANSFER_SETUP_S  # None: fleet.kv_transfer_setup_s
    timeline_points: Annotated[int, Field(ge=2, le=100_000)] = 200
    # When each replica starts serving (s from the run's start; missing: 0), for a fleet
    # that scales up mid-run: a joining replica has an empty prefix cache and gets
    # no requests before it joins.  join_s: colocated replicas or the prefill pool.
    join_s: Annotated[tuple[JoinTime, ...], Field(max_length=4096)] = ()
    decode_join_s: Annotated[tuple[JoinTime, ...], Field(max_length=4096)] = ()


def token_steps(*, prompt_tokens: Iterable[int], output_tokens: Iterable[int], chunk_tokens: int,
                chunked: bool) -> int:
    """Output tokens + prefill chunks of a request stream: what a run's memory and time grow with."""
    chunks = (sum(-(-int(p) // chunk_tokens) for p in prompt_tokens) if chunked
              else sum(1 for _ in prompt_tokens))
    return int(sum(int(o) for o in output_tokens)) + chunks


def check_sim_size(*, prompt_tokens: Sequence[int], output_tokens: Sequence[int], chunk_tokens: int,
                   chunked: bool) -> None:
    """Raise ScenarioError naming the fields when a stream is over MAX_SIM_TOKEN_STEPS."""
    steps = token_steps(prompt_tokens=prompt_tokens, output_tokens=output_tokens, chunk_tokens=chunk_tokens,
                        chunked=chunked)
    if steps <= MAX_SIM_TOKEN_STEPS:
        return
    n = max(len(output_tokens), 1)
    out = sum(int(o) for o in output_tokens)
    raise ScenarioError(
        f"requests × (workload.output_tokens + workload.prompt_tokens / serving.chunk_tokens): {len(output_tokens):,} "
        f"requests of {out / n:,.0f} output tokens on average make {steps:,} token steps, over the limit of "
        f"{MAX_SIM_TOKEN_STEPS:,} per run (MAX_SIM_TOKEN_STEPS: the simulator's memory grows with every output "
        f"token); lower requests, workload.output_tokens or workload.prompt_tokens")


def sim_options(**kwargs: Any) -> SimOptions:
    """Validated SimOptions; a bad value raises ScenarioError naming the field."""
    try:
        return SimOptions(**kwargs)
    except ValidationError as exc:
        raise ScenarioError(validation_message(exc)) from None
