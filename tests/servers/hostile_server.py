"""A hostile OpenAI-compatible server: what an endpoint the probe is pointed at
could do to it.  The first path segment picks the behaviour, for both
``/<mode>/v1/completions`` and ``/<mode>/metrics``:

    python tests/servers/hostile_server.py --port 0 [--host 127.0.0.1] [--redirect-to URL]

- ``ok``: a complete 5-token stream; a small vLLM-style /metrics page.
- ``trickle-metrics``: /metrics sends one byte every 0.5 s, without end.
- ``huge-metrics``: a 300 MB /metrics page (no Content-Length, read to close).
- ``huge-error``: a 400 MB error body (HTTP 400, Content-Length announced).
- ``endless-stream``: a 200 stream of tokens that never finishes.
- ``endless-comments``: a 200 stream of SSE comment lines that never ends.
- ``long-line``: a 200 stream whose one ``data:`` line never gets a newline.
- ``nested-json``: a data line nested 50,000 deep (json.loads raises RecursionError).
- ``echo-auth``: HTTP 401 whose body echoes the request's Authorization header;
  ``echo-auth-cut`` pads it so the key straddles character 200 of the body;
  ``echo-auth-sse``: a 200 stream whose error event quotes it.
- ``redirect``: 302 to ``--redirect-to`` (another host).
- ``hang-after-first``: the first request is answered, every later one is held open.
- ``mixed``: request i gets behaviour MIXED[i mod len(MIXED)] (for "every other sample is kept").

``GET /hits`` answers how many requests arrived (``/hits`` excluded), as JSON.
Prints ``PORT <n>`` once listening.  Each endless behaviour stops by itself
after :data:`MAX_SECONDS` or its byte size, so an unfixed client ends too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the servers package, when run as a script

from servers.serving import run_server, serve_announced  # noqa: E402
from servers.sse_frames import SSE_HEAD, chunked, event, ok_stream, tok  # noqa: E402

TOKENS = 5
BLOCK = 64 * 1024
HUGE_METRICS_BYTES = 300_000_000
HUGE_ERROR_BYTES = 400_000_000
MAX_SECONDS = 120.0
MIXED = ["ok", "huge-error", "ok", "endless-stream", "ok", "long-line", "ok", "nested-json", "ok", "echo-auth-sse"]





METRICS_LINE = 'vllm:num_requests_running{model_name="hostile"} 1\n'
OK_METRICS = ("# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
              + METRICS_LINE).encode()


def _response(status: str, body: bytes, ctype: str = "application/json", extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n{extra}"
            f"Connection: close\r\n\r\n").encode() + body


async def _pour(writer: asyncio.StreamWriter, block: bytes, total: int, *, as_chunks: bool = False) -> None:
    """Write ``block`` until ``total`` bytes or MAX_SECONDS, as fast as the client reads."""
    sent, t0 = 0, time.monotonic()
    piece = chunked(block) if as_chunks else block
    while sent < total and time.monotonic() - t0 < MAX_SECONDS:
        writer.write(piece)
        await writer.drain()
        sent += len(block)


class Hostile:
    def __init__(self, redirect_to: str) -> None:
        self.redirect_to = redirect_to
        self.hits: dict[str, int] = {}
        self.mixed = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            await reader.readexactly(int(headers.get("content-length", "0")))
            if path == "/hits":
                writer.write(_response("200 OK", json.dumps({"total": sum(self.hits.values()),
                                                              "paths": self.hits}).encode()))
                await writer.drain()
                return
            self.hits[path] = self.hits.get(path, 0) + 1
            mode = path.strip("/").split("/")[0]
            if mode == "mixed" and not path.endswith("/metrics"):
                mode = MIXED[self.mixed % len(MIXED)]
                self.mixed += 1
            await (self._metrics if path.endswith("/metrics") else self._completion)(mode, headers, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()

    async def _metrics(self, mode: str, headers: dict[str, str], writer: asyncio.StreamWriter) -> None:
        if mode == "trickle-metrics":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
            t0 = time.monotonic()
            while time.monotonic() - t0 < MAX_SECONDS:
                writer.write(b"#")
                await writer.drain()
                await asyncio.sleep(0.5)
        elif mode == "huge-metrics":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" + OK_METRICS)
            await _pour(writer, METRICS_LINE.encode() * (BLOCK // len(METRICS_LINE)), HUGE_METRICS_BYTES)
        elif mode == "redirect":
            writer.write(_response("302 Found", b"", extra=f"Location: {self.redirect_to}/metrics\r\n"))
        else:
            writer.write(_response("200 OK", OK_METRICS, "text/plain"))
        await writer.drain()

    async def _completion(self, mode: str, headers: dict[str, str], writer: asyncio.StreamWriter) -> None:
        auth = headers.get("authorization", "")
        if mode == "huge-error":
            writer.write(f"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {HUGE_ERROR_BYTES}\r\nConnection: close\r\n\r\n".encode())
            writer.write(b'{"error": "too big", "filler": "')
            await _pour(writer, b"x" * BLOCK, HUGE_ERROR_BYTES)
        elif mode == "endless-stream":
            writer.write(SSE_HEAD)
            await _pour(writer, b"".join(event(tok(i)) for i in range(100)), 10**12, as_chunks=True)
        elif mode == "endless-comments":
            writer.write(SSE_HEAD)
            await _pour(writer, b": keep-alive\n\n" * 1000, 10**12, as_chunks=True)
        elif mode == "long-line":
            writer.write(SSE_HEAD + chunked(b"data: "))
            await _pour(writer, b"a" * BLOCK, 10**12, as_chunks=True)
        elif mode == "nested-json":
            writer.write(SSE_HEAD + chunked(event(tok(0)) + b"data: " + b"[" * 50_000 + b"\n\n") + chunked(b""))
        elif mode in ("echo-auth", "echo-auth-cut"):
            pad = "p" * (200 - 44 - len(auth) // 2) if mode == "echo-auth-cut" else ""
            body = json.dumps({"error": {"message": f"{pad}invalid credentials: {auth}",
                                         "received_headers": headers}}).encode()
            writer.write(_response("401 Unauthorized", body))
        elif mode == "echo-auth-sse":
            writer.write(SSE_HEAD + chunked(event(tok(0)) + event({"error": f"session expired for {auth}"}))
                         + chunked(b""))
        elif mode == "redirect":
            writer.write(_response("302 Found", b"", extra=f"Location: {self.redirect_to}/v1/completions\r\n"))
        elif mode == "hang-after-first" and self.hits.get("/hang-after-first/v1/completions", 0) > 1:
            await asyncio.sleep(MAX_SECONDS)
        else:
            writer.write(ok_stream(TOKENS))
        await writer.drain()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--redirect-to", default="http://127.0.0.2:9/ok")
    cfg = ap.parse_args()
    srv = Hostile(cfg.redirect_to)
    server = await asyncio.start_server(srv.handle, cfg.host, cfg.port, limit=1 << 20)
    await serve_announced(server)


if __name__ == "__main__":
    run_server(main)
