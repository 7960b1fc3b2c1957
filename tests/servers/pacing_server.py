"""A pacing server: an OpenAI-compatible streaming endpoint that emits tokens at
a known pace, so the probe's clock can be checked against the truth.

    python tests/servers/pacing_server.py --port 0 --ttft-s 0.05 --tpot-s 0.01 [--api-key KEY]
        [--chunk-tokens 1,2,3] [--kv-slots 256] [--uvloop]

Prints ``PORT <n>`` once listening.  The first token is written ``ttft_s`` after
the request arrives and token i at ``ttft_s + i × tpot_s`` (an absolute
schedule, so timer jitter does not accumulate); ``--tpot-s 0`` writes the whole
stream at once (for the client's ingest rate).  ``--chunk-tokens 1,2,3`` sends
the tokens in uneven chunks (1 token, then 2, then 3, then 1 …; a chunk is
written when its last token is due, every token in it logged at that write).
Chat streams start with an empty role-only chunk (written with the response
head, at once).  ``GET /log`` returns each request's server-side clock readings
(``time.perf_counter_ns``, CLOCK_MONOTONIC, shared by every process on the
machine): receive time (the read that brought the request's last byte) and
each token's write time (read just before its ``transport.write``), the truth
the probe's figures are checked against.  ``/metrics`` is vLLM-style, from the
server's own state.  A wrong ``--api-key`` is answered 401.

So that one core keeps a thousand streams on schedule, the server is a raw
``asyncio.Protocol`` HTTP/1.1 server (requests parsed by llhttp, ``httptools``;
keep-alive; chunked responses) with ONE scheduler for every stream: a heap of
due writes and a single timer armed for the earliest.  Each stream's framed
chunks are built once per stream shape and shared; a due chunk is written
straight to its transport (no coroutine per stream, no drain per chunk).
A chunk is never written before it is due.  ``--uvloop`` serves on uvloop
(where installed); its timers have 1 ms resolution, so there a chunk goes out
up to about a millisecond after it is due, and the clock log records when it
really did.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import gc
import heapq
import json
import math
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import httptools

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the servers package, when run as a script

from servers.pacing_stream import Plan, _chunk, _chunk_sizes, _token  # noqa: E402, F401 - the bench uses the last three

STATE = {"running": 0, "prompt_tokens": 0, "generation_tokens": 0, "requests": 0}
# (prompt head, receive ns, token write ns): kept in memory (GET /log), in objects the collector does not scan
LOG: list[tuple[str, int, array.array]] = []
KV_SLOTS = [256]  # --kv-slots: the running requests that make vllm:kv_cache_usage_perc 1.0

MAX_HEAD_BYTES = 64 * 1024  # a request's line and headers
MAX_BODY_BYTES = 1 << 20  # a request's body (aiohttp's default client_max_size)
# One timer callback writes for at most this long: a server that fell behind (a busy machine) then lets the
# loop read the requests that arrived meanwhile (a due write left over goes out at once after that).
FIRE_BUDGET_S = 0.002
MAX_QUEUED = 64  # pipelined requests waiting on one connection
STREAM_PATHS = {b"/v1/completions": False, b"/v1/chat/completions": True}  # path -> chat


class Scheduler:
    """Every stream's next write in one heap, and one timer armed for the earliest."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.heap: list[tuple[float, int, Conn]] = []
        self.seq = 0
        self.timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self.timer_at = float("inf")
        # uvloop's timers count whole milliseconds from a clock read in whole milliseconds: one may fire
        # up to a tick early, and a shorter wait would spin the loop until the chunk is due
        self.tick_s = 0.001 if type(loop).__module__.startswith("uvloop") else 0.0

    def add(self, due_s: float, conn: Conn) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (due_s, self.seq, conn))
        if due_s < self.timer_at:
            self._arm(due_s)

    def _arm(self, due_s: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = due_s
        wait_s = due_s - time.perf_counter()
        if wait_s > 0 and self.tick_s:
            wait_s = math.ceil(wait_s / self.tick_s) * self.tick_s
        self.timer = self.loop.call_later(max(wait_s, 0.0), self._fire)

    def _fire(self) -> None:
        self.timer, self.timer_at = None, float("inf")
        heap, clock, pop, push = self.heap, time.perf_counter, heapq.heappop, heapq.heappush
        budget_end = clock() + FIRE_BUDGET_S
        while heap:
            now = clock()
            if heap[0][0] > now or now > budget_end:  # never early; and reads get their turn when behind
                break
            _, seq, conn = pop(heap)
            nxt = conn.emit()
            if nxt is not None:
                push(heap, (nxt, seq, conn))
        if heap:
            self._arm(heap[0][0])


class Conn(asyncio.Protocol):
    """One HTTP/1.1 connection: requests parsed as they arrive, answered one at a time."""

    def __init__(self, cfg: argparse.Namespace, sched: Scheduler, plans: dict[tuple, Plan]) -> None:
        self.cfg, self.sched, self.plans = cfg, sched, plans
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.queue: deque[tuple[bytes, bytes, bytes | None, bytes, int, bool]] = deque()
        self.closed = False
        self.now_ns = 0
        self.head_bytes = 0
        self.url, self.auth, self.body, self.too_large = b"", None, bytearray(), False
        # the stream being written (None: idle)
        self.plan: Plan | None = None
        self.i = 0
        self.recv_s = 0.0
        self.recv_ns = 0
        self.head = ""
        self.keep_alive = True
        self.token_ns = array.array("q")

    # ---- the loop's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection (uvloop's is not a subclass)
        self.write = self.transport.write
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.plan is not None:  # a stream cut short: not logged (the scheduler drops its entry)
            self.plan = None
            STATE["running"] -= 1

    def data_received(self, data: bytes) -> None:
        self.now_ns = time.perf_counter_ns()  # the clock first: the read's time
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._reply(400, b"bad request", "text/plain", keep_alive=False)
            return
        if self.too_large:
            return
        if len(self.queue) > MAX_QUEUED:
            self._close()
            return
        if self.plan is None:
            self._next()

    # ---- httptools callbacks (inside feed_data)

    def on_message_begin(self) -> None:
        self.url, self.auth, self.body, self.head_bytes = b"", None, bytearray(), 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        low = name.lower()
        if low == b"authorization":
            self.auth = value
        elif low == b"expect" and value.lower() == b"100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # as aiohttp answered (curl's large bodies)

    def on_body(self, body: bytes) -> None:
        if len(self.body) + len(body) > MAX_BODY_BYTES:
            self.too_large = True
            self._reply(413, b"request body too large", "text/plain", keep_alive=False)
            raise httptools.HttpParserError("body too large")
        self.body += body

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        path = self.url.split(b"?", 1)[0]
        self.queue.append((method, path, self.auth, bytes(self.body), self.now_ns, self.parser.should_keep_alive()))

    def _count(self, n: int) -> None:
        self.head_bytes += n
        if self.head_bytes > MAX_HEAD_BYTES:
            self.too_large = True
            self._reply(431, b"request headers too large", "text/plain", keep_alive=False)
            raise httptools.HttpParserError("headers too large")

    # ---- answering

    def _next(self) -> None:
        """Answer queued requests until one is a stream (or none is left)."""
        while self.queue and self.plan is None and not self.closed:
            method, path, auth, body, recv_ns, keep_alive = self.queue.popleft()
            if method == b"POST" and path in STREAM_PATHS:
                self._start(STREAM_PATHS[path], auth, body, recv_ns, keep_alive)
            elif method == b"GET" and path == b"/log":
                text = "".join(json.dumps({"prompt_head": h, "recv_ns": r, "token_ns": t.tolist()}) + "\n"
                               for h, r, t in LOG)
                self._reply(200, text.encode(), "application/x-ndjson", keep_alive)
            elif method == b"GET" and path == b"/metrics":
                self._reply(200, _metrics_text().encode(), "text/plain; charset=utf-8", keep_alive)
            else:
                self._reply(404, b"not found", "text/plain", keep_alive)

    def _reply(self, status: int, body: bytes, ctype: str, keep_alive: bool) -> None:
        if self.transport is None or self.closed:
            return
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 413: "Payload Too Large",
                  431: "Request Header Fields Too Large"}[status]
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                + ("" if keep_alive else "Connection: close\r\n") + "\r\n")
        self.transport.write(head.encode() + body)
        if not keep_alive:
            self._close()

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _start(self, chat: bool, auth: bytes | None, raw: bytes, recv_ns: int, keep_alive: bool) -> None:
        cfg = self.cfg
        if cfg.api_key and auth != f"Bearer {cfg.api_key}".encode():
            self._reply(401, b'{"error": "bad key"}', "application/json; charset=utf-8", keep_alive)
            return
        try:
            body = json.loads(raw)
            n = int(body.get("max_tokens", 16))
            prompt = body["messages"][-1]["content"] if chat else body["prompt"]
            prompt_tokens = len(prompt.split())
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            self._reply(400, b'{"error": "bad request body"}', "application/json; charset=utf-8", keep_alive)
            return
        key = (chat, n, include_usage, prompt_tokens)
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) > 256:
                self.plans.clear()
            plan = self.plans[key] = Plan(cfg, chat, n, include_usage, prompt_tokens)
        STATE["running"] += 1
        STATE["requests"] += 1
        STATE["prompt_tokens"] += prompt_tokens
        self.plan, self.i, self.keep_alive = plan, 0, keep_alive
        self.recv_ns, self.recv_s = recv_ns, recv_ns / 1e9
        self.head, self.token_ns = prompt.split(" ", 1)[0], array.array("q")
        assert self.transport is not None
        self.transport.write(plan.first)
        if plan.pieces:
            self.sched.add(self.recv_s + plan.offsets_s[0], self)
        else:
            self._end()

    def emit(self) -> float | None:
        """Write the stream's due chunk; the next one's due time (perf_counter seconds), or None."""
        plan = self.plan
        if plan is None or self.closed:
            return None
        i = self.i
        now = time.perf_counter_ns()
        self.write(plan.pieces[i])
        k = plan.logged[i]
        if k == 1:
            self.token_ns.append(now)
        else:
            self.token_ns.extend([now] * k)
        STATE["generation_tokens"] += plan.tokens[i]
        i += 1
        if i < len(plan.pieces):
            self.i = i
            return self.recv_s + plan.offsets_s[i]
        self._end()
        return None

    def _end(self) -> None:
        LOG.append((self.head, self.recv_ns, self.token_ns))
        self.plan = None
        STATE["running"] -= 1
        if not self.keep_alive:
            self._close()
        elif self.queue:
            self._next()


