"""The probe's streaming HTTP/1.1 client: lean, on an ``asyncio.Protocol``.

At hundreds of streams a general-purpose client spends most of the probe's CPU
on itself (aiohttp: trace callbacks, a stream reader that wakes the request's
task on every chunk, per-request objects).  Here each connection is a protocol
whose response is parsed by llhttp (``httptools``) inside ``data_received``:
the clock is read first, at the read, and the SSE body goes straight to the
request's :class:`~planner.probe.sse.SseSplitter` (events kept raw, parsed in
bulk).  The request's task is woken once, when its response ends or fails.

What it keeps of a general client:

- connections only to addresses the run checked: a host name is looked up in
  the run's :class:`~planner.probe.safety.PinnedResolver` (no DNS query is
  made; an unchecked name is refused), an IP literal is connected to as written
  (the run checked it too);
- TLS for ``https`` URLs (``ssl.create_default_context()``: certificate and
  host name verified, ``server_hostname`` = the URL's host);
- keep-alive: an idle connection is reused (the last one released first, so a
  stream keeps its connection), dropped after :data:`KEEPALIVE_S` idle or when
  the server says ``Connection: close``; at most ``max_connections`` requests
  in flight;
- bounds: response headers by :data:`MAX_HEAD_BYTES`, reads by a read timeout
  (from the send and between reads), the connect by its timeout; an error body
  is read up to its cap and the connection then dropped, never drained;
- redirects are answered as what they are (the status), never followed;
- no cookies, no proxy from the environment, no compression asked for.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, cast

import httptools
from yarl import URL

from planner.probe.safety import PinnedResolver
from planner.probe.sse import MalformedSse, SseSplitter, SseTooLarge

__all__ = ["KEEPALIVE_S", "MAX_HEAD_BYTES", "HttpFailure", "ReadTimeout", "Response", "StreamClient", "Target"]

# Idle connections are dropped after 3 s, before the 5 s keep-alive timeout of
# uvicorn (vLLM, SGLang) and cpp-httplib (llama.cpp) closes them.
KEEPALIVE_S = 3.0
# A response's status line and headers: servers send well under 2 KiB.
MAX_HEAD_BYTES = 64 * 1024
# A timer may fire this early (uvloop's have 1 ms resolution): a check due within it counts as due.
TIMER_SLACK_S = 0.002
# Characters of a redirect's Location kept for the error detail.
LOCATION_CHARS = 300
_USER_AGENT = "ridgeline-probe"


class HttpFailure(ConnectionError):
    """The connection failed or the server's bytes were not HTTP/1.1."""


class ReadTimeout(TimeoutError):
    """Nothing was read for the read timeout."""


class _Enough(Exception):
    """An error body reached its cap: stop parsing (the connection is dropped)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a URL's requests go, worked out once per URL."""

    host: str  # as in the URL (IDNA, lower case), brackets stripped from an IPv6 literal
    port: int
    literal: bool  # an IP address, connected to as written
    tls: bool
    head: bytes  # request line and the fixed headers, up to the per-request ones

    @property
    def key(self) -> tuple[str, int, bool]:
        return self.host, self.port, self.tls


def _target(url: str, headers: dict[str, str]) -> Target:
    u = URL(url)
    if u.scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {u.scheme[:20]!r}")
    host = u.raw_host or ""
    tls = u.scheme == "https"
    port = u.port or (443 if tls else 80)
    try:  # an address as the standard writes it; anything else ("127.1", "2130706433") is a name the run pinned
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False
    authority = f"[{host}]" if ":" in host else host
    if port != (443 if tls else 80):
        authority += f":{port}"
    lines = [f"POST {u.raw_path_qs or '/'} HTTP/1.1", f"Host: {authority}", f"User-Agent: {_USER_AGENT}",
             "Accept: */*", "Content-Type: application/json"]
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0") or not name or ":" in name:
            raise ValueError(f"header {name[:40]!r}: a line break, NUL or colon cannot be sent")
        lines.append(f"{name}: {value}")
    return Target(host=host, port=port, literal=literal, tls=tls, head="\r\n".join(lines).encode("latin-1"))


class Response:
    """What a request's response said, for the caller to record."""

    __slots__ = ("complete", "error_body", "failure", "location", "status")

    def __init__(self) -> None:
        self.status: int | None = None
        self.error_body = bytearray()  # a non-200 body, up to its cap
        self.location = ""
        self.complete = False  # the body ended as HTTP frames it (or at the close, for a body read to the close)
        self.failure: BaseException | None = None


