"""Engine counters from a Prometheus ``/metrics`` page, mapped to one set of series.

Parsed with ``prometheus_client.parser.text_string_to_metric_families``.  Each
engine names the same things differently; :data:`METRIC_NAMES` maps them to
``kv_usage`` (fraction 0..1), ``running``, ``waiting``, ``preemptions_total``,
``prefix_queries_total``/``prefix_hits_total`` or a ``prefix_hit_rate`` gauge,
and the prompt/generation token and engine step counters.  A series the engine does not export
is None (unavailable), never 0.  Samples with labels are summed.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict

from planner.errors import ProbeError

__all__ = ["METRIC_NAMES", "EngineDelta", "EngineSnapshot", "engine_delta", "parse_metrics"]

# series -> engine sample names, first present wins.
METRIC_NAMES: dict[str, tuple[str, ...]] = {
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                 "llamacpp:kv_cache_usage_ratio"),
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size",
                "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size",
                "llamacpp:requests_deferred"),
    "preemptions_total": ("vllm:num_preemptions_total", "sglang:num_retracted_reqs_total"),
    "prefix_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_hit_rate": ("sglang:cache_hit_rate",),
    "prompt_tokens_total": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total",
                            "llamacpp:prompt_tokens_total"),
    # prompt tokens served from the engine's cache instead (llama.cpp counts them apart)
    "prompt_cached_tokens_total": ("llamacpp:prompt_tokens_cached_total",),
    "generation_tokens_total": ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                                "llamacpp:tokens_predicted_total"),
    # forward passes the engine ran (llama.cpp: llama_decode() calls); generation tokens per
    # step is the batch the engine actually formed
    "engine_steps_total": ("llamacpp:n_decode_total",),
}
_ENGINE_PREFIX = {"vllm:": "vllm", "sglang:": "sglang", "tgi_": "tgi", "llamacpp:": "llama.cpp"}


class EngineSnapshot(BaseModel):
    """One scrape, mapped (None: the engine does not export that series)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    t_s: float = 0.0  # seconds since the run started
    engine: str | None = None
    kv_usage: float | None = None
    running: float | None = None
    waiting: float | None = None
    preemptions_total: float | None = None
    prefix_queries_total: float | None = None
    prefix_hits_total: float | None = None
    prefix_hit_rate: float | None = None
    prompt_tokens_total: float | None = None
    prompt_cached_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    engine_steps_total: float | None = None


def parse_metrics(text: str, *, t_s: float = 0.0) -> EngineSnapshot:
    """Map one ``/metrics`` page to an :class:`EngineSnapshot`."""
    sums: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
    except ValueError as exc:
        raise ProbeError(f"metrics: not a Prometheus text page ({exc})") from None
    values: dict[str, float | None] = {}
    for series, names in METRIC_NAMES.items():
        values[series] = next((sums[n] for n in names if n in sums), None)
    engine = next((e for p, e in _ENGINE_PREFIX.items() if any(n.startswith(p) for n in sums)), None)
    return EngineSnapshot(t_s=t_s, engine=engine, **values)


class EngineDelta(BaseModel):
    """What the engine reported over one load level (None: unavailable)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    engine: str | None = None
    scrapes: int = 0
    kv_usage_max: float | None = None
    running_max: float | None = None
    waiting_max: float | None = None
    preemptions: float | None = None
    prefix_hit_rate: float | None = None
    prompt_tokens: float | None = None
    prompt_cached_tokens: float | None = None
    generation_tokens: float | None = None
    engine_steps: float | None = None


def _delta(before: EngineSnapshot, after: EngineSnapshot, key: str) -> float | None:
    a, b = getattr(before, key), getattr(after, key)
    return None if a is None or b is None else b - a


def _max(samples: Sequence[EngineSnapshot], key: str) -> float | None:
    vals = [v for s in samples if (v := getattr(s, key)) is not None]
    return max(vals) if vals else None


def engine_delta(samples: Sequence[EngineSnapshot]) -> EngineDelta:
    """Counters' change from the first to the last scrape, gauges' maxima."""
    if not samples:
        return EngineDelta()
    first, last = samples[0], samples[-1]
    queries = _delta(first, last, "prefix_queries_total")
    hits = _delta(first, last, "prefix_hits_total")
    if queries and hits is not None:
        hit_rate: float | None = hits / queries
    else:
        hit_rate = _max(samples[1:] or samples, "prefix_hit_rate")
    return EngineDelta(
        engine=last.engine,
        scrapes=len(samples),
        kv_usage_max=_max(samples, "kv_usage"),
        running_max=_max(samples, "running"),
        waiting_max=_max(samples, "waiting"),
        preemptions=_delta(first, last, "preemptions_total"),
        prefix_hit_rate=hit_rate,
        prompt_tokens=_delta(first, last, "prompt_tokens_total"),
        prompt_cached_tokens=_delta(first, last, "prompt_cached_tokens_total"),
        generation_tokens=_delta(first, last, "generation_tokens_total"),
        engine_steps=_delta(first, last, "engine_steps_total"),
    )
