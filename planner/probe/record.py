"""What one request left behind: its raw clock readings and what the stream said.

A plain slotted dataclass (one per request, thousands per level, pickled from
a worker process to the parent): nanoseconds on ``time.perf_counter_ns``
(CLOCK_MONOTONIC on Linux, shared by every process of the machine).

Its size does not grow with the stream: the events are folded in as they are
parsed (counts, first/last times, the exact count and sum of the inter-token
gaps) and the gaps themselves are kept in a bounded sample of at most
:data:`MAX_ITL_SAMPLES_PER_REQUEST` (every gap while they fit; past that, every
``itl_stride``-th gap, the stride doubling each time the sample fills, so the
kept gaps stay evenly spread over the whole stream).  Only the times of events
not yet parsed wait in ``chunk_ns`` (at most a parse batch, planner.probe.sse).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_ITL_SAMPLES_PER_REQUEST", "RequestRecord"]

# Inter-token gaps one request keeps (8 bytes each): a 100,000-token stream (the most the
# settings ask) keeps 512 of its gaps, 4 KB, instead of 100,000 timestamps (about 10 MB
# with its per-chunk token counts as Python lists).  A stream of up to 513 token chunks
# keeps every gap, so its level's ITL percentiles are exact (planner.probe.summary).
MAX_ITL_SAMPLES_PER_REQUEST = 512


def _gaps() -> array[int]:
    return array("q")


@dataclass(slots=True)
class RequestRecord:
    """Raw observations of one request (nanoseconds on ``perf_counter_ns``)."""

    index: int
    warmup: bool
    scheduled_ns: int
    sent_ns: int = 0  # request written to the socket (set before the call, refined at the write)
    done_ns: int = 0
    chunk_ns: list[int] = field(default_factory=list)  # the times of the SSE data events not yet parsed
    chunks: int = 0  # SSE data chunks parsed
    token_chunks: int = 0  # of them, text-bearing (one token each)
    last_chunk_ns: int | None = None  # the last parsed data chunk
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    itl_count: int = 0  # gaps between consecutive token-bearing chunks (token_chunks − 1)
    itl_sum_ns: int = 0  # their exact sum
    itl_kept_ns: array[int] = field(default_factory=_gaps)  # every itl_stride-th gap, at most MAX_ITL_SAMPLES_PER_REQUEST
    itl_stride: int = 1
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    status: int | None = None
    reused_connection: bool = False
    retries: int = 0  # resends after a pooled keep-alive connection turned out closed
    error: str | None = None
    error_detail: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def events(self) -> int:
        """SSE data events received (parsed or waiting)."""
        return self.chunks + len(self.chunk_ns)

    def add_chunk(self, now: int, *, token: bool) -> None:
        """Fold one parsed data chunk, read at ``now``, into the record."""
        self.chunks += 1
        self.last_chunk_ns = now
        if not token:
            return
        self.token_chunks += 1
        last = self.last_token_ns
        self.last_token_ns = now
        if last is None:
            self.first_token_ns = now
            return
        gap = now - last
        self.itl_sum_ns += gap
        if self.itl_count % self.itl_stride == 0:
            kept = self.itl_kept_ns
            kept.append(gap)
            if len(kept) > MAX_ITL_SAMPLES_PER_REQUEST:  # full: keep every other one, twice the stride
                self.itl_kept_ns = kept[::2]
                self.itl_stride *= 2
        self.itl_count += 1

    @property
    def output_tokens(self) -> int:
        """Server's usage.completion_tokens when given, else token-bearing chunks."""
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return int(self.usage["completion_tokens"])
        return self.token_chunks

    @property
    def prompt_tokens(self) -> int | None:
        if self.usage and isinstance(self.usage.get("prompt_tokens"), int):
            return int(self.usage["prompt_tokens"])
        return None

    @property
    def token_count_source(self) -> str:
        return "usage" if self.usage and isinstance(self.usage.get("completion_tokens"), int) else "chunks"
