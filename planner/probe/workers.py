"""``--workers N``: the load from N processes, merged as from one.

The parent resolves and checks the hosts (:mod:`planner.probe.safety`) and
starts N worker processes (``spawn``: nothing of the parent's threads or
sockets is inherited).  Each gets the settings, the request headers (the API
key travels in the pipe, in memory, never in an argument or the environment)
and the parent's :class:`~planner.probe.safety.PinnedResolver`, so a worker
connects only to the addresses the parent checked.  Each runs its own event
loop (:func:`planner.probe.loop.run`) and connection pool.

Per level the parent sends each worker its part (:class:`LevelPlan`: stream k
goes to worker k mod N), waits for every warm-up, then sends one common start
time (``perf_counter_ns``, CLOCK_MONOTONIC, shared by every process of the
machine, so the workers' timestamps are on one clock).  Each worker answers
with its raw records and its own figures (:class:`ClientStats`); the parent
concatenates the records and summarises them as one level: percentiles are
recomputed from all the samples together, never averaged.

Cancelling sets a flag every worker watches (every :data:`CANCEL_POLL_S`); a
worker that dies is one :class:`ProbeError`.  Workers are daemon processes and
are stopped, then terminated after :data:`WORKER_STOP_S`, when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any

from planner.errors import ProbeError
from planner.probe.client import ERROR_DETAIL_CHARS, RequestRecord, make_client
from planner.probe.load import CANCEL_POLL_S, LevelPlan, LocalLoad, Progress, _watch_thread_event
from planner.probe.loop import ClientStats, run_on_fastest_loop
from planner.probe.redact import clip
from planner.probe.safety import PinnedResolver
from planner.probe.settings import ProbeSettings

__all__ = ["WORKER_START_S", "WORKER_STOP_S", "WorkerPool"]

log = logging.getLogger(__name__)

# A spawned worker imports the probe (numpy, pydantic, aiohttp): about a second
# here, several on a loaded 2-core machine; past this it is reported as failed.
WORKER_START_S = 120.0
# After the run, a worker gets this long to close its connections and exit before
# it is terminated.
WORKER_STOP_S = 5.0


async def _recv(conn: Connection, proc: SpawnProcess, what: str) -> Any:
    """The worker's next message, without blocking the loop; its death is an error."""
    while not await asyncio.to_thread(conn.poll, CANCEL_POLL_S):
        if not proc.is_alive():
            raise ProbeError(f"probe worker {proc.name} exited (code {proc.exitcode}) during {what}")
    try:
        msg = await asyncio.to_thread(conn.recv)
    except (EOFError, OSError):
        raise ProbeError(f"probe worker {proc.name} exited during {what}") from None
    if msg[0] == "error":
        raise ProbeError(f"probe worker {proc.name} failed during {what}: {msg[1]}")
    return msg


class WorkerPool:
    """N worker processes, each running its part of every level."""

    def __init__(self, procs: list[SpawnProcess], conns: list[Connection], flag: Any) -> None:
        self.procs, self.conns, self._flag = procs, conns, flag
        self._watch: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, settings: ProbeSettings, *, headers: dict[str, str], resolver: PinnedResolver,
                    cancel: asyncio.Event) -> WorkerPool:
        ctx = multiprocessing.get_context("spawn")
        flag = ctx.Event()
        n = settings.workers
        if settings.rate_req_s is None:
            pool = max(len(range(k, c, n)) for c in settings.levels for k in range(n))
        else:
            pool = -(-settings.max_concurrency // n)
        self = cls([], [], flag)
        self._watch = asyncio.create_task(self._forward_cancel(cancel))
        try:
            for k in range(n):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_worker_main, name=f"ridgeline-probe-{k}", daemon=True,
                                   args=(child, settings, headers, resolver, max(pool, 1), flag))
                self.conns.append(parent)
                proc.start()
                child.close()
                self.procs.append(proc)
            async with asyncio.timeout(WORKER_START_S):
                for conn, proc in zip(self.conns, self.procs, strict=True):
                    await _recv(conn, proc, "start")
        except BaseException:
            await self.aclose()
            raise
        return self

    async def _forward_cancel(self, cancel: asyncio.Event) -> None:
        await cancel.wait()
        self._flag.set()

    async def warm(self, plans: Sequence[LevelPlan]) -> None:
        for conn, plan in zip(self.conns, plans, strict=True):
            conn.send(("warm", plan))
        for conn, proc in zip(self.conns, self.procs, strict=True):
            await _recv(conn, proc, "the warm-up")

    async def measure(self, t0_ns: int, progress: Progress | None = None,
                      label: str = "") -> tuple[list[RequestRecord], list[ClientStats]]:
        for conn in self.conns:
            conn.send(("measure", t0_ns))
        records: list[RequestRecord] = []
        stats: list[ClientStats] = []
        for conn, proc in zip(self.conns, self.procs, strict=True):
            _, recs, st = await _recv(conn, proc, "the level")
            records.extend(recs)
            stats.extend(st)
        records.sort(key=lambda r: (r.scheduled_ns, r.index))
        if progress:
            done = sum(1 for r in records if not r.warmup)
            progress(label, done, done)
        return records, stats

    async def aclose(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        for conn in self.conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send(("stop",))
        for proc in self.procs:  # started ones (a Pipe whose Process failed to start has none)
            await asyncio.to_thread(proc.join, WORKER_STOP_S)
            if proc.is_alive():
                proc.terminate()
                await asyncio.to_thread(proc.join, WORKER_STOP_S)
        for conn in self.conns:
            conn.close()


def _worker_main(conn: Connection, settings: ProbeSettings, headers: dict[str, str], resolver: PinnedResolver,
                 pool: int, flag: Any) -> None:
    """A worker process: serve the parent's level parts until it says stop."""
    try:
        run_on_fastest_loop(_serve(conn, settings, headers, resolver, pool, flag))
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one line
        with contextlib.suppress(OSError, ValueError):
            conn.send(("error", clip(f"{type(exc).__name__}: {exc}", ERROR_DETAIL_CHARS, headers.values())))
    finally:
        conn.close()


async def _serve(conn: Connection, settings: ProbeSettings, headers: dict[str, str], resolver: PinnedResolver,
                 pool: int, flag: Any) -> None:
    cancel = asyncio.Event()
    watcher = asyncio.create_task(_watch_thread_event(flag, cancel))
    try:
        async with make_client(max_connections=pool, connect_timeout_s=settings.connect_timeout_s,
                               read_timeout_s=settings.read_timeout_s, resolver=resolver) as client:
            load = LocalLoad(settings, client, headers, cancel)
            conn.send(("ready",))
            try:
                while True:
                    msg = await asyncio.to_thread(conn.recv)
                    if msg[0] == "warm":
                        await load.warm([msg[1]])
                        conn.send(("warmed",))
                    elif msg[0] == "measure":
                        records, stats = await load.measure(msg[1])
                        conn.send(("measured", records, stats))
                    else:
                        return
            finally:
                await load.aclose()
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
