"""GuideLLM's JSON report (``guidellm run --output kind=json``; GuideLLM 0.7 and later).

Fields read (the file GuideLLM 0.8.1 writes, checked against a real run in
tests/test_benchimport_real.py): ``metadata.guidellm_version``,
``config.spec.backend.model``, and per ``benchmarks[]`` entry: ``config.strategy``
(``type_`` ``synchronous``: one stream; ``concurrent``: ``streams``; ``constant``,
``poisson``, ``async``: ``rate`` req/s; ``throughput``: all at once, no stated load),
``duration`` (s), ``metrics.<name>.successful.{mean,median,percentiles.{p50,p90,p99},count}``
for ``time_to_first_token_ms``, ``inter_token_latency_ms``, ``request_latency`` (s),
``prompt_token_count``, ``output_token_count``, ``output_tokens_per_second``,
``prompt_tokens_per_second``, ``requests_per_second``, and
``scheduler_metrics.requests_made.{successful,errored}``.

GuideLLM's names differ from vLLM's: its "ITL" is (last token − first token) / (tokens − 1)
per request, vLLM's TPOT, so it is read as ``tpot_s``; its "TPOT" counts the first token's
wait too ((last − request start) / tokens) and is not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.benchimport.limits import MAX_BENCH_LEVELS, Deadline
from planner.benchimport.model import BenchLevel, BenchRun, LatencyStats, check_levels, optional_number, text
from planner.errors import ScenarioError
from planner.io.jsonfile import parse_json

__all__ = ["read_guidellm"]


def _obj(d: Any, key: str, where: str) -> Mapping[str, Any]:
    v = d.get(key) if isinstance(d, Mapping) else None
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ScenarioError(f"{where}.{key}: expected an object")
    return v


def _successful(metrics: Mapping[str, Any], name: str, where: str) -> tuple[Mapping[str, Any], str]:
    w = f"{where}.metrics.{name}.successful"
    return _obj(_obj(metrics, name, f"{where}.metrics"), "successful", f"{where}.metrics.{name}"), w


def _stats(metrics: Mapping[str, Any], name: str, where: str, scale: float) -> LatencyStats:
    d, w = _successful(metrics, name, where)
    if not d:
        return LatencyStats()
    pct = _obj(d, "percentiles", w)
    return LatencyStats(mean=optional_number(d, "mean", w, scale=scale),
                        p50=optional_number(d, "median", w, scale=scale),
                        p90=optional_number(pct, "p90", f"{w}.percentiles", scale=scale),
                        p99=optional_number(pct, "p99", f"{w}.percentiles", scale=scale))


def _mean(metrics: Mapping[str, Any], name: str, where: str) -> float | None:
    d, w = _successful(metrics, name, where)
    return optional_number(d, "mean", w) if d else None


def _load(strategy: Mapping[str, Any], where: str) -> tuple[float | None, float | None, str | None]:
    kind = str(strategy.get("type_", strategy.get("type", "")))
    if kind == "synchronous":
        return 1.0, None, None
    if kind == "concurrent":
        return optional_number(strategy, "streams", where, positive=True), None, None
    if kind in {"constant", "poisson", "async"}:
        return None, optional_number(strategy, "rate", where, positive=True, allow_inf=True), None
    if kind == "throughput":
        return None, None, "throughput strategy: every request at once (no stated load)"
    raise ScenarioError(f"{where}.type_: strategy '{kind[:40]}' is not one the planner models "
                        "(synchronous, concurrent, constant, poisson, throughput)")


def read_guidellm(content: str, source: str, deadline: Deadline) -> BenchRun:
    data = parse_json(content, source=source)
    if not isinstance(data, Mapping) or not isinstance(data.get("benchmarks"), list):
        raise ScenarioError(f"{source}: benchmarks: expected a list (not a GuideLLM report?)")
    benchmarks = data["benchmarks"]
    if len(benchmarks) > MAX_BENCH_LEVELS:
        raise ScenarioError(f"{source}.benchmarks: {len(benchmarks):,} entries is over the limit of "
                            f"{MAX_BENCH_LEVELS:,}")
    version = text(_obj(data, "metadata", source), "guidellm_version", f"{source}.metadata")
    backend = _obj(_obj(_obj(data, "config", source), "spec", f"{source}.config"), "backend", f"{source}.config.spec")
    model = text(backend, "model", f"{source}.config.spec.backend")
    levels, notes = [], []
    for i, b in enumerate(benchmarks):
        deadline.check()
        where = f"{source}.benchmarks[{i}]"
        if not isinstance(b, Mapping):
            raise ScenarioError(f"{where}: expected an object")
        metrics = _obj(b, "metrics", where)
        if not metrics:
            raise ScenarioError(f"{where}.metrics: missing")
        conc, rate, note = _load(_obj(_obj(b, "config", where), "strategy", f"{where}.config"),
                                 f"{where}.config.strategy")
        if note:
            notes.append(f"benchmark {i}: {note}")
        made = _obj(_obj(b, "scheduler_metrics", where), "requests_made", f"{where}.scheduler_metrics")
        ok = optional_number(made, "successful", f"{where}.scheduler_metrics.requests_made")
        if ok is None:
            _, w = _successful(metrics, "request_latency", where)
            ok = optional_number(_successful(metrics, "request_latency", where)[0], "count", w)
        if ok == 0:
            raise ScenarioError(f"{where}: no request succeeded: nothing was measured")
        levels.append(BenchLevel(
            concurrency=conc, request_rate=rate,
            prompt_tokens=_mean(metrics, "prompt_token_count", where),
            output_tokens=_mean(metrics, "output_token_count", where),
            completed=int(ok) if ok is not None else None,
            failed=int(v) if (v := optional_number(made, "errored", f"{where}.scheduler_metrics.requests_made"))
            is not None else None,
            duration_s=optional_number(b, "duration", where, positive=True),
            ttft_s=_stats(metrics, "time_to_first_token_ms", where, 1e-3),
            tpot_s=_stats(metrics, "inter_token_latency_ms", where, 1e-3),
            e2e_s=_stats(metrics, "request_latency", where, 1.0),
            output_tok_s=_mean(metrics, "output_tokens_per_second", where),
            input_tok_s=_mean(metrics, "prompt_tokens_per_second", where),
            req_s=_mean(metrics, "requests_per_second", where),
        ))
    return BenchRun(tool="guidellm", tool_version=version, source_file=source, model=model,
                    levels=check_levels(levels, source), notes=tuple(notes))
