"""One streaming request against an OpenAI-compatible endpoint, timed on a
monotonic clock (``time.perf_counter_ns``).

Per request the raw timestamps are kept: scheduled (when the load pattern
wanted it sent, so client-side queueing counts), sent (the request written to
the socket), every SSE chunk with the tokens it carried where known (each timed
at the read that completed it), the first token-bearing chunk (an empty
role-only chunk does not count), the last chunk, and the usage block.

Failures are records, not exceptions: ``error`` names the reason
(``http_500``, ``http_429``, ``timeout``, ``connection``, ``stream_cut``,
``malformed_sse``, ``sse_line_too_long``, ``stream_too_large``, ``cancelled``,
``unexpected``) and whatever arrived before it is kept.

Every read is bounded: the whole request (resends included) by one deadline,
the reads by the read timeout, an error body by :data:`MAX_ERROR_BODY_BYTES`,
one SSE line or event by :data:`MAX_SSE_LINE_BYTES`, a stream by
:data:`MAX_STREAM_BYTES` and by :func:`max_stream_events` events.  The API key
is redacted, by value, from every error detail.

The streaming requests go through the probe's own lean HTTP/1.1 client
(:mod:`planner.probe.http`, :func:`make_client`); the SSE stream is split at the
read and parsed in bulk (:mod:`planner.probe.sse`).  The ``/metrics`` scrapes
use aiohttp (:func:`make_scrape_client`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from planner.probe.http import HttpFailure, StreamClient
from planner.probe.record import RequestRecord
from planner.probe.redact import clip, secrets_of_headers
from planner.probe.safety import PinnedResolver
from planner.probe.sse import MalformedSse, SseSplitter, SseTooLarge, max_stream_events, parse_pending

__all__ = [
    "ERROR_DETAIL_CHARS",
    "MAX_ERROR_BODY_BYTES",
    "Endpoint",
    "RequestRecord",
    "StreamClient",
    "endpoint_path",
    "make_client",
    "make_scrape_client",
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


def endpoint_path(endpoint: Endpoint) -> str:
    return "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"


def make_client(*, max_connections: int, connect_timeout_s: float, read_timeout_s: float,
                resolver: PinnedResolver | None = None) -> StreamClient:
    """The streaming requests' connections: at most ``max_connections`` requests
    in flight, each connection kept alive and reused by the next request.
    ``resolver`` (the run's :class:`~planner.probe.safety.PinnedResolver`) gives
    the only addresses a host name connects to; without one, only IP-literal
    hosts are connected to.

    The probe's own client rather than aiohttp's: measured on this project's
    2-core machines (bench/probe_client.py), aiohttp's per-request and per-chunk
    machinery cost most of a core at 256 streams (and httpx's pool queued 64
    streams for seconds)."""
    return StreamClient(max_connections=max_connections, connect_timeout_s=connect_timeout_s,
                        read_timeout_s=read_timeout_s, resolver=resolver, error_body_cap=MAX_ERROR_BODY_BYTES)


def make_scrape_client(*, max_connections: int, connect_timeout_s: float, read_timeout_s: float,
                       resolver: AbstractResolver | None = None) -> aiohttp.ClientSession:
    """An aiohttp pool for the ``/metrics`` scrapes: explicit limits and timeouts,
    ``resolver`` deciding which addresses a host name connects to."""
    return aiohttp.ClientSession(
        # Idle pooled connections are dropped after 3 s, before the 5 s keep-alive
        # timeout of uvicorn (vLLM, SGLang) and cpp-httplib (llama.cpp) closes them.
        connector=aiohttp.TCPConnector(limit=max_connections, limit_per_host=max_connections,
                                       keepalive_timeout=KEEPALIVE_S, resolver=resolver),
        timeout=aiohttp.ClientTimeout(total=None, connect=connect_timeout_s, sock_read=read_timeout_s),
        trust_env=False,
        auto_decompress=False,
        # no cookies: an endpoint cannot set state that later requests carry
        cookie_jar=aiohttp.DummyCookieJar(),
    )


async def read_capped(content: aiohttp.StreamReader, limit: int) -> bytes:
    """At most ``limit`` bytes of a body (fewer at its end); the rest is left unread."""
    out = bytearray()
    while len(out) < limit:
        chunk = await content.read(limit - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


async def stream_request(
    client: StreamClient,
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
        stale = rec.error == "connection" and rec.reused_connection and rec.status is None and not rec.events
        if not stale or rec.retries >= STALE_RETRIES:
            return rec
        rec.retries += 1
        rec.error, rec.error_detail, rec.done_ns = None, "", 0


def _parse_rest(rec: RequestRecord, pending: list[bytes], secrets: list[str]) -> bool:
    """After a failure: parse what arrived before it; True (and ``rec`` records it)
    when a malformed event was among it."""
    try:
        parse_pending(rec, pending)
    except MalformedSse as exc:
        rec.error, rec.error_detail = "malformed_sse", exc.detail(secrets)
        return True
    return False


async def _attempt(
    client: StreamClient,
    *,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    rec: RequestRecord,
    deadline: float,
    max_events: int,
    secrets: list[str],
) -> RequestRecord:
    pending: list[bytes] = []
    try:
        rec.sent_ns = time.perf_counter_ns()  # refined when the request is written to the socket
        splitter = SseSplitter(rec, pending, max_events)
        resp = await client.request(client.target(url, headers), body, splitter, deadline)
        if resp.status != 200:
            rec.error = f"http_{resp.status}"
            # at most MAX_ERROR_BODY_BYTES; the rest is never read (the connection is dropped)
            body_text = bytes(resp.error_body).decode("utf-8", "replace")
            if resp.status is not None and 300 <= resp.status < 400:  # never followed: the target was not checked
                body_text = f"redirect not followed (Location: {resp.location}) " + body_text
            rec.error_detail = body_text.strip() or f"HTTP {resp.status}"
            if resp.status == 404:  # the path is what was wrong (a chat server asked for completions, or a typo)
                rec.error_detail = f"POST {URL(url).path} not found (HTTP 404): {rec.error_detail}"
            return rec
        done = splitter.end()
        if not done and rec.finish_reason is None:
            rec.error = "stream_cut"
            rec.error_detail = "stream ended without [DONE] or finish_reason"
    except SseTooLarge as exc:
        if not _parse_rest(rec, pending, secrets):
            rec.error, rec.error_detail = exc.reason, str(exc)
    except MalformedSse as exc:
        rec.error, rec.error_detail = "malformed_sse", exc.detail(secrets)
    except TimeoutError as exc:
        if not _parse_rest(rec, pending, secrets):
            rec.error, rec.error_detail = "timeout", f"{type(exc).__name__}: {exc}".rstrip(": ")
    except (HttpFailure, OSError) as exc:
        if not _parse_rest(rec, pending, secrets):
            rec.error = "stream_cut" if rec.events else "connection"
            rec.error_detail = f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        _parse_rest(rec, pending, secrets)
        rec.error, rec.error_detail = "cancelled", "run cancelled"
        rec.done_ns = time.perf_counter_ns()
        raise
    except Exception as exc:  # noqa: BLE001 - whatever an endpoint provokes is this request's failure, not a success
        _parse_rest(rec, pending, secrets)
        rec.error, rec.error_detail = "unexpected", f"{type(exc).__name__}: {exc}"
    finally:
        rec.done_ns = rec.done_ns or time.perf_counter_ns()
        rec.error_detail = clip(rec.error_detail, ERROR_DETAIL_CHARS, secrets)
    return rec
