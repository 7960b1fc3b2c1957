"""What every stdlib test server does: read a request, announce its port and serve until stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One HTTP/1.1 request off the connection: its head (through the blank line), its
    Content-Length body read and dropped."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return head


async def serve_announced(server: asyncio.Server) -> None:
    """Print ``PORT <n>`` (tests.servers.procs reads it) and serve until cancelled."""
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def run_server(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """``asyncio.run(main())``; Ctrl-C (or the test's SIGINT) ends it quietly."""
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
