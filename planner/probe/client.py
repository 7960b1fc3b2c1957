"""One streaming request against an OpenAI-compatible endpoint, timed on a
monotonic clock (``time.perf_counter_ns``).

Per request the raw timestamps are kept: scheduled (when the load pattern
wanted it sent, so client-side queueing counts), sent, every SSE chunk with the
tokens it carried where known, the first token-bearing chunk (an empty
role-only chunk does not count), the last chunk, and the usage block.

Failures are records, not exceptions: ``error`` names the reason
(``http_500``, ``http_429``, ``timeout``, ``connection``, ``stream_cut``,
``malformed_sse``, ``sse_line_too_long``, ``stream_too_large``, ``cancelled``,
``unexpected``) and whatever arrived before it is kept.

Every read is bounded: the whole request (resends included) by one deadline,
an error body by :data:`MAX_ERROR_BODY_BYTES`, one SSE line or event by
:data:`MAX_SSE_LINE_BYTES`, a stream by :data:`MAX_STREAM_BYTES` and by
:func:`max_stream_events` events.  The API key is redacted, by value, from
every error detail.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp.abc import AbstractResolver

from planner.probe.redact import clip, secrets_of_headers

__all__ = [
    "ERROR_DETAIL_CHARS",
    "MAX_ERROR_BODY_BYTES",
    "MAX_SSE_LINE_BYTES",
    "MAX_STREAM_BYTES",
    "Endpoint",
    "RequestRecord",
    "endpoint_path",
    "make_client",
    "max_stream_events",
    "read_capped",
    "stream_request",
]

Endpoint = Literal["completions", "chat"]
KEEPALIVE_S = 3.0
STALE_RETRIES = 2

# Caps on what an endpoint can make the probe read (a hostile one sends without end).
# An error body is read up to 4 KiB (enough for any JSON error message) and never drained.
MAX_ERROR_BODY_BYTES = 4096
# Error detail kept per failed request, characters.
ERROR_DETAIL_CHARS = 200
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


def max_stream_events(max_tokens: int) -> int:
    """The most data events a stream asked for ``max_tokens`` tokens may carry."""
    return STREAM_EVENTS_PER_TOKEN * max(int(max_tokens), 1) + STREAM_EVENTS_SLACK


def endpoint_path(endpoint: Endpoint) -> str:
    return "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"


@dataclass
class RequestRecord:
    """Raw observations of one request (nanoseconds on ``perf_counter_ns``)."""

    index: int
    warmup: bool
    scheduled_ns: int
    sent_ns: int = 0  # request written to the socket (set before the call, refined by the trace hooks)
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


async def _on_sent(_session: aiohttp.ClientSession, ctx: Any, _params: Any) -> None:
    rec = getattr(ctx, "trace_request_ctx", None)
    if isinstance(rec, RequestRecord):
        rec.sent_ns = time.perf_counter_ns()


async def _on_reuse(_session: aiohttp.ClientSession, ctx: Any, _params: Any) -> None:
    rec = getattr(ctx, "trace_request_ctx", None)
    if isinstance(rec, RequestRecord):
        rec.reused_connection = True


def _trace() -> aiohttp.TraceConfig:
    """``sent`` = when the request's headers, then its body, were written to the socket."""
    tc = aiohttp.TraceConfig()
    tc.on_connection_reuseconn.append(_on_reuse)
    tc.on_request_headers_sent.append(_on_sent)
    tc.on_request_chunk_sent.append(_on_sent)
    return tc


def make_client(*, max_connections: int, connect_timeout_s: float, read_timeout_s: float,
                resolver: AbstractResolver | None = None) -> aiohttp.ClientSession:
    """The one shared connection pool: explicit limits and timeouts.  ``resolver``
    (the run's :class:`~planner.probe.safety.PinnedResolver`) decides which
    addresses a host name connects to.

    aiohttp rather than httpx: measured on this project's 2-core machines, 64
    concurrent streams through httpx's pool queued for seconds (TTFT 1.4-3.5 s
    against a 50 ms server) where aiohttp kept up (see bench/probe_client.py).
    """
    return aiohttp.ClientSession(
        # Idle pooled connections are dropped after 3 s, before the 5 s keep-alive
        # timeout of uvicorn (vLLM, SGLang) and cpp-httplib (llama.cpp) closes them.
        connector=aiohttp.TCPConnector(limit=max_connections, limit_per_host=max_connections,
                                       keepalive_timeout=KEEPALIVE_S, resolver=resolver),
        timeout=aiohttp.ClientTimeout(total=None, connect=connect_timeout_s, sock_read=read_timeout_s),
        trust_env=False,
        auto_decompress=False,
        trace_configs=[_trace()],
    )


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


