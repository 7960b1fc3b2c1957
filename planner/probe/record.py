"""What one request left behind: its raw clock readings and what the stream said.

A plain slotted dataclass (one per request, thousands per level, pickled from
a worker process to the parent): nanoseconds on ``time.perf_counter_ns``
(CLOCK_MONOTONIC on Linux, shared by every process of the machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RequestRecord"]


@dataclass(slots=True)
class RequestRecord:
    """Raw observations of one request (nanoseconds on ``perf_counter_ns``)."""

    index: int
    warmup: bool
    scheduled_ns: int
    sent_ns: int = 0  # request written to the socket (set before the call, refined at the write)
    done_ns: int = 0
    chunk_ns: list[int] = field(default_factory=list)  # every SSE data chunk
    chunk_tokens: list[int] = field(default_factory=list)  # tokens per chunk (text-bearing: 1)
    first_token_ns: int | None = None
    last_token_ns: int | None = None
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
    def token_chunks(self) -> int:
        return sum(self.chunk_tokens)

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

    def token_times_ns(self) -> list[int]:
        return [t for t, n in zip(self.chunk_ns, self.chunk_tokens, strict=True) if n > 0]
