"""One streaming request against an OpenAI-compatible endpoint, timed on a
monotonic clock (``time.perf_counter_ns``).

Per request the raw timestamps are kept: scheduled (when the load pattern
wanted it sent, so client-side queueing counts), sent, every SSE chunk with the
tokens it carried where known, the first token-bearing chunk (an empty
role-only chunk does not count), the last chunk, and the usage block.

Failures are records, not exceptions: ``error`` names the reason
(``http_500``, ``http_429``, ``timeout``, ``connection``, ``stream_cut``,
``malformed_sse``, ``cancelled``) and whatever arrived before it is kept.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

__all__ = ["Endpoint", "RequestRecord", "endpoint_path", "make_client", "stream_request"]

Endpoint = Literal["completions", "chat"]
KEEPALIVE_S = 3.0
STALE_RETRIES = 2


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


def make_client(*, max_connections: int, connect_timeout_s: float, read_timeout_s: float) -> aiohttp.ClientSession:
    """The one shared connection pool: explicit limits and timeouts.

    aiohttp rather than httpx: measured on this project's 2-core machines, 64
    concurrent streams through httpx's pool queued for seconds (TTFT 1.4-3.5 s
    against a 50 ms server) where aiohttp kept up (see bench/probe_client.py).
    """
    return aiohttp.ClientSession(
        # Idle pooled connections are dropped after 3 s, before the 5 s keep-alive
        # timeout of uvicorn (vLLM, SGLang) and cpp-httplib (llama.cpp) closes them.
        connector=aiohttp.TCPConnector(limit=max_connections, limit_per_host=max_connections,
                                       keepalive_timeout=KEEPALIVE_S),
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
    pass


def _ingest(rec: RequestRecord, payload: bytes, now_ns: int) -> bool:
    """Handle one ``data:`` payload; True at ``[DONE]``."""
    body = payload.strip()
    if body == b"[DONE]":
        return True
    try:
        data = json.loads(body)
    except ValueError:
        raise _MalformedSse(f"not JSON: {body[:60]!r}") from None
    if not isinstance(data, dict):
        raise _MalformedSse("chunk is not a JSON object")
    if isinstance(data.get("error"), dict | str):
        raise _MalformedSse(f"error event: {str(data['error'])[:120]}")
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
    endpoint's failures (cancellation is recorded and re-raised).

    A pooled keep-alive connection the server has already closed (llama.cpp's
    HTTP server closes them after a few requests) fails before any response:
    that one case (nothing was answered) is resent, at most twice, still timed
    from the original scheduled time.
    """
    while True:
        rec.reused_connection = False
        await _attempt(client, url=url, body=body, headers=headers, rec=rec, request_timeout_s=request_timeout_s)
        stale = rec.error == "connection" and rec.reused_connection and rec.status is None and not rec.chunk_ns
        if not stale or rec.retries >= STALE_RETRIES:
            return rec
        rec.retries += 1
        rec.error, rec.error_detail, rec.done_ns = None, "", 0


async def _attempt(
    client: aiohttp.ClientSession,
    *,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    rec: RequestRecord,
    request_timeout_s: float,
) -> RequestRecord:
    done = False
    try:
        async with asyncio.timeout(request_timeout_s):
            rec.sent_ns = time.perf_counter_ns()
            async with client.post(url, json=body, headers=headers, allow_redirects=False,
                                   trace_request_ctx=rec) as resp:
                rec.status = resp.status
                if resp.status != 200:
                    rec.error = f"http_{resp.status}"
                    rec.error_detail = (await resp.read())[:200].decode("utf-8", "replace")
                    return rec
                buf = b""
                async for raw in resp.content.iter_any():
                    now = time.perf_counter_ns()
                    buf += raw
                    while True:
                        cut = buf.find(b"\n\n")
                        if cut < 0:
                            break
                        event, buf = buf[:cut], buf[cut + 2:]
                        for line in event.replace(b"\r\n", b"\n").split(b"\n"):
                            if line.startswith(b"data:"):
                                if _ingest(rec, line[5:], now):
                                    done = True
                            elif line and not line.startswith((b":", b"event:", b"id:", b"retry:")):
                                raise _MalformedSse(f"not an SSE line: {line[:60]!r}")
                if buf.strip():
                    raise _MalformedSse(f"unterminated event: {buf[:60]!r}")
        if not done and rec.finish_reason is None:
            rec.error = "stream_cut"
            rec.error_detail = "stream ended without [DONE] or finish_reason"
    except _MalformedSse as exc:
        rec.error, rec.error_detail = "malformed_sse", str(exc)
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        rec.error, rec.error_detail = "timeout", type(exc).__name__
    except (aiohttp.ClientError, OSError) as exc:
        rec.error = "stream_cut" if rec.chunk_ns else "connection"
        rec.error_detail = f"{type(exc).__name__}: {str(exc)[:160]}"
    except asyncio.CancelledError:
        rec.error, rec.error_detail = "cancelled", "run cancelled"
        rec.done_ns = time.perf_counter_ns()
        raise
    finally:
        rec.done_ns = rec.done_ns or time.perf_counter_ns()
    return rec
