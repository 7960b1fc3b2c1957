"""A keep-alive server: complete 5-token completions streams on connections it
keeps open, counting the connections and requests it saw.

    python tests/servers/keepalive_server.py --port 0 [--drop-reused] [--tls-cert CERT --tls-key KEY]

Raw asyncio (no framework), so what a connection does is exactly what it says:
each answer is a chunked SSE stream without ``Connection: close``.  With
``--drop-reused`` a connection answers its first request only and closes on the
second without answering (as llama.cpp's server closes a kept-alive connection):
the client's resend rule is what gets that request answered.  With
``--tls-cert``/``--tls-key`` it serves HTTPS.  ``GET /stats`` answers
``{"connections": n, "requests": m, "dropped": d}`` (``/stats`` excluded).
Prints ``PORT <n>`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the servers package, when run as a script

from servers.serving import read_request, run_server, serve_announced  # noqa: E402
from servers.sse_frames import DONE, chunked, event, tok  # noqa: E402

TOKENS = 5
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
STATS = {"connections": 0, "requests": 0, "dropped": 0}


def _stream() -> bytes:
    events = b"".join(event(tok(i, "length" if i == TOKENS - 1 else None)) for i in range(TOKENS))
    events += event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": TOKENS}})
    return HEAD + chunked(events + DONE) + chunked(b"")


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, drop_reused: bool) -> None:
    answered = 0
    counted = False
    try:
        while True:
            head = await read_request(reader)
            if head.startswith(b"GET /stats "):
                body = json.dumps(STATS).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                             b"Connection: close\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                return
            if not counted:
                STATS["connections"] += 1
                counted = True
            STATS["requests"] += 1
            if drop_reused and answered:
                STATS["dropped"] += 1
                return
            writer.write(_stream())
            await writer.drain()
            answered += 1
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--drop-reused", action="store_true")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    cfg = ap.parse_args()
    tls = None
    if cfg.tls_cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(cfg.tls_cert, cfg.tls_key)
    server = await asyncio.start_server(lambda r, w: handle(r, w, cfg.drop_reused), "127.0.0.1", cfg.port, ssl=tls)
    await serve_announced(server)


if __name__ == "__main__":
    run_server(main)
