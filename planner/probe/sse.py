"""Server-sent events of a completions stream: split at the read, parsed in bulk.

The hot path does little per read: it takes the clock first, splits the bytes
into lines and keeps each event's data (unparsed) with the time of the read
that completed the event.  The JSON is parsed later, in bulk: at the end of the
stream, or once :data:`PARSE_BATCH_BYTES` wait (so a stream holds little
unparsed), or when the request fails (whatever arrived before is kept; a
malformed event found then is the request's reason, as it came first).

Lines end as the SSE specification says: CRLF, LF or a lone CR, wherever the
reads are cut (a CR ending one read and the LF starting the next are one line
end).  A line starting with ``:`` is a comment; ``event:``, ``id:`` and
``retry:`` lines are ignored; any other line that is not ``data:`` is not SSE.
Each ``data:`` line is one chunk (the engines send one per event).

Caps: one line or one event's data by :data:`MAX_SSE_LINE_BYTES`, the stream by
:data:`MAX_STREAM_BYTES` and by :func:`max_stream_events` events.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from planner.probe.record import RequestRecord
from planner.probe.redact import clip

__all__ = [
    "MAX_SSE_LINE_BYTES",
    "MAX_STREAM_BYTES",
    "PARSE_BATCH_BYTES",
    "MalformedSse",
    "SseTooLarge",
    "max_stream_events",
    "parse_pending",
    "read_events",
]

# One SSE line (or one event's data lines together): a streamed chunk is one token's
# JSON, a few hundred bytes from vLLM, SGLang or llama.cpp (a few KB with logprobs,
# which the probe never asks for); 64 KiB leaves two orders of magnitude.
MAX_SSE_LINE_BYTES = 64 * 1024
# One whole stream: the largest output the settings allow (100,000 tokens) at a few
# hundred bytes per chunk is about 40 MB.
MAX_STREAM_BYTES = 64 * 1024 * 1024
# Data events per stream: one per token at most on the engines above, plus the
# role, finish and usage chunks; twice the asked tokens plus this slack is the cap.
STREAM_EVENTS_PER_TOKEN = 2
STREAM_EVENTS_SLACK = 16
# Unparsed event data one stream keeps before parsing it: a whole 64-token stream
# from vLLM or llama.cpp (a few hundred bytes per chunk) is parsed in one batch at
# its end; with one event up to MAX_SSE_LINE_BYTES on top, 1,024 streams hold at
# most 74 MiB unparsed.
PARSE_BATCH_BYTES = 8 * 1024

# The C scanner without json.loads's wrappers (bytes sniffing, two regex matches);
# the caller strips the text and checks that nothing follows the value.
_DECODE = json.JSONDecoder().raw_decode
_IGNORED_FIELDS = (b"event:", b"id:", b"retry:")


def max_stream_events(max_tokens: int) -> int:
    """The most data events a stream asked for ``max_tokens`` tokens may carry."""
    return STREAM_EVENTS_PER_TOKEN * max(int(max_tokens), 1) + STREAM_EVENTS_SLACK


class MalformedSse(Exception):
    """``what`` and the server's text it is about (quoted, redacted and cut when recorded)."""

    def __init__(self, what: str, quoted: bytes | str = b"", limit: int = 60) -> None:
        super().__init__(what)
        self.what, self.quoted, self.limit = what, quoted, limit

    def detail(self, secrets: list[str]) -> str:
        if not self.quoted:
            return self.what
        text = self.quoted.decode("utf-8", "replace") if isinstance(self.quoted, bytes) else self.quoted
        return f"{self.what}: {clip(text, self.limit, secrets)!r}"


