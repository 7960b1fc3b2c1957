"""The Scenario's plain sections: workload, SLO, serving, efficiency, fleet and
cost (planner.spec.scenario holds the sections that look ids up in the catalog),
and the bounded field types they share.

Fields are addressed by dotted keys (``workload.prompt_tokens``, ``fleet.policy``)
in ``--set KEY=VALUE`` overrides and in error messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.spec.bounds import (
    MAX_BALANCE_ITERS,
    MAX_ID_CHARS,
    MAX_LENGTH_SIGMA,
    MAX_LINK_BYTES_PER_S,
    MAX_RECV_INTERVAL,
    MAX_SEQUENCE_TOKENS,
    MAX_TRACE_ROWS,
    MAX_USD_PER_GPU_HOUR,
    MAX_USD_PER_KWH,
    MAX_WARM_POOL_REPLICAS,
    MIN_LINK_BYTES_PER_S,
    MIN_SCALE_INTERVAL_S,
)
from planner.spec.profile import DAY_S, MAX_PROFILE_POINTS, ProfilePoint, check_profile

__all__ = [
    "Cost",
    "Efficiency",
    "Fleet",
    "Serving",
    "Slo",
    "Workload",
]

PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
PosFraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
# A link or weight-loading bandwidth (planner.spec.bounds: MIN_/MAX_LINK_BYTES_PER_S).
LinkBytesPerS = Annotated[float, Field(ge=MIN_LINK_BYTES_PER_S, le=MAX_LINK_BYTES_PER_S, allow_inf_nan=False)]

TraceTokens = Annotated[int, Field(ge=1, le=MAX_SEQUENCE_TOKENS)]
CatalogId = Annotated[str, Field(max_length=MAX_ID_CHARS)]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Workload(BaseModel):
    """What the users send.  ``prompt_tokens``/``output_tokens`` are means; with
    ``distribution`` lognormal, ``prompt_sigma``/``output_sigma`` are the σ of
    the underlying normal; with ``trace``, ``trace`` holds (prompt, output) rows
    and the means are taken from it.  ``requests_per_s`` is the mean traffic,
    ``peak_requests_per_s`` (default: the mean) what the fleet is sized for."""

    model_config = _FROZEN
    prompt_tokens: Annotated[int, Field(ge=1, le=MAX_SEQUENCE_TOKENS)] = 2000
    output_tokens: Annotated[int, Field(ge=1, le=MAX_SEQUENCE_TOKENS)] = 250
    requests_per_s: PosFloat = 10.0
    peak_requests_per_s: PosFloat | None = None
    prefix_tokens: NonNegInt = 0
    prefix_hit_rate: Fraction = 0.0
    distribution: Literal["fixed", "lognormal", "trace"] = "fixed"
    prompt_sigma: Annotated[float, Field(ge=0, le=MAX_LENGTH_SIGMA, allow_inf_nan=False)] = 0.0
    output_sigma: Annotated[float, Field(ge=0, le=MAX_LENGTH_SIGMA, allow_inf_nan=False)] = 0.0
    trace: Annotated[tuple[tuple[TraceTokens, TraceTokens], ...], Field(max_length=MAX_TRACE_ROWS)] | None = None
    # A day of traffic (planner.spec.profile): piecewise linear, repeating daily;
    # None: flat at the peak rate (the autoscaling view then equals the static fleet).
    profile: Annotated[tuple[ProfilePoint, ...], Field(max_length=MAX_PROFILE_POINTS)] | None = None

    @field_validator("profile", mode="after")
    @classmethod
    def _check_profile(cls, value: tuple[ProfilePoint, ...] | None) -> tuple[ProfilePoint, ...] | None:
        if value is not None:
            check_profile(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _mean_follows_peak(cls, data: Any) -> Any:
        # a peak given without a mean is a flat load at the peak, not the default mean under it
        if isinstance(data, dict) and data.get("peak_requests_per_s") is not None and "requests_per_s" not in data:
            return {**data, "requests_per_s": data["peak_requests_per_s"]}
        return data

    @model_validator(mode="after")
    def _check(self) -> Workload:
        if self.prefix_tokens > self.prompt_tokens:
            raise ValueError("prefix_tokens cannot exceed prompt_tokens")
        if self.peak_requests_per_s is not None and self.peak_requests_per_s < self.requests_per_s:
            raise ValueError("peak_requests_per_s cannot be below requests_per_s")
        if self.distribution == "lognormal" and self.prompt_sigma == 0 and self.output_sigma == 0:
            raise ValueError("a lognormal distribution needs prompt_sigma or output_sigma > 0")
        if self.distribution == "trace" and not self.trace:
            raise ValueError("a trace distribution needs trace rows (prompt_tokens, output_tokens)")
        if self.distribution != "trace" and self.trace:
            raise ValueError("trace rows are given but distribution is not 'trace'")
        return self

    @property
    def peak_rate(self) -> float:
        return self.peak_requests_per_s if self.peak_requests_per_s is not None else self.requests_per_s


class Slo(BaseModel):
    """Latency targets, scored per request as the simulator scores them (DistServe's
    goodput): a request meets the SLO when its TTFT ≤ ``ttft_s`` and its TPOT (its own
    mean inter-token time) ≤ ``itl_s``; a plan meets it when at least ``attainment`` of
    requests do.  ``itl_percentile`` is the percentile of per-request TPOT shown beside
    the target; ``itl_gap_p99_s`` (optional) bounds the p99 of all token gaps (the
    chunked-prefill stall)."""

    model_config = _FROZEN
    ttft_s: PosFloat = 1.0
    itl_s: PosFloat = 0.05
    # p90 by default: the percentile latency dashboards and DistServe-style SLOs
    # quote (seeds 001: "TTFT p50/p90 and ITL p50/p99"; p99 is stricter).
    itl_percentile: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 0.9
    # Share of requests that must meet both targets (DistServe's SLO attainment; 90%
    # matches the p90 the targets were quoted at).
    attainment: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 0.9
    itl_gap_p99_s: PosFloat | None = None


class Serving(BaseModel):
    """Engine settings."""

    model_config = _FROZEN
    mode: Literal["colocated", "disaggregated"] = "colocated"
    batch_size: Annotated[int, Field(ge=1, le=65536)] | None = None
    context_tokens: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    chunk_tokens: Annotated[int, Field(ge=16, le=1_000_000)] = 2048  # vLLM max_num_batched_tokens
    block_tokens: Annotated[int, Field(ge=1, le=4096)] = 16
    reserved_bytes: NonNegFloat = 4.0e9
    memory_utilization: PosFraction | None = 0.9
    # Whose memory_utilization it is (planner.physics.memory.kv_budget_bytes): vLLM's
    # gpu_memory_utilization, TensorRT-LLM's kv_cache_free_gpu_mem_fraction, SGLang's mem_fraction_static.
    engine: Literal["vllm", "trtllm", "sglang"] = "vllm"
    # SGLang's --scheduler-recv-interval: the scheduler takes in new requests only once the
    # forward passes since its last take (a decode pass counts one, a pass with prompt tokens
    # more than any interval) reach it, so a request waits up to that many decode steps before
    # its prefill (planner.physics.queueing.recv_wait_cycles).  1: every iteration, as vLLM and
    # TensorRT-LLM do.
    scheduler_recv_interval: Annotated[int, Field(ge=1, le=MAX_RECV_INTERVAL)] = 1
    # TensorRT-LLM's attention-DP balance (attention_dp_config: enable_balance true, timeout_iters
    # this, batching_wait_iters 0): with parallel.dp_attention, new prompts wait until every
    # attention-DP rank has one, or until this many passes since the scheduler last took any
    # (planner.physics.queueing.balance_wait_cycles).  0: off, TensorRT-LLM's default.
    attention_dp_balance_iters: Annotated[int, Field(ge=0, le=MAX_BALANCE_ITERS)] = 0

    @model_validator(mode="after")
    def _recv_interval_is_sglang(self) -> Serving:
        if self.scheduler_recv_interval > 1 and self.engine != "sglang":
            raise ValueError(f"serving.scheduler_recv_interval is SGLang's --scheduler-recv-interval; "
                             f"serving.engine '{self.engine}' takes new requests every iteration (set it to 1, "
                             f"or serving.engine to 'sglang')")
        if self.attention_dp_balance_iters > 0 and self.engine != "trtllm":
            raise ValueError(f"serving.attention_dp_balance_iters is TensorRT-LLM's attention_dp_config "
                             f"(enable_balance, timeout_iters); serving.engine '{self.engine}' has no such "
                             f"balance (set it to 0, or serving.engine to 'trtllm')")
        return self


class Efficiency(BaseModel):
    """Sustained fractions of the datasheet peaks and fixed costs (None: default)."""

    model_config = _FROZEN
    bandwidth: PosFraction | None = None
    compute: PosFraction | None = None
    step_overhead_s: NonNegFloat | None = None
    layer_overhead_s: NonNegFloat | None = None  # per layer per forward pass
    collective_latency_s: NonNegFloat | None = None
    calibrated_from: str | None = None  # probe run these values were fitted on


class Fleet(BaseModel):
    """How replicas are provisioned and linked."""

    model_config = _FROZEN
    target_utilization: PosFraction = 0.7
    min_replicas: Annotated[int, Field(ge=1, le=10_000)] = 2
    link: Literal["nvlink", "rdma"] = "rdma"
    link_bytes_per_s: LinkBytesPerS | None = None  # None: the GPU's NVLink, or 400 Gb/s RDMA
    # A disaggregated request's fixed hand-off beyond the KV bytes' time: None, the calibrated
    # default (planner.spec.context.kv_transfer_setup_s).
    kv_transfer_setup_s: NonNegFloat | None = None
    load_bytes_per_s: LinkBytesPerS = 2.0e9  # weight loading per GPU for a cold start
    # Autoscaling over a day (planner.sizing.autoscale).  static: the peak fleet
    # around the clock (today's sizing); reactive: each control interval sizes for
    # the load its signals see and added replicas serve after the scale-up delay;
    # predictive: provisions from the profile ahead by the delay.
    policy: Literal["static", "reactive", "predictive"] = "static"
    scale_interval_s: Annotated[float, Field(ge=MIN_SCALE_INTERVAL_S, le=DAY_S, allow_inf_nan=False)] = 600.0
    # None: engine_start_s + weight bytes per GPU / load_bytes_per_s (a cold start).
    scale_up_delay_s: Annotated[float, Field(ge=0, le=DAY_S, allow_inf_nan=False)] | None = None
    # Process start, CUDA graph capture and warm-up before weights load (assumed;
    # vLLM and SGLang take tens of seconds).
    engine_start_s: Annotated[float, Field(ge=0, le=DAY_S, allow_inf_nan=False)] = 30.0
    warm_pool_replicas: Annotated[int, Field(ge=0, le=MAX_WARM_POOL_REPLICAS)] = 0
    scale_down_delay_s: Annotated[float, Field(ge=0, le=DAY_S, allow_inf_nan=False)] = 600.0


class Cost(BaseModel):
    """Prices (None: the catalog default) and optional power."""

    model_config = _FROZEN
    usd_per_gpu_hour: Annotated[float, Field(gt=0, le=MAX_USD_PER_GPU_HOUR, allow_inf_nan=False)] | None = None
    usd_per_kwh: Annotated[float, Field(gt=0, le=MAX_USD_PER_KWH, allow_inf_nan=False)] | None = None
    pue: Annotated[float, Field(ge=1, le=3, allow_inf_nan=False)] = 1.3
