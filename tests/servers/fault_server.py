"""A fault server: each request gets the next fault of a fixed cycle.

    python tests/servers/fault_server.py --port 0 --faults ok,500,429,hang,reset,cut,garbage

Raw asyncio (no framework) so each fault is exactly what it says:
``ok`` a complete 5-token stream; ``500``/``429`` that HTTP status; ``hang``
headers never sent (past any client timeout); ``reset`` the TCP connection
reset (RST) as soon as the request arrives; ``cut`` a chunked stream closed
after 3 tokens; ``garbage`` a 200 stream whose data lines are not JSON.
Prints ``PORT <n>`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the servers package, when run as a script

from servers.serving import read_request, run_server, serve_announced  # noqa: E402
from servers.sse_frames import SSE_HEAD, chunked, event, ok_stream, tok  # noqa: E402

OK_TOKENS = 5
CUT_AFTER = 3


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, faults: list[str],
                 counter: list[int]) -> None:
    try:
        await read_request(reader)
        fault = faults[counter[0] % len(faults)]
        counter[0] += 1
        if fault in ("500", "429"):
            body = json.dumps({"error": f"fault {fault}"}).encode()
            writer.write(f"HTTP/1.1 {fault} Fault\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        elif fault == "hang":
            await asyncio.sleep(3600)
        elif fault == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        elif fault == "cut":
            writer.write(SSE_HEAD)
            for i in range(CUT_AFTER):
                writer.write(chunked(event(tok(i))))
                await writer.drain()
                await asyncio.sleep(0.005)
            writer.transport.abort()
            return
        elif fault == "garbage":
            writer.write(SSE_HEAD + chunked(event(tok(0))) + chunked(b"data: {this is not json\n\n")
                         + chunked(b"") )
        else:  # ok
            writer.write(ok_stream(OK_TOKENS))
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        if not writer.transport.is_closing():
            writer.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--faults", default="ok,500,429,hang,reset,cut,garbage")
    cfg = ap.parse_args()
    faults = cfg.faults.split(",")
    counter = [0]
    server = await asyncio.start_server(lambda r, w: handle(r, w, faults, counter), "127.0.0.1", cfg.port)
    await serve_announced(server)


if __name__ == "__main__":
    run_server(main)
