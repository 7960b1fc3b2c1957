"""vLLM's ``vllm bench serve --save-result`` JSON (and ``benchmarks/benchmark_serving.py``).

Fields read (vllm-project/vllm ``vllm/benchmarks/serve.py``, commit 009e6d4a, the
``result`` dict of ``benchmark()`` and ``result_json`` of ``main()``): ``model_id``,
``request_rate`` (a number, or ``"inf"``), ``max_concurrency`` (null: none),
``num_prompts``, ``duration`` (s), ``completed``, ``failed``, ``total_input_tokens``,
``total_output_tokens``, ``request_throughput``, ``output_throughput``,
``total_token_throughput``, ``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms`` and, with
``--save-detailed``, the per-request ``input_lens``, ``output_lens``, ``ttfts`` (s) and
``itls`` (s, a list per request).  The file states no vLLM version; a ``--metadata``
key ``version`` (or ``vllm_version``) is kept when present.

SGLang's ``bench_serving`` writes the same fields (its reader, :mod:`.sglang`, reuses
:func:`serve_level`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from planner.benchimport.limits import MAX_BENCH_ROWS, Deadline
from planner.benchimport.model import (
    BenchLevel,
    BenchRun,
    LatencyStats,
    capped_list,
    check_levels,
    optional_number,
    text,
)
from planner.errors import ScenarioError
from planner.io.jsonfile import parse_json

__all__ = ["read_vllm", "serve_level"]

_MS = 1e-3


def _latency(d: Mapping[str, Any], name: str, where: str) -> LatencyStats:
    """``mean_/median_/p50_/p90_/p99_{name}_ms`` in seconds."""
    def get(prefix: str) -> float | None:
        return optional_number(d, f"{prefix}_{name}_ms", where, scale=_MS)
    return LatencyStats(mean=get("mean"), p50=get("median") if get("median") is not None else get("p50"),
                        p90=get("p90"), p99=get("p99"))


def _check_per_request(d: Mapping[str, Any], where: str, deadline: Deadline) -> float | None:
    """Validate the per-request arrays (capped; NaN or negative latencies refused);
    returns the mean input length of the successful requests when ``input_lens`` is given."""
    for key in ("ttfts", "latencies"):
        values = capped_list(d, key, where)
        for i, v in enumerate(values or ()):
            if i % 4096 == 0:
                deadline.check()
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0 or math.isinf(v):
                raise ScenarioError(f"{where}.{key}[{i}]: {v!r} is not a latency (a finite, non-negative number)")
    itls = capped_list(d, "itls", where)
    total = 0
    for i, row in enumerate(itls or ()):
        if not isinstance(row, list):
            raise ScenarioError(f"{where}.itls[{i}]: expected a list of gaps")
        total += len(row)
        if total > MAX_BENCH_ROWS * 100:
            raise ScenarioError(f"{where}.itls: over {MAX_BENCH_ROWS * 100:,} gaps in all")
        if i % 256 == 0:
            deadline.check()
        for v in row:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0 or math.isinf(v):
                raise ScenarioError(f"{where}.itls[{i}]: {v!r} is not a latency (a finite, non-negative number)")
    lens = capped_list(d, "input_lens", where)
    if not lens:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in lens):
        raise ScenarioError(f"{where}.input_lens: expected non-negative integers")
    return float(sum(lens)) / len(lens)


def serve_level(d: Mapping[str, Any], where: str, deadline: Deadline, *,
                e2e_names: tuple[str, ...] = ("e2el",)) -> BenchLevel:
    """One ``--save-result`` dict as a load level (SGLang's lines have the same fields)."""
    rate = optional_number(d, "request_rate", where, positive=True, allow_inf=True)
    conc = optional_number(d, "max_concurrency", where, positive=True)
    completed = optional_number(d, "completed", where)
    failed = optional_number(d, "failed", where)
    if completed is not None and completed == 0:
        raise ScenarioError(f"{where}.completed: 0 requests completed: nothing was measured")
    lens_mean = _check_per_request(d, where, deadline)
    n = completed or None
    total_in = optional_number(d, "total_input_tokens", where)
    total_out = optional_number(d, "total_output_tokens", where)
    e2e = LatencyStats()
    for name in e2e_names:
        e2e = _latency(d, name, where)
        if not e2e.empty:
            break
    return BenchLevel(
        concurrency=conc, request_rate=rate,
        prompt_tokens=(total_in / n if total_in is not None and n else lens_mean),
        output_tokens=(total_out / n if total_out is not None and n else None),
        completed=int(completed) if completed is not None else None,
        failed=int(failed) if failed is not None else None,
        duration_s=optional_number(d, "duration", where, positive=True),
        ttft_s=_latency(d, "ttft", where), tpot_s=_latency(d, "tpot", where), itl_s=_latency(d, "itl", where),
        e2e_s=e2e,
        output_tok_s=optional_number(d, "output_throughput", where),
        input_tok_s=optional_number(d, "input_throughput", where),
        req_s=optional_number(d, "request_throughput", where),
    )


def read_vllm(content: str, source: str, deadline: Deadline) -> BenchRun:
    data = parse_json(content, source=source)
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a vLLM result object")
    if "completed" not in data:
        raise ScenarioError(f"{source}: completed: missing (not a vLLM --save-result file?)")
    level = serve_level(data, source, deadline)
    notes = []
    if level.concurrency is None and level.request_rate is None:
        notes.append("request_rate inf and no max_concurrency: every request was sent at once (no stated load)")
    return BenchRun(tool="vllm", tool_version=text(data, "version", source) or text(data, "vllm_version", source),
                    source_file=source, model=text(data, "model_id", source), levels=check_levels([level], source),
                    notes=tuple(notes))