class SseTooLarge(Exception):
    """A cap was passed; ``reason`` is the request's error (``sse_line_too_long``, ``stream_too_large``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class _Reader(Protocol):
    @property
    def readany(self) -> Callable[[], Awaitable[bytes]]: ...


def _chunk_text(data: dict[str, Any]) -> tuple[str | None, str | None]:
    """(text, finish_reason) of a completions or chat chunk."""
    choices = data.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return None, None
    ch = choices[0]
    text = ch.get("text")
    if text is None and isinstance(ch.get("delta"), dict):
        text = ch["delta"].get("content")
    return (text if isinstance(text, str) else None), ch.get("finish_reason")


def _parse_payload(payload: bytes) -> dict[str, Any]:
    body = payload.strip()
    try:
        text = body.decode("utf-8")
        data, end = _DECODE(text)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        raise MalformedSse("not JSON", body) from None
    if end != len(text):
        raise MalformedSse("not JSON", body)
    if not isinstance(data, dict):
        raise MalformedSse("chunk is not a JSON object")
    if isinstance(data.get("error"), dict | str):
        raise MalformedSse("error event", str(data["error"]), limit=120)
    return data


def parse_pending(rec: RequestRecord, pending: list[bytes]) -> None:
    """Parse the waiting event data into ``rec`` (their times are already in
    ``rec.chunk_ns``); on a malformed one, the times of it and those after it are
    dropped, so every kept time has its token count."""
    tokens = rec.chunk_tokens
    times = rec.chunk_ns
    try:
        for payload in pending:
            data = _parse_payload(payload)
            text, finish = _chunk_text(data)
            if text:
                now = times[len(tokens)]
                tokens.append(1)
                if rec.first_token_ns is None:
                    rec.first_token_ns = now
                rec.last_token_ns = now
            else:
                tokens.append(0)
            if finish:
                rec.finish_reason = str(finish)
            usage = data.get("usage")
            if isinstance(usage, dict):
                rec.usage = {k: v for k, v in usage.items() if isinstance(v, int | float)}
    except MalformedSse:
        del times[len(tokens):]
        raise
    finally:
        pending.clear()


def _line_too_long() -> SseTooLarge:
    return SseTooLarge("sse_line_too_long", f"SSE line over {MAX_SSE_LINE_BYTES} bytes without a newline")


async def read_events(content: _Reader, rec: RequestRecord, pending: list[bytes], max_events: int) -> bool:
    """Split the SSE stream into events within the caps: each data line's time
    (of the read that completed its event) goes to ``rec.chunk_ns`` and its bytes
    to ``pending``, parsed in batches; True once ``[DONE]`` came."""
    buf = bytearray()  # an unfinished line (a bytearray: a trickled long line is not copied quadratically)
    data: list[bytes] = []  # the current event's data payloads
    data_bytes = 0
    pending_bytes = 0
    total = 0
    done = False
    after_cr = False  # the last read ended with CR: an LF starting this one belongs to that line end
    times = rec.chunk_ns
    readany = content.readany
    while True:
        raw = await readany()
        now = time.perf_counter_ns()  # the clock first: everything below is this read's, not the server's
        if not raw:
            break
        total += len(raw)
        if total > MAX_STREAM_BYTES:
            raise SseTooLarge("stream_too_large", f"stream over {MAX_STREAM_BYTES} bytes")
        if after_cr:
            after_cr = False
            if raw[0] == 10:  # b"\n"
                raw = raw[1:]
        if b"\r" in raw:  # CRLF and lone CR become LF (the common LF-only stream never copies)
            after_cr = raw[-1] == 13  # b"\r"
            raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in raw:
            buf += raw
            if len(buf) > MAX_SSE_LINE_BYTES:
                raise _line_too_long()
            continue
        if buf:
            buf += raw
            lines = bytes(buf).split(b"\n")
            buf.clear()
        else:
            lines = raw.split(b"\n")
        if rest := lines.pop():  # the unfinished line (none when the read ends an event: no allocation)
            buf += rest
        for line in lines:
            if not line:  # a blank line ends the event
                if data:
                    for payload in data:
                        if b"[DONE]" in payload and payload.strip() == b"[DONE]":
                            done = True
                        else:
                            times.append(now)
                            pending.append(payload)
                            pending_bytes += len(payload)
                    data.clear()  # its payloads are in `pending`: the list is reused, not replaced
                    data_bytes = 0
                    if len(times) > max_events:
                        raise SseTooLarge("stream_too_large", f"more than {max_events} events for "
                                          f"{(max_events - STREAM_EVENTS_SLACK) // STREAM_EVENTS_PER_TOKEN} tokens")
                    if pending_bytes > PARSE_BATCH_BYTES:
                        parse_pending(rec, pending)
                        pending_bytes = 0
            elif line.startswith(b"data:"):
                data.append(line[5:])
                data_bytes += len(line)
                if data_bytes > MAX_SSE_LINE_BYTES:
                    raise SseTooLarge("sse_line_too_long", f"SSE event over {MAX_SSE_LINE_BYTES} bytes")
            elif line[0] != 58 and not line.startswith(_IGNORED_FIELDS):  # 58: b":", a comment
                parse_pending(rec, pending)  # what came before this line is the server's first fault
                raise MalformedSse("not an SSE line", line)
        if len(buf) > MAX_SSE_LINE_BYTES:
            raise _line_too_long()
    parse_pending(rec, pending)
    if buf.strip() or data:
        raise MalformedSse("unterminated event", bytes(buf) or data[0])
    return done
