"""What a probe does: the endpoint, the load pattern, the caps."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.errors import ProbeError, validation_message
from planner.probe.client import Endpoint, endpoint_path
from planner.probe.redact import check_url_secrets

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_DURATION_S",
    "MAX_REQUESTS",
    "MAX_URL_CHARS",
    "MAX_WORKERS",
    "ProbeSettings",
    "base_url",
    "endpoint_of_url",
    "probe_settings",
]

# Caps: a probe is a measurement, not a load generator for hire.
MAX_CONCURRENCY = 1024
MAX_REQUESTS = 100_000
MAX_DURATION_S = 3600.0
MAX_URL_CHARS = 2048  # the de-facto limit of browsers and proxies
# Processes sending the load (--workers): one process used about 20% of a core at
# 256 and 1,024 streams against the pacing server (bench/probe_client.py), so more
# are for when a level warns of client delay; 64 covers a large host's cores, each
# process costing its own interpreter (about 100 MB).
MAX_WORKERS = 64

_SUFFIXES = ("/v1/chat/completions", "/v1/completions", "/v1")


def base_url(url: str) -> str:
    """``http://h:p/v1/completions`` → ``http://h:p`` (the server root)."""
    out = url.strip().rstrip("/")
    for suffix in _SUFFIXES:
        if out.endswith(suffix):
            return out[: -len(suffix)]
    return out


def endpoint_of_url(url: str) -> Endpoint | None:
    """The endpoint a URL's path names: ``…/v1/chat/completions`` → ``"chat"``,
    ``…/v1/completions`` → ``"completions"``; None for a server root or ``/v1``."""
    out = url.strip().rstrip("/")
    if out.endswith("/v1/chat/completions"):
        return "chat"
    if out.endswith("/v1/completions"):
        return "completions"
    return None


class ProbeSettings(BaseModel):
    """A probe's inputs (no API key: that is passed to the run, never stored)."""

    # hide_input_in_errors: a refused URL (it may carry a credential) is never echoed
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)
    url: Annotated[str, Field(min_length=1, max_length=MAX_URL_CHARS)]
    model: Annotated[str, Field(min_length=1, max_length=200)]
    endpoint: Endpoint = "completions"
    concurrency: tuple[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)], ...] | None = None
    rate_req_s: Annotated[float, Field(gt=0, le=10_000, allow_inf_nan=False)] | None = None
    arrival: Literal["constant", "poisson", "gamma"] = "poisson"
    burstiness: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] = 1.0
    max_concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 256  # open-loop pool size
    requests: Annotated[int, Field(ge=1, le=MAX_REQUESTS)] = 32
    duration_s: Annotated[float, Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False)] = 120.0
    ramp_up_s: Annotated[float, Field(ge=0, le=MAX_DURATION_S)] = 0.0  # closed loop: stagger the streams' starts
    workers: Annotated[int, Field(ge=1, le=MAX_WORKERS)] = 1  # processes sending the load, each its share
    # True: the load is sent from worker processes even when there is one (a page's probe: the app's own
    # process is busy serving pages, and its event-loop lag would be in the figures)
    separate_process: bool = False
    warmup_requests: Annotated[int, Field(ge=0, le=MAX_CONCURRENCY)] | None = None  # None: one per stream
    prompt_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = 128
    output_tokens: Annotated[int, Field(ge=1, le=100_000)] = 64
    shared_prefix: bool = False
    ignore_eos: bool = False
    request_timeout_s: Annotated[float, Field(gt=0, le=MAX_DURATION_S)] = 120.0
    connect_timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0
    read_timeout_s: Annotated[float, Field(gt=0, le=MAX_DURATION_S)] = 60.0
    metrics_url: Annotated[str, Field(max_length=MAX_URL_CHARS)] | None = None  # None: <root>/metrics; "": none
    metrics_interval_s: Annotated[float, Field(gt=0, le=60)] = 0.5
    slo_ttft_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    slo_tpot_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 0.05
    stop_when_kv_full: bool = False  # end the sweep at the first level with KV usage ≥ 95% or preemptions
    seed: int = 0
    keep_samples: bool = True

    @field_validator("url", "metrics_url")
    @classmethod
    def _no_credentials(cls, v: str | None) -> str | None:
        return check_url_secrets(v) if v else v

    @model_validator(mode="after")
    def _pattern(self) -> ProbeSettings:
        if self.concurrency is not None and self.rate_req_s is not None:
            raise ValueError("give either concurrency or rate_req_s, not both")
        if self.concurrency is not None and not self.concurrency:
            raise ValueError("concurrency: give at least one level")
        return self

    @property
    def levels(self) -> tuple[int, ...]:
        return self.concurrency if self.concurrency is not None else ((1,) if self.rate_req_s is None else ())

    @property
    def request_url(self) -> str:
        return base_url(self.url) + endpoint_path(self.endpoint)

    @property
    def resolved_metrics_url(self) -> str | None:
        if self.metrics_url == "":
            return None
        return self.metrics_url or base_url(self.url) + "/metrics"


def probe_settings(**kwargs: object) -> ProbeSettings:
    """Validate settings; errors become one ProbeError naming the field.

    The endpoint follows the URL: without ``endpoint`` (or with None) a URL
    ending in ``/v1/chat/completions`` probes chat, one ending in
    ``/v1/completions`` or a server root probes completions; an ``endpoint``
    that contradicts the URL's path is refused, naming both."""
    url = kwargs.get("url")
    named = endpoint_of_url(url) if isinstance(url, str) else None
    if kwargs.get("endpoint") is None:
        kwargs = {**kwargs, "endpoint": named or "completions"}
    elif named is not None and kwargs["endpoint"] in ("chat", "completions") and kwargs["endpoint"] != named:
        asked: Endpoint = "chat" if kwargs["endpoint"] == "chat" else "completions"
        raise ProbeError(f"endpoint: the URL's path is {endpoint_path(named)} but the endpoint asked is {asked} "
                         f"({endpoint_path(asked)}); give the server root or the matching endpoint")
    try:
        return ProbeSettings.model_validate(kwargs)
    except ValidationError as exc:
        raise ProbeError(validation_message(exc)) from None
