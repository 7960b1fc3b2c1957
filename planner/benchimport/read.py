"""Read a benchmark file (a named file or uploaded bytes): refuse it by size before
reading, tell its format (``--tool auto``), and hand it to that tool's reader under
the time budget.  Every failure is one :class:`~planner.errors.ScenarioError` line
naming the file and the problem."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from planner.benchimport.aiperf import read_aiperf
from planner.benchimport.guidellm import read_guidellm
from planner.benchimport.limits import MAX_BENCH_FILE_BYTES, MAX_BENCH_FILES, Deadline
from planner.benchimport.llmd import read_llmd
from planner.benchimport.mlperf import read_mlperf
from planner.benchimport.model import BENCH_TOOLS, BenchRun
from planner.benchimport.sglang import read_sglang
from planner.benchimport.vllm import read_vllm
from planner.errors import ScenarioError
from planner.io.jsonfile import parse_json, read_text_file

__all__ = ["READERS", "TOOL_CHOICES", "detect_tool", "parse_bench", "read_bench_file", "read_bench_files"]

Reader = Callable[[str, str, Deadline], BenchRun]
READERS: dict[str, Reader] = {"vllm": read_vllm, "sglang": read_sglang, "guidellm": read_guidellm,
                              "aiperf": read_aiperf, "mlperf": read_mlperf, "llmd": read_llmd}
TOOL_CHOICES: tuple[str, ...] = ("auto", *BENCH_TOOLS)
_SNIFF_CHARS = 4096


def _safe_name(name: str) -> str:
    """The file's own name (never a path), printable and short."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip() or "upload"
    base = "".join(c if c.isprintable() else "?" for c in base)
    return base[:120]


def detect_tool(content: str, name: str) -> str:
    """The format of ``content`` from its name and first characters, else an error saying
    to give ``--tool``."""
    head = content.lstrip()[:_SNIFF_CHARS]
    if name.endswith("mlperf_log_summary.txt") or "MLPerf Results Summary" in head:
        return "mlperf"
    if head.startswith("{"):
        first_line = head.split("\n", 1)[0].rstrip()
        if "\n" in content.strip() and first_line.endswith("}"):
            try:  # one object per line (SGLang) versus one document over many lines
                json.loads(first_line)
                return "sglang"
            except ValueError:
                pass
        data = parse_json(content, source=name)
        keys = set(data) if isinstance(data, dict) else set()
        if "benchmarks" in keys:
            return "guidellm"
        if str(data.get("version", "")).startswith("0.2") and keys & {"results", "scenario"}:
            return "llmd"
        if "aiperf_version" in keys or keys & {"time_to_first_token", "request_latency"}:
            return "aiperf"
        if keys & {"accept_length", "random_input_len"}:
            return "sglang"
        if "completed" in keys:
            return "vllm"
    elif head.startswith("version:") or "\nversion:" in head:
        return "llmd"
    raise ScenarioError(f"{name}: cannot tell which tool wrote this file; give --tool "
                        f"({', '.join(BENCH_TOOLS)})")


def parse_bench(data: bytes | str, name: str, tool: str = "auto") -> BenchRun:
    """A file's content (an upload, read in memory) as a run; ``name`` is kept, as a name."""
    source = _safe_name(name)
    if tool not in TOOL_CHOICES:
        raise ScenarioError(f"--tool: unknown tool '{tool[:40]}' (known: {', '.join(TOOL_CHOICES)})")
    if len(data) > MAX_BENCH_FILE_BYTES:
        raise ScenarioError(f"{source}: {len(data):,} bytes is over the limit of {MAX_BENCH_FILE_BYTES:,} bytes")
    if isinstance(data, bytes):
        try:
            content = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ScenarioError(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    else:
        content = data
    deadline = Deadline(source)
    chosen = detect_tool(content, source) if tool == "auto" else tool
    return READERS[chosen](content, source, deadline)


def read_bench_file(path: str | Path, tool: str = "auto") -> BenchRun:
    """A named file: refused by size (``os.stat``) before a byte is read."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise ScenarioError(f"cannot read {p.name}: {exc.strerror or exc}") from None
    except ValueError:
        raise ScenarioError("cannot read the file: its path contains a NUL character") from None
    if stat.S_ISREG(st.st_mode) and st.st_size > MAX_BENCH_FILE_BYTES:
        raise ScenarioError(f"{_safe_name(p.name)}: {st.st_size:,} bytes is over the limit of "
                            f"{MAX_BENCH_FILE_BYTES:,} bytes")
    text = read_text_file(p, max_bytes=MAX_BENCH_FILE_BYTES)
    return parse_bench(text, p.name, tool)


def read_bench_files(paths: list[str], tool: str = "auto") -> list[BenchRun]:
    if len(paths) > MAX_BENCH_FILES:
        raise ScenarioError(f"{len(paths)} files is over the limit of {MAX_BENCH_FILES} per import")
    return [read_bench_file(p, tool) for p in paths]
