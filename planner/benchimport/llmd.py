"""llm-d's Benchmark Report v0.2 (JSON or YAML), which llm-d-benchmark writes from the
native output of inference-perf, vLLM's benchmark, GuideLLM and the others it drives.

Fields read (llm-d/llm-d-benchmark ``benchmark_report/br_v0_2_example.yaml`` and
``schema_v0_2.py``, commit 318f5197 / 093eecc2): ``version`` (``0.2``…),
``scenario.stack[].standardized`` (``model.name``, ``accelerator.{model,count,
parallelism.tp}``, ``tool``/``tool_version`` of the engine), ``scenario.load.standardized``
(``tool``, ``tool_version``, ``rate_qps``, ``concurrency``, ``input_seq_len.value``,
``output_seq_len.value``) and ``results.request_performance.aggregate``
(``requests.{total,failures,input_length,output_length}``, ``throughput.{output_token_rate,
input_token_rate,requests_rate}.mean``, ``latency.{time_to_first_token,
time_per_output_token,inter_token_latency,request_latency}`` with ``units`` s, ms,
s/token or ms/token).  YAML anchors and aliases are refused (an alias bomb).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from planner.benchimport.limits import Deadline
from planner.benchimport.model import BenchLevel, BenchRun, LatencyStats, check_levels, optional_number, text
from planner.errors import ScenarioError
from planner.io.jsonfile import MAX_JSON_DEPTH, parse_json

__all__ = ["read_llmd", "load_yaml_or_json"]

_UNITS = {"s": 1.0, "s/token": 1.0, "ms": 1e-3, "ms/token": 1e-3, "us": 1e-6, "ns": 1e-9}


def load_yaml_or_json(content: str, source: str) -> Any:
    """JSON when it parses as JSON, else safe YAML without anchors or aliases, held to the
    JSON depth limit."""
    head = content.lstrip()[:1]
    if head in {"{", "["}:
        return parse_json(content, source=source)
    depth = 0
    try:
        for event in yaml.parse(content, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise ScenarioError(f"{source}: YAML anchors and aliases are not accepted")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_JSON_DEPTH:
                    raise ScenarioError(f"{source}: YAML nested deeper than {MAX_JSON_DEPTH} levels")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        return yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML or JSON ({str(exc).splitlines()[0][:100]})") from None


def _obj(d: Any, key: str, where: str) -> Mapping[str, Any]:
    v = d.get(key) if isinstance(d, Mapping) else None
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ScenarioError(f"{where}.{key}: expected an object")
    return v


def _latency(lat: Mapping[str, Any], key: str, where: str) -> LatencyStats:
    d = _obj(lat, key, where)
    if not d:
        return LatencyStats()
    unit = str(d.get("units", "s"))
    if unit not in _UNITS:
        raise ScenarioError(f"{where}.{key}.units: unknown unit '{unit[:20]}' (known: {', '.join(_UNITS)})")
    w = f"{where}.{key}"
    return LatencyStats(**{k: optional_number(d, k, w, scale=_UNITS[unit]) for k in ("mean", "p50", "p90", "p99")})


def read_llmd(content: str, source: str, deadline: Deadline) -> BenchRun:
    data = load_yaml_or_json(content, source)
    deadline.check()
    if not isinstance(data, Mapping) or not str(data.get("version", "")).startswith("0.2"):
        raise ScenarioError(f"{source}: version: expected an llm-d Benchmark Report 0.2")
    scen = _obj(data, "scenario", source)
    load = _obj(_obj(scen, "load", f"{source}.scenario"), "standardized", f"{source}.scenario.load")
    lw = f"{source}.scenario.load.standardized"
    model = None
    notes = []
    stack = scen.get("stack") or []
    if not isinstance(stack, list):
        raise ScenarioError(f"{source}.scenario.stack: expected a list")
    for i, comp in enumerate(stack[:64]):
        std = _obj(comp, "standardized", f"{source}.scenario.stack[{i}]")
        name = text(_obj(std, "model", f"{source}.scenario.stack[{i}]"), "name", f"{source}.scenario.stack[{i}].model")
        if name:
            model = model or name
        acc = _obj(std, "accelerator", f"{source}.scenario.stack[{i}]")
        if acc:
            tp = _obj(acc, "parallelism", f"{source}.scenario.stack[{i}].accelerator").get("tp")
            notes.append(f"stack {i} ({std.get('role', 'aggregate')}): {acc.get('count', '?')} × "
                         f"{acc.get('model', '?')}, tp {tp}")
    agg = _obj(_obj(_obj(data, "results", source), "request_performance", f"{source}.results"), "aggregate",
               f"{source}.results.request_performance")
    aw = f"{source}.results.request_performance.aggregate"
    if not agg:
        raise ScenarioError(f"{aw}: missing: the report holds no aggregate results")
    req = _obj(agg, "requests", aw)
    thr = _obj(agg, "throughput", aw)
    lat = _obj(agg, "latency", aw)
    total = optional_number(req, "total", f"{aw}.requests")
    failures = optional_number(req, "failures", f"{aw}.requests")

    def mean_of(d: Mapping[str, Any], key: str, where: str) -> float | None:
        return optional_number(_obj(d, key, where), "mean", f"{where}.{key}")

    isl = mean_of(req, "input_length", f"{aw}.requests") or optional_number(
        _obj(load, "input_seq_len", lw), "value", f"{lw}.input_seq_len", positive=True)
    osl = mean_of(req, "output_length", f"{aw}.requests") or optional_number(
        _obj(load, "output_seq_len", lw), "value", f"{lw}.output_seq_len", positive=True)
    level = BenchLevel(
        concurrency=optional_number(load, "concurrency", lw, positive=True, allow_inf=True),
        request_rate=optional_number(load, "rate_qps", lw, positive=True, allow_inf=True),
        prompt_tokens=isl, output_tokens=osl,
        completed=int(total - (failures or 0)) if total is not None else None,
        failed=int(failures) if failures is not None else None,
        ttft_s=_latency(lat, "time_to_first_token", f"{aw}.latency"),
        tpot_s=_latency(lat, "time_per_output_token", f"{aw}.latency"),
        itl_s=_latency(lat, "inter_token_latency", f"{aw}.latency"),
        e2e_s=_latency(lat, "request_latency", f"{aw}.latency"),
        output_tok_s=mean_of(thr, "output_token_rate", f"{aw}.throughput"),
        input_tok_s=mean_of(thr, "input_token_rate", f"{aw}.throughput"),
        req_s=mean_of(thr, "requests_rate", f"{aw}.throughput"),
    )
    tool = text(load, "tool", lw)
    version = text(load, "tool_version", lw)
    notes.insert(0, f"load generator: {tool or '(not stated)'} {version or ''}".rstrip())
    return BenchRun(tool="llmd", tool_version=f"{tool} {version}".strip() if tool else version,
                    source_file=source, model=model, levels=check_levels([level], source), notes=tuple(notes))
