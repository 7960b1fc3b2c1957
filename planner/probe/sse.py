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
from typing import Protocol

from planner.probe.record import RequestRecord
from planner.probe.redact import clip

__all__ = [
    "MAX_SSE_LINE_BYTES",
    "MAX_STREAM_BYTES",
    "PARSE_BATCH_BYTES",
    "MalformedSse",
    "SseSplitter",
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


def _malformed(body: bytes, data: object) -> MalformedSse:
    """Why a decoded payload is not a chunk (``data`` None: it was not one JSON value)."""
    if data is None:
        return MalformedSse("not JSON", body)
    if not isinstance(data, dict):
        return MalformedSse("chunk is not a JSON object")
    return MalformedSse("error event", str(data["error"]), limit=120)


def parse_pending(rec: RequestRecord, pending: list[bytes]) -> None:
    """Parse the waiting event data into ``rec`` (their times wait in ``rec.chunk_ns``,
    one per payload) and fold each chunk into the record's counts and gap sample
    (:meth:`RequestRecord.add_chunk`); on a malformed one, it and those after it are
    dropped, so every chunk counted has its token count.

    Each payload must be one JSON object without an ``error`` member; its text
    is a completions chunk's ``choices[0].text`` or a chat chunk's
    ``choices[0].delta.content``.  One loop, no call per payload but the decoder's
    and the fold."""
    times = rec.chunk_ns
    add = rec.add_chunk
    try:
        for i, payload in enumerate(pending):
            body = payload.strip()
            try:
                text = body.decode("utf-8")
                data, end = _DECODE(text)
            except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
                raise MalformedSse("not JSON", body) from None
            if end != len(text):
                raise _malformed(body, None)
            if type(data) is not dict or isinstance(data.get("error"), (dict, str)):
                raise _malformed(body, data)
            choices = data.get("choices")
            chunk_text = finish = None
            if choices and type(choices) is list and type(ch := choices[0]) is dict:
                chunk_text = ch.get("text")
                if chunk_text is None and type(delta := ch.get("delta")) is dict:
                    chunk_text = delta.get("content")
                finish = ch.get("finish_reason")
            add(times[i], token=bool(chunk_text and type(chunk_text) is str))
            if finish:
                rec.finish_reason = str(finish)
            usage = data.get("usage")
            if type(usage) is dict:
                rec.usage = {k: v for k, v in usage.items() if isinstance(v, (int, float))}
    finally:
        pending.clear()
        times.clear()


def _line_too_long() -> SseTooLarge:
    return SseTooLarge("sse_line_too_long", f"SSE line over {MAX_SSE_LINE_BYTES} bytes without a newline")


class SseSplitter:
    """The push side of the reader: :meth:`feed` one read's bytes with the time
    it was taken, then :meth:`end` at the end of the body.  Each data line's time
    (of the read that completed its event) waits in ``rec.chunk_ns`` and its bytes
    in ``pending``, parsed in batches (and folded into the record); raises :class:`SseTooLarge` or
    :class:`MalformedSse` where the stream breaks a cap or is not SSE."""

    __slots__ = ("after_cr", "buf", "data", "data_bytes", "done", "max_events", "pending", "pending_bytes", "rec",
                 "times", "total")

    def __init__(self, rec: RequestRecord, pending: list[bytes], max_events: int) -> None:
        self.rec, self.pending, self.max_events = rec, pending, max_events
        self.times = rec.chunk_ns
        self.buf = bytearray()  # an unfinished line (a bytearray: a trickled long line is not copied quadratically)
        self.data: list[bytes] = []  # the current event's data payloads
        self.data_bytes = 0
        self.pending_bytes = 0
        self.total = 0
        self.done = False  # [DONE] came
        self.after_cr = False  # the last read ended with CR: an LF starting the next belongs to that line end

    def feed(self, raw: bytes, now: int) -> None:
        """One read's bytes, read at ``now`` (perf_counter_ns)."""
        self.total += len(raw)
        if self.total > MAX_STREAM_BYTES:
            raise SseTooLarge("stream_too_large", f"stream over {MAX_STREAM_BYTES} bytes")
        buf = self.buf
        if (not buf and not self.data and not self.after_cr and raw.startswith(b"data:") and raw.endswith(b"\n\n")
                and raw.count(b"\n") == 2 and b"\r" not in raw and len(raw) - 2 <= MAX_SSE_LINE_BYTES):
            # the common read: exactly one whole one-line event (no copy but the payload's)
            self._event_end((raw[5:-2],), now)
            return
        if self.after_cr:
            self.after_cr = False
            if raw[:1] == b"\n":
                raw = raw[1:]
        if b"\r" in raw:  # CRLF and lone CR become LF (the common LF-only stream never copies)
            self.after_cr = raw[-1] == 13  # b"\r"
            raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in raw:
            buf += raw
            if len(buf) > MAX_SSE_LINE_BYTES:
                raise _line_too_long()
            return
        if buf:
            buf += raw
            lines = bytes(buf).split(b"\n")
            buf.clear()
        else:
            lines = raw.split(b"\n")
        if rest := lines.pop():  # the unfinished line (none when the read ends an event: no allocation)
            buf += rest
        data = self.data
        for line in lines:
            if not line:  # a blank line ends the event
                if data:
                    self._event_end(data, now)
                    data.clear()  # its payloads are in `pending`: the list is reused, not replaced
                    self.data_bytes = 0
            elif line.startswith(b"data:"):
                data.append(line[5:])
                self.data_bytes += len(line)
                if self.data_bytes > MAX_SSE_LINE_BYTES:
                    raise SseTooLarge("sse_line_too_long", f"SSE event over {MAX_SSE_LINE_BYTES} bytes")
            elif line[0] != 58 and not line.startswith(_IGNORED_FIELDS):  # 58: b":", a comment
                parse_pending(self.rec, self.pending)  # what came before this line is the server's first fault
                raise MalformedSse("not an SSE line", line)
        if len(buf) > MAX_SSE_LINE_BYTES:
            raise _line_too_long()

    def _event_end(self, data: list[bytes] | tuple[bytes], now: int) -> None:
        times, pending = self.times, self.pending
        for payload in data:
            if b"[DONE]" in payload and payload.strip() == b"[DONE]":
                self.done = True
            else:
                times.append(now)
                pending.append(payload)
                self.pending_bytes += len(payload)
        if self.rec.events > self.max_events:
            raise SseTooLarge("stream_too_large", f"more than {self.max_events} events for "
                              f"{(self.max_events - STREAM_EVENTS_SLACK) // STREAM_EVENTS_PER_TOKEN} tokens")
        if self.pending_bytes > PARSE_BATCH_BYTES:
            parse_pending(self.rec, self.pending)
            self.pending_bytes = 0

    def end(self) -> bool:
        """The body ended: parse what waits; True once ``[DONE]`` came."""
        parse_pending(self.rec, self.pending)
        if self.buf.strip() or self.data:
            raise MalformedSse("unterminated event", bytes(self.buf) or self.data[0])
        return self.done


async def read_events(content: _Reader, rec: RequestRecord, pending: list[bytes], max_events: int) -> bool:
    """Split an SSE stream pulled from ``content`` (``readany``) into events
    within the caps (:class:`SseSplitter`); True once ``[DONE]`` came."""
    splitter = SseSplitter(rec, pending, max_events)
    readany = content.readany
    feed = splitter.feed
    while True:
        raw = await readany()
        now = time.perf_counter_ns()  # the clock first: everything below is this read's, not the server's
        if not raw:
            break
        feed(raw, now)
    return splitter.end()