def _metrics_text() -> str:
    lbl = '{model_name="pacer"}'
    return (
        "# HELP vllm:num_requests_running Running requests.\n# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{lbl} {STATE['running']}\n"
        "# HELP vllm:num_requests_waiting Waiting requests.\n# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{lbl} 0\n"
        "# HELP vllm:kv_cache_usage_perc KV usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n"
        f"vllm:kv_cache_usage_perc{lbl} {STATE['running'] / KV_SLOTS[0]}\n"
        "# HELP vllm:prompt_tokens Prompt tokens.\n# TYPE vllm:prompt_tokens counter\n"
        f"vllm:prompt_tokens_total{lbl} {STATE['prompt_tokens']}\n"
        "# HELP vllm:generation_tokens Generated tokens.\n# TYPE vllm:generation_tokens counter\n"
        f"vllm:generation_tokens_total{lbl} {STATE['generation_tokens']}\n"
    )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft-s", type=float, default=0.05)
    ap.add_argument("--tpot-s", type=float, default=0.01)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--kv-slots", type=int, default=256)
    ap.add_argument("--chunk-tokens", default="1", help="tokens per chunk, cycled: e.g. 1,2,3")
    ap.add_argument("--uvloop", action="store_true", help="serve on uvloop where it is installed")
    cfg = ap.parse_args()
    cfg.chunk_tokens = tuple(max(int(x), 1) for x in cfg.chunk_tokens.split(",") if x.strip()) or (1,)
    KV_SLOTS[0] = cfg.kv_slots
    loop = asyncio.get_running_loop()
    sched = Scheduler(loop)
    plans: dict[tuple[Any, ...], Plan] = {}
    server = await loop.create_server(lambda: Conn(cfg, sched, plans), cfg.host, cfg.port, backlog=2048)
    gc.freeze()  # what exists now is never scanned again: collections stay short while streams run
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    if "--uvloop" in sys.argv:
        try:
            import uvloop

            return uvloop.new_event_loop
        except ImportError:
            pass
    return asyncio.new_event_loop


if __name__ == "__main__":
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(main())
    except KeyboardInterrupt:
        pass
