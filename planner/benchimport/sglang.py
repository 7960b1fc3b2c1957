"""SGLang's ``python -m sglang.bench_serving --output-file`` JSONL: one result object per line.

Fields read (sgl-project/sglang ``python/sglang/bench_serving.py``, commit 50a61368 and
later: the ``result`` dict of ``benchmark()``): ``backend``, ``request_rate``,
``max_concurrency``, ``random_input_len``/``random_output_len``, ``duration``,
``completed``, ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
``input_throughput``, ``output_throughput``, ``{mean,median,std,p99}_{ttft,tpot,itl}_ms``,
``{mean,median,std,p99}_e2e_latency_ms``; later versions add ``concurrency`` (the mean
number of requests in flight the client measured) and ``accept_length`` (speculative
decoding), and ``--output-details`` the per-request arrays of the vLLM format.  The
model name is not a field; ``model_id`` or ``model`` is kept when a line carries one.
"""

from __future__ import annotations

from planner.benchimport.limits import MAX_BENCH_ROWS, Deadline
from planner.benchimport.model import BenchLevel, BenchRun, check_levels, optional_number, text
from planner.benchimport.vllm import serve_level
from planner.errors import ScenarioError
from planner.io.jsonfile import parse_json

__all__ = ["read_sglang"]


def read_sglang(content: str, source: str, deadline: Deadline) -> BenchRun:
    levels: list[BenchLevel] = []
    notes: list[str] = []
    model = None
    count = 0
    for lineno, line in enumerate(content.splitlines(), 1):
        if not line.strip():
            continue
        count += 1
        if count > MAX_BENCH_ROWS:
            raise ScenarioError(f"{source}: more than {MAX_BENCH_ROWS:,} lines is over the limit")
        if count % 1024 == 0:
            deadline.check()
        where = f"{source} line {lineno}"
        d = parse_json(line, source=where)
        if not isinstance(d, dict):
            raise ScenarioError(f"{where}: expected a JSON object per line")
        if "completed" not in d:
            raise ScenarioError(f"{where}.completed: missing (not an SGLang bench_serving line?)")
        level = serve_level(d, where, deadline, e2e_names=("e2e_latency", "e2el"))
        mean_in_flight = optional_number(d, "concurrency", where)
        accept = optional_number(d, "accept_length", where)
        if accept is not None and accept > 1.0:
            notes.append(f"line {lineno}: accept_length {accept:.2f}: speculative decoding was on "
                         "(set speculative.* for the prediction)")
        if level.concurrency is None and level.request_rate is None and mean_in_flight:
            notes.append(f"line {lineno}: no max_concurrency or finite rate; the client measured "
                         f"{mean_in_flight:.1f} requests in flight on average")
        if level.prompt_tokens is None:
            isl = optional_number(d, "random_input_len", where, positive=True)
            osl = optional_number(d, "random_output_len", where, positive=True)
            level = level.model_copy(update={"prompt_tokens": isl, "output_tokens": level.output_tokens or osl})
        name = text(d, "model_id", where) or text(d, "model", where)
        if name and model and name != model:
            raise ScenarioError(f"{where}: model '{name}' differs from line 1's '{model}': one run per file")
        model = model or name
        levels.append(level)
    return BenchRun(tool="sglang", tool_version=None, source_file=source, model=model,
                    levels=check_levels(levels, source), notes=tuple(notes))