class _MalformedSse(Exception):
    """``what`` and the server's text it is about (quoted, redacted and cut when recorded)."""

    def __init__(self, what: str, quoted: bytes | str = b"", limit: int = 60) -> None:
        super().__init__(what)
        self.what, self.quoted, self.limit = what, quoted, limit

    def detail(self, secrets: list[str]) -> str:
        if not self.quoted:
            return self.what
        text = self.quoted.decode("utf-8", "replace") if isinstance(self.quoted, bytes) else self.quoted
        return f"{self.what}: {clip(text, self.limit, secrets)!r}"


class _TooLarge(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


async def read_capped(content: aiohttp.StreamReader, limit: int) -> bytes:
    """At most ``limit`` bytes of a body (fewer at its end); the rest is left unread."""
    out = bytearray()
    while len(out) < limit:
        chunk = await content.read(limit - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _ingest(rec: RequestRecord, payload: bytes, now_ns: int) -> bool:
    """Handle one ``data:`` payload; True at ``[DONE]``."""
    body = payload.strip()
    if body == b"[DONE]":
        return True
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        raise _MalformedSse("not JSON", body) from None
    if not isinstance(data, dict):
        raise _MalformedSse("chunk is not a JSON object")
    if isinstance(data.get("error"), dict | str):
        raise _MalformedSse("error event", str(data["error"]), limit=120)
    text, finish = _chunk_text(data)
    tokens = 1 if text else 0
    rec.chunk_ns.append(now_ns)
    rec.chunk_tokens.append(tokens)
    if tokens:
        if rec.first_token_ns is None:
            rec.first_token_ns = now_ns
        rec.last_token_ns = now_ns
    if finish:
        rec.finish_reason = str(finish)
    if isinstance(data.get("usage"), dict):
        rec.usage = {k: v for k, v in data["usage"].items() if isinstance(v, int | float)}
    return False


async def stream_request(
    client: aiohttp.ClientSession,
    *,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    rec: RequestRecord,
    request_timeout_s: float,
) -> RequestRecord:
    """Send one streaming request and fill ``rec``; never raises for the
    endpoint's failures or anything unexpected (cancellation is recorded and
    re-raised).  ``request_timeout_s`` bounds the whole request, resends included.

    A pooled keep-alive connection the server has already closed (llama.cpp's
    HTTP server closes them after a few requests) fails before any response:
    that one case (nothing was answered) is resent, at most twice, still timed
    from the original scheduled time.
    """
    deadline = asyncio.get_running_loop().time() + request_timeout_s
    max_events = max_stream_events(int(body.get("max_tokens") or 1))
    secrets = secrets_of_headers(headers)
    while True:
        rec.reused_connection = False
        await _attempt(client, url=url, body=body, headers=headers, rec=rec, deadline=deadline,
                       max_events=max_events, secrets=secrets)
        stale = rec.error == "connection" and rec.reused_connection and rec.status is None and not rec.chunk_ns
        if not stale or rec.retries >= STALE_RETRIES:
            return rec
        rec.retries += 1
        rec.error, rec.error_detail, rec.done_ns = None, "", 0


async def _read_events(content: aiohttp.StreamReader, rec: RequestRecord, max_events: int) -> bool:
    """Parse the SSE stream into ``rec`` line by line within the caps; True once ``[DONE]`` came."""
    buf = bytearray()  # an unfinished line (a bytearray: a trickled long line is not copied quadratically)
    data: list[bytes] = []  # the current event's data payloads
    data_bytes = 0
    total = 0
    done = False
    async for raw in content.iter_any():
        now = time.perf_counter_ns()
        total += len(raw)
        if total > MAX_STREAM_BYTES:
            raise _TooLarge("stream_too_large", f"stream over {MAX_STREAM_BYTES} bytes")
        if b"\n" not in raw:
            buf += raw
            if len(buf) > MAX_SSE_LINE_BYTES:
                raise _TooLarge("sse_line_too_long", f"SSE line over {MAX_SSE_LINE_BYTES} bytes without a newline")
            continue
        lines = (bytes(buf) + raw if buf else raw).split(b"\n")
        buf = bytearray(lines.pop())
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:  # a blank line ends the event
                for payload in data:
                    done = _ingest(rec, payload, now) or done
                data, data_bytes = [], 0
                if len(rec.chunk_ns) > max_events:
                    raise _TooLarge("stream_too_large", f"more than {max_events} events for "
                                    f"{(max_events - STREAM_EVENTS_SLACK) // STREAM_EVENTS_PER_TOKEN} tokens")
            elif line.startswith(b"data:"):
                data.append(line[5:])
                data_bytes += len(line)
                if data_bytes > MAX_SSE_LINE_BYTES:
                    raise _TooLarge("sse_line_too_long", f"SSE event over {MAX_SSE_LINE_BYTES} bytes")
            elif not line.startswith((b":", b"event:", b"id:", b"retry:")):
                raise _MalformedSse("not an SSE line", line)
        if len(buf) > MAX_SSE_LINE_BYTES:
            raise _TooLarge("sse_line_too_long", f"SSE line over {MAX_SSE_LINE_BYTES} bytes without a newline")
    if buf.strip() or data:
        raise _MalformedSse("unterminated event", bytes(buf) or data[0])
    return done


async def _attempt(
    client: aiohttp.ClientSession,
    *,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    rec: RequestRecord,
    deadline: float,
    max_events: int,
    secrets: list[str],
) -> RequestRecord:
    done = False
    try:
        async with asyncio.timeout_at(deadline):
            rec.sent_ns = time.perf_counter_ns()
            async with client.post(url, json=body, headers=headers, allow_redirects=False,
                                   trace_request_ctx=rec) as resp:
                rec.status = resp.status
                if resp.status != 200:
                    rec.error = f"http_{resp.status}"
                    # at most MAX_ERROR_BODY_BYTES; the rest is never read (the connection is dropped)
                    body_text = (await read_capped(resp.content, MAX_ERROR_BODY_BYTES)).decode("utf-8", "replace")
                    if 300 <= resp.status < 400:  # never followed: the target was not checked
                        body_text = f"redirect not followed (Location: {resp.headers.get('Location', '')[:300]}) " \
                                    + body_text
                    rec.error_detail = body_text.strip() or f"HTTP {resp.status} {resp.reason or ''}".strip()
                    return rec
                done = await _read_events(resp.content, rec, max_events)
        if not done and rec.finish_reason is None:
            rec.error = "stream_cut"
            rec.error_detail = "stream ended without [DONE] or finish_reason"
    except _TooLarge as exc:
        rec.error, rec.error_detail = exc.reason, str(exc)
    except _MalformedSse as exc:
        rec.error, rec.error_detail = "malformed_sse", exc.detail(secrets)
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        rec.error, rec.error_detail = "timeout", type(exc).__name__
    except (aiohttp.ClientError, OSError) as exc:
        rec.error = "stream_cut" if rec.chunk_ns else "connection"
        rec.error_detail = f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        rec.error, rec.error_detail = "cancelled", "run cancelled"
        rec.done_ns = time.perf_counter_ns()
        raise
    except Exception as exc:  # noqa: BLE001 - whatever an endpoint provokes is this request's failure, not a success
        rec.error, rec.error_detail = "unexpected", f"{type(exc).__name__}: {exc}"
    finally:
        rec.done_ns = rec.done_ns or time.perf_counter_ns()
        rec.error_detail = clip(rec.error_detail, ERROR_DETAIL_CHARS, secrets)
    return rec