class _Conn(asyncio.Protocol):
    """One keep-alive connection; at most one request on it at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout_s: float, error_cap: int) -> None:
        self.loop, self.read_timeout_s, self.error_cap = loop, read_timeout_s, error_cap
        self.deadline = 0.0  # the request's, on the loop's clock
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[None] | None = None
        self.resp = Response()
        self.splitter: SseSplitter | None = None
        self.now = 0
        self.last_read_ns = 0
        self.head_bytes = 0
        self.head_done = False
        self.framed = False  # chunked or Content-Length (else the body ends at the close)
        self.reusable = False  # the response ended as framed and the server keeps the connection open
        self.timer: asyncio.TimerHandle | None = None
        # what a callback raised (httptools raises its own error from feed_data, the callback's as its context)
        self.raised: BaseException | None = None

    # ---- the request's side

    async def exchange(self, request: bytes, splitter: SseSplitter, deadline: float) -> Response:
        """Write ``request`` and wait until its response ends, or ``deadline``
        (loop time) or the read timeout passes; the caller reads ``splitter`` and
        the returned response.  Raises what failed it."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise HttpFailure("the connection was closed by the server before the request")
        left = deadline - self.loop.time()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        self.deadline = deadline
        self.resp, self.splitter = Response(), splitter
        self.head_bytes, self.head_done, self.framed, self.reusable = 0, False, False, False
        self.waiter = self.loop.create_future()
        # sent: the clock at the write (uvloop and asyncio write to the socket inside write() when nothing waits
        # to be sent), read just before it: the server cannot have the request earlier, whatever the scheduler
        # does to this process around the system call
        splitter.rec.sent_ns = self.last_read_ns = time.perf_counter_ns()
        self.transport.write(request)
        # one timer per request for both limits (not a timer per read, nor one per limit)
        self.timer = self.loop.call_later(min(self.read_timeout_s, left), self._check_time)
        try:
            await self.waiter
        except BaseException:  # cancelled, or the deadline: the connection cannot be reused
            self.close()
            raise
        finally:
            self.waiter = None
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
        if self.resp.failure is not None:
            self.close()
            raise self.resp.failure
        return self.resp

    def _finish(self, failure: BaseException | None = None) -> None:
        if failure is not None and self.resp.failure is None and not self.resp.complete:
            self.resp.failure = failure
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _check_time(self) -> None:
        """The deadline and the read timeout (from the send, then between reads):
        re-armed for what is left of both when neither has passed."""
        self.timer = None
        now = self.loop.time()
        if now >= self.deadline - TIMER_SLACK_S:
            self._finish(TimeoutError("the request's deadline passed"))
            return
        idle_s = (time.perf_counter_ns() - self.last_read_ns) / 1e9
        if idle_s >= self.read_timeout_s - TIMER_SLACK_S:
            self._finish(ReadTimeout(f"nothing read for {self.read_timeout_s:g} s"))
            return
        self.timer = self.loop.call_later(min(self.read_timeout_s - idle_s, self.deadline - now), self._check_time)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # ---- the loop's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection (uvloop's is not a subclass)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is None or self.waiter.done():
            return
        if self.head_done and not self.framed and exc is None:  # a body read to the close ends here
            self.resp.complete = True
            self._finish()
        else:
            self._finish(HttpFailure(f"connection closed by the server{f' ({exc})' if exc else ''}"))

    def data_received(self, data: bytes) -> None:
        self.now = self.last_read_ns = time.perf_counter_ns()  # the clock first: the read's time
        if self.waiter is None or self.waiter.done():  # bytes nobody asked for: the connection is not HTTP
            self.close()
            return
        if not self.head_done:  # checked after the read: the one that ends the headers brings body bytes too
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self.reusable = False
            raised, self.raised = self.raised, None
            if isinstance(raised, _Enough):  # the rest is never read: the connection is dropped
                self.resp.complete = True
                self._finish()
            else:  # the SSE caps and faults (the splitter's), or bytes that are not HTTP
                self._finish(raised or HttpFailure(f"not an HTTP/1.1 response: {exc}"))
            return
        if not self.head_done and self.head_bytes > MAX_HEAD_BYTES:
            self.reusable = False
            self._finish(HttpFailure(f"response headers over {MAX_HEAD_BYTES} bytes"))

    # ---- httptools callbacks (inside feed_data)

    def on_header(self, name: bytes, value: bytes) -> None:
        low = name.lower()
        if low == b"transfer-encoding" or low == b"content-length":
            self.framed = True
        elif low == b"location":
            self.resp.location = value[:LOCATION_CHARS].decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim response: the real one follows
            self.framed = False
            return
        self.head_done = True
        self.resp.status = status
        if self.splitter is not None:
            self.splitter.rec.status = status

    def on_body(self, body: bytes) -> None:
        resp = self.resp
        if resp.status == 200:
            assert self.splitter is not None  # noqa: S101 - set for every request
            try:
                self.splitter.feed(body, self.now)
            except (SseTooLarge, MalformedSse) as exc:
                self.raised = exc
                raise
            return
        room = self.error_cap - len(resp.error_body)
        resp.error_body += body[:room]
        if len(body) >= room:
            self.raised = _Enough()
            raise self.raised

    def on_message_complete(self) -> None:
        if not self.head_done:  # the interim response ended
            return
        self.resp.complete = True
        self.reusable = self.framed and self.parser.should_keep_alive()
        self._finish()


