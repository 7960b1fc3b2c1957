"""AIPerf's ``profile_export_aiperf.json`` (one block per metric: ``unit``, ``avg``, ``p50``…``p99``).

Fields read (the file AIPerf 0.13.0 writes, checked against a real run in
tests/test_benchimport_real.py): ``aiperf_version``, ``time_to_first_token``,
``inter_token_latency`` (AIPerf's ITL is (last − first token) / (tokens − 1) per
request, vLLM's TPOT: read as ``tpot_s``), ``request_latency``,
``input_sequence_length``, ``output_sequence_length``, ``output_token_throughput``,
``input_token_throughput``, ``request_throughput``, ``request_count``,
``benchmark_duration``, ``error_summary``, and the load from ``input_config``
(``phases[]`` of kind ``profiling``: ``type`` ``concurrency`` with ``concurrency``, or
``request_rate`` with ``rate``/``request_rate``; older files: ``loadgen.concurrency`` /
``loadgen.request_rate``) and the model from ``input_config.models.items[0].name``.
Units are each block's own (``ms``, ``s``, ``ns``; ``tokens/sec``, ``requests/sec``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.benchimport.limits import Deadline
from planner.benchimport.model import BenchLevel, BenchRun, LatencyStats, check_levels, optional_number, text
from planner.errors import ScenarioError
from planner.io.jsonfile import parse_json

__all__ = ["read_aiperf"]

_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


def _block(data: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    v = data.get(key)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ScenarioError(f"{source}.{key}: expected an object with unit and avg")
    return v


def _latency(data: Mapping[str, Any], key: str, source: str) -> LatencyStats:
    b = _block(data, key, source)
    if not b:
        return LatencyStats()
    unit = str(b.get("unit", "ms"))
    if unit not in _TIME_UNITS:
        raise ScenarioError(f"{source}.{key}.unit: unknown time unit '{unit[:20]}' (known: {', '.join(_TIME_UNITS)})")
    w = f"{source}.{key}"
    s = _TIME_UNITS[unit]
    return LatencyStats(mean=optional_number(b, "avg", w, scale=s), p50=optional_number(b, "p50", w, scale=s),
                        p90=optional_number(b, "p90", w, scale=s), p99=optional_number(b, "p99", w, scale=s))


def _avg(data: Mapping[str, Any], key: str, source: str) -> float | None:
    b = _block(data, key, source)
    return optional_number(b, "avg", f"{source}.{key}") if b else None


def _load(cfg: Mapping[str, Any], source: str) -> tuple[float | None, float | None]:
    phases = cfg.get("phases")
    if isinstance(phases, list):
        for i, ph in enumerate(phases[:64]):
            if isinstance(ph, Mapping) and ph.get("kind", "profiling") == "profiling":
                w = f"{source}.input_config.phases[{i}]"
                kind = str(ph.get("type", ""))
                if kind == "concurrency":
                    return optional_number(ph, "concurrency", w, positive=True), None
                rate = optional_number(ph, "rate", w, positive=True) or optional_number(
                    ph, "request_rate", w, positive=True)
                return optional_number(ph, "concurrency", w, positive=True) if rate is None else None, rate
    lg = cfg.get("loadgen")
    if isinstance(lg, Mapping):
        w = f"{source}.input_config.loadgen"
        rate = optional_number(lg, "request_rate", w, positive=True)
        conc = optional_number(lg, "concurrency", w, positive=True)
        return (None, rate) if rate is not None else (conc, None)
    return None, None


def read_aiperf(content: str, source: str, deadline: Deadline) -> BenchRun:
    data = parse_json(content, source=source)
    if not isinstance(data, Mapping) or "time_to_first_token" not in data and "request_latency" not in data:
        raise ScenarioError(f"{source}: time_to_first_token: missing (not an AIPerf profile export?)")
    deadline.check()
    raw_cfg = data.get("input_config")
    cfg: Mapping[str, Any] = raw_cfg if isinstance(raw_cfg, Mapping) else {}
    conc, rate = _load(cfg, source)
    model = None
    items = (cfg.get("models") or {}).get("items") if isinstance(cfg.get("models"), Mapping) else None
    if isinstance(items, list) and items and isinstance(items[0], Mapping):
        model = text(items[0], "name", f"{source}.input_config.models.items[0]")
    count = _avg(data, "request_count", source)
    errors = data.get("error_summary") or []
    failed = sum(int(e.get("count", 0)) for e in errors if isinstance(e, Mapping)) if isinstance(errors, list) else 0
    if count is not None and count == 0:
        raise ScenarioError(f"{source}.request_count: 0 requests: nothing was measured")
    level = BenchLevel(
        concurrency=conc, request_rate=rate,
        prompt_tokens=_avg(data, "input_sequence_length", source),
        output_tokens=_avg(data, "output_sequence_length", source),
        completed=int(count) if count is not None else None, failed=failed,
        duration_s=_avg(data, "benchmark_duration", source),
        ttft_s=_latency(data, "time_to_first_token", source), tpot_s=_latency(data, "inter_token_latency", source),
        e2e_s=_latency(data, "request_latency", source),
        output_tok_s=_avg(data, "output_token_throughput", source),
        input_tok_s=_avg(data, "input_token_throughput", source),
        req_s=_avg(data, "request_throughput", source),
    )
    notes = [] if conc is not None or rate is not None else ["input_config states no concurrency or rate"]
    return BenchRun(tool="aiperf", tool_version=text(data, "aiperf_version", source), source_file=source,
                    model=model, levels=check_levels([level], source), notes=tuple(notes))
