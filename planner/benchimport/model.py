"""What an imported benchmark file says: its load levels and what the client measured.

A :class:`BenchRun` is one file (or one stored run): the tool that wrote it and its
version, the file's name (never a path), the model name and load the file states,
and one :class:`BenchLevel` per load point with latencies in seconds (SI) and rates
per second.  The readers (one module per tool) build it field by field with
:func:`number`, which refuses NaN, infinities, negative latencies and non-numbers
with one line naming the file and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from planner.benchimport.limits import MAX_BENCH_LEVELS, MAX_BENCH_ROWS, MAX_BENCH_TEXT_CHARS
from planner.errors import ScenarioError

__all__ = [
    "BENCH_TOOLS",
    "BenchLevel",
    "BenchRun",
    "BenchTool",
    "LatencyStats",
    "capped_list",
    "check_levels",
    "number",
    "optional_number",
    "text",
]

BenchTool = Literal["vllm", "sglang", "guidellm", "aiperf", "mlperf", "llmd", "probe"]
# The formats a file may be read as (``probe``: a Ridgeline probe run, never a file).
BENCH_TOOLS: tuple[str, ...] = ("vllm", "sglang", "guidellm", "aiperf", "mlperf", "llmd")

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class LatencyStats(BaseModel):
    """One latency's mean and percentiles, in seconds (None: the file does not give it)."""

    model_config = _FROZEN
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None

    @property
    def typical(self) -> float | None:
        """The median when given, else the mean: what a row compares."""
        return self.p50 if self.p50 is not None else self.mean

    @property
    def empty(self) -> bool:
        return self.mean is None and self.p50 is None


class BenchLevel(BaseModel):
    """One load point of a run: closed loop at ``concurrency`` or open loop at ``request_rate``."""

    model_config = _FROZEN
    concurrency: float | None = None
    request_rate: float | None = None
    prompt_tokens: float | None = None  # mean input length
    output_tokens: float | None = None  # mean output length
    completed: int | None = None
    failed: int | None = None
    duration_s: float | None = None
    ttft_s: LatencyStats = LatencyStats()
    tpot_s: LatencyStats = LatencyStats()
    itl_s: LatencyStats = LatencyStats()
    e2e_s: LatencyStats = LatencyStats()
    output_tok_s: float | None = None
    input_tok_s: float | None = None
    req_s: float | None = None

    def label(self) -> str:
        if self.concurrency is not None:
            return f"concurrency {self.concurrency:g}"
        if self.request_rate is not None:
            return f"rate {self.request_rate:g} req/s"
        return "max throughput"


class BenchRun(BaseModel):
    """One imported file (or stored run): where it came from and its levels."""

    model_config = _FROZEN
    tool: BenchTool
    tool_version: str | None = None
    source_file: str  # the file's name, never a path
    model: str | None = None  # the model name the file states
    levels: tuple[BenchLevel, ...]
    notes: tuple[str, ...] = ()
    run_id: str | None = None  # a stored or probe run's id

    @property
    def label(self) -> str:
        """How calibration names the run: a probe run's id, else ``tool:file``."""
        return self.run_id if self.run_id else f"{self.tool}:{self.source_file}"


def _shown(value: Any) -> str:
    t = repr(value)
    return t if len(t) <= 60 else t[:57] + "..."


def optional_number(data: Mapping[str, Any], key: str, where: str, *, scale: float = 1.0,
                    positive: bool = False, allow_inf: bool = False) -> float | None:
    """``data[key] × scale`` as a float, or None when absent or null.  NaN, an infinity
    (unless ``allow_inf``: then None), a negative value (or zero with ``positive``), a
    bool or a non-number raise one line naming ``where.key``."""
    if key not in data or data[key] is None:
        return None
    raw = data[key]
    if isinstance(raw, str) and raw.strip().lower() in {"inf", "infinity"} and allow_inf:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ScenarioError(f"{where}.{key}: expected a number, got {_shown(raw)}")
    value = float(raw)
    if math.isnan(value):
        raise ScenarioError(f"{where}.{key}: NaN is not a measurement")
    if math.isinf(value):
        if allow_inf:
            return None
        raise ScenarioError(f"{where}.{key}: an infinite value is not a measurement")
    if value < 0 or (positive and value == 0):
        kind = "negative" if value < 0 else "zero"
        raise ScenarioError(f"{where}.{key}: {kind} value {value:g} is not a valid "
                            f"{'latency' if 'ms' in key or '_s' in key or 'latency' in key else 'measurement'}")
    return value * scale


def number(data: Mapping[str, Any], key: str, where: str, *, scale: float = 1.0, positive: bool = False) -> float:
    """:func:`optional_number`, but a missing field is an error too."""
    value = optional_number(data, key, where, scale=scale, positive=positive)
    if value is None:
        raise ScenarioError(f"{where}.{key}: missing")
    return value


def text(data: Mapping[str, Any], key: str, where: str) -> str | None:
    """A short text field (a model name, a version): None when absent; control
    characters and over-long values refused."""
    raw = data.get(key)
    if raw is None:
        return None
    if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
        raise ScenarioError(f"{where}.{key}: expected text, got {_shown(raw)}")
    value = str(raw).strip()
    if len(value) > MAX_BENCH_TEXT_CHARS:
        raise ScenarioError(f"{where}.{key}: {len(value):,} characters is over the limit of {MAX_BENCH_TEXT_CHARS}")
    if not value.isprintable():
        raise ScenarioError(f"{where}.{key}: holds control characters")
    return value or None


def capped_list(data: Mapping[str, Any], key: str, where: str, *, cap: int = MAX_BENCH_ROWS) -> list[Any] | None:
    """A list field held to ``cap`` entries (None when absent)."""
    raw = data.get(key)
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ScenarioError(f"{where}.{key}: expected a list, got {type(raw).__name__}")
    if len(raw) > cap:
        raise ScenarioError(f"{where}.{key}: {len(raw):,} entries is over the limit of {cap:,}")
    return raw


def check_levels(levels: list[BenchLevel], source: str) -> tuple[BenchLevel, ...]:
    """At least one level, at most MAX_BENCH_LEVELS."""
    if not levels:
        raise ScenarioError(f"{source}: no benchmark result in the file")
    if len(levels) > MAX_BENCH_LEVELS:
        raise ScenarioError(f"{source}: {len(levels):,} load levels is over the limit of {MAX_BENCH_LEVELS:,}")
    return tuple(levels)
