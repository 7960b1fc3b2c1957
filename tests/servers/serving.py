"""What every stdlib test server does once it listens: announce its port and serve until stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


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
