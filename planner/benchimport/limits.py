"""Named caps on what an imported benchmark file may hold (a stranger's file is untrusted).

Every read is refused by size before a byte is read (``os.stat`` of a named file, the
length of an uploaded buffer), parsed with the JSON depth limit of
:mod:`planner.io.jsonfile`, held to a row cap (JSONL lines, benchmark entries,
per-request arrays) and to a time budget over the whole parse.
"""

from __future__ import annotations

import time

from planner.errors import ScenarioError

__all__ = [
    "MAX_BENCH_FILE_BYTES",
    "MAX_BENCH_FILES",
    "MAX_BENCH_LEVELS",
    "MAX_BENCH_READ_S",
    "MAX_BENCH_ROWS",
    "MAX_BENCH_TEXT_CHARS",
    "Deadline",
]

# A vLLM --save-result file with per-request arrays for 10,000 requests of ~1,000
# tokens (``itls``: one float per token) is about 150 MB; the summaries the
# planner reads are a few KB.  64 MB holds a detailed run of a few thousand
# requests; a larger file is refused before it is read.
MAX_BENCH_FILE_BYTES = 64_000_000
# JSONL lines, GuideLLM benchmarks, per-request entries (ttfts, input_lens, ...):
# a sweep has tens of levels and a run thousands of requests.
MAX_BENCH_ROWS = 100_000
# Load levels one file may give (a GuideLLM sweep has ~10, a SGLang JSONL one per line).
MAX_BENCH_LEVELS = 1_000
# Files one import or calibration reads.
MAX_BENCH_FILES = 32
# Wall-clock budget for parsing one file (the read itself is bounded by size).
MAX_BENCH_READ_S = 30.0
# Longest text field kept from a file (a model name, a tool version).
MAX_BENCH_TEXT_CHARS = 200


class Deadline:
    """A parse's time budget: :meth:`check` raises once ``seconds`` have passed."""

    def __init__(self, source: str, seconds: float = MAX_BENCH_READ_S) -> None:
        self.source = source
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self._end:
            raise ScenarioError(f"{self.source}: reading took longer than the limit of {self.seconds:g} s")
