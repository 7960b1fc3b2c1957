"""MLPerf LoadGen's ``mlperf_log_summary.txt`` (LLM benchmarks: tokens/s, first-token and
per-output-token latency).

Lines are ``key : value``.  Read: ``Scenario`` (Server: an open loop at ``target_qps``
of the "Test Parameters Used" section; Offline: max throughput, no load stated;
SingleStream: one request at a time), ``Completed tokens per second`` (Server) or
``Tokens per second`` (Offline), ``Completed samples per second`` /
``Samples per second``, ``Mean First Token latency (ns)``, ``NN.NN percentile first
token latency (ns)``, ``Mean Time to Output Token (ns)``, ``NN.NN percentile time to
output token (ns)``, ``Mean latency (ns)``, ``NN.NN percentile latency (ns)``, and
``Result is``.  The summary states neither the model nor the lengths: give them
with ``--set model=... --set workload.prompt_tokens=... --set workload.output_tokens=...``.
"""

from __future__ import annotations

import re

from planner.benchimport.limits import MAX_BENCH_ROWS, Deadline
from planner.benchimport.model import BenchLevel, BenchRun, LatencyStats, check_levels, optional_number
from planner.errors import ScenarioError

__all__ = ["read_mlperf"]

_NS = 1e-9
_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")
_PCT = re.compile(r"^(\d+(?:\.\d+)?) percentile (first token latency|time to output token|latency) \(ns\)$", re.I)
_KIND = {"first token latency": "ttft", "time to output token": "tpot", "latency": "e2e"}


def _parse(content: str, source: str, deadline: Deadline) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = content.splitlines()
    if len(lines) > MAX_BENCH_ROWS:
        raise ScenarioError(f"{source}: {len(lines):,} lines is over the limit of {MAX_BENCH_ROWS:,}")
    for i, line in enumerate(lines):
        if i % 4096 == 0:
            deadline.check()
        m = _LINE.match(line)
        if m and not line.startswith("="):
            out.setdefault(m.group(1), m.group(2))
    return out


def _num(kv: dict[str, str], key: str, source: str, scale: float = 1.0) -> float | None:
    if key not in kv:
        return None
    raw = kv[key]
    try:
        value = float(raw)
    except ValueError:
        raise ScenarioError(f"{source}: '{key}': expected a number, got {raw[:40]!r}") from None
    return optional_number({key: value}, key, source, scale=scale)


def read_mlperf(content: str, source: str, deadline: Deadline) -> BenchRun:
    if "MLPerf Results Summary" not in content:
        raise ScenarioError(f"{source}: not an MLPerf LoadGen summary (no 'MLPerf Results Summary' header)")
    kv = _parse(content, source, deadline)
    scenario = kv.get("Scenario", "").strip()
    stats: dict[str, dict[str, float | None]] = {"ttft": {}, "tpot": {}, "e2e": {}}
    for key in kv:
        m = _PCT.match(key)
        if m and m.group(1) in {"50.00", "90.00", "99.00"}:
            stats[_KIND[m.group(2).lower()]][f"p{int(float(m.group(1)))}"] = _num(kv, key, source, _NS)
    stats["ttft"]["mean"] = _num(kv, "Mean First Token latency (ns)", source, _NS)
    stats["tpot"]["mean"] = _num(kv, "Mean Time to Output Token (ns)", source, _NS)
    stats["e2e"]["mean"] = _num(kv, "Mean latency (ns)", source, _NS)
    tokens = _num(kv, "Completed tokens per second", source)
    if tokens is None:
        tokens = _num(kv, "Tokens per second", source)
    samples = _num(kv, "Completed samples per second", source)
    if samples is None:
        samples = _num(kv, "Samples per second", source)
    rate = concurrency = None
    notes = [f"MLPerf scenario {scenario or '(not stated)'}; result {kv.get('Result is', '(not stated)')}"]
    if scenario == "Server":
        rate = _num(kv, "target_qps", source) or _num(kv, "Scheduled samples per second", source)
    elif scenario == "SingleStream":
        concurrency = 1.0
    elif scenario == "Offline":
        notes.append("Offline: all queries at once (max throughput; TTFT depends on the unstated queue depth)")
    else:
        raise ScenarioError(f"{source}: Scenario '{scenario[:40]}' is not one the planner models "
                            "(Server, Offline or SingleStream)")
    if tokens is None and all(v is None for v in stats["tpot"].values()):
        raise ScenarioError(f"{source}: neither tokens per second nor time to output token: not an LLM summary")
    level = BenchLevel(concurrency=concurrency, request_rate=rate, output_tok_s=tokens, req_s=samples,
                       ttft_s=LatencyStats(**stats["ttft"]), tpot_s=LatencyStats(**stats["tpot"]),
                       e2e_s=LatencyStats(**stats["e2e"]))
    return BenchRun(tool="mlperf", tool_version=None, source_file=source, model=None,
                    levels=check_levels([level], source), notes=tuple(notes))