class StreamClient:
    """The connections of one run's streaming requests (one per stream, reused)."""

    def __init__(self, *, max_connections: int, connect_timeout_s: float, read_timeout_s: float,
                 resolver: PinnedResolver | None = None, error_body_cap: int = 4096) -> None:
        self.connect_timeout_s, self.read_timeout_s = connect_timeout_s, read_timeout_s
        self.resolver, self.error_body_cap = resolver, error_body_cap
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._all: set[_Conn] = set()
        self._targets: dict[tuple[str, tuple[tuple[str, str], ...]], Target] = {}
        self._ssl: ssl.SSLContext | None = None

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
        self._idle.clear()

    def target(self, url: str, headers: dict[str, str]) -> Target:
        key = (url, tuple(headers.items()))
        t = self._targets.get(key)
        if t is None:
            t = self._targets[key] = _target(url, headers)
        return t

    async def request(self, target: Target, body: dict[str, Any], splitter: SseSplitter,
                      deadline: float) -> Response:
        """One request on an idle connection or a new one, ended by ``deadline``
        (loop time) at the latest; sets the record's ``reused_connection`` and
        ``sent_ns``.  A request waits for a free slot, and connects, within the
        deadline too (a timeout context only then: it costs more than the rest
        of a request's own work)."""
        payload = json.dumps(body).encode()
        request = b"%s\r\nContent-Length: %d\r\n\r\n%s" % (target.head, len(payload), payload)
        if self._slots.locked():
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        else:
            await self._slots.acquire()  # free: at once
        try:
            conn = self._idle_conn(target)
            splitter.rec.reused_connection = conn is not None
            if conn is None:
                async with asyncio.timeout_at(deadline):
                    conn = await self._connect(target)
            try:
                return await conn.exchange(request, splitter, deadline)
            finally:
                if conn.reusable and not conn.closed:
                    conn.idle_since = time.monotonic()
                    self._idle.setdefault(target.key, []).append(conn)
                else:
                    conn.close()
                    self._all.discard(conn)
        finally:
            self._slots.release()

    def _idle_conn(self, target: Target) -> _Conn | None:
        idle = self._idle.get(target.key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < KEEPALIVE_S:
                return conn
            conn.close()
            self._all.discard(conn)
        return None

    async def _connect(self, target: Target) -> _Conn:
        if target.literal:
            addrs = [target.host]
        elif self.resolver is None:
            raise OSError(f"host {target.host[:80]!r} was not checked against the allow-list; not connecting")
        else:
            addrs = [r["host"] for r in await self.resolver.resolve(target.host, target.port, socket.AF_UNSPEC)]
        if target.tls and self._ssl is None:
            self._ssl = ssl.create_default_context()
        loop = asyncio.get_running_loop()
        failure: BaseException | None = None
        for addr in addrs:
            try:
                async with asyncio.timeout(self.connect_timeout_s):
                    _, conn = await loop.create_connection(
                        lambda: _Conn(loop, self.read_timeout_s, self.error_body_cap), addr, target.port,
                        ssl=self._ssl if target.tls else None, server_hostname=target.host if target.tls else None)
            except OSError as exc:  # the next checked address, as a general client would
                failure = exc
                continue
            self._all.add(conn)
            return conn
        raise failure or OSError(f"host {target.host[:80]!r} has no checked address")
