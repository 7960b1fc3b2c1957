"""``--workers N``: the load from N processes, merged as from one.

The parent resolves and checks the hosts (:mod:`planner.probe.safety`) and
starts N worker processes as fresh interpreters (``python -c``, through
:mod:`subprocess`): nothing of the parent is inherited or re-imported, neither
its threads and sockets (as with fork) nor its ``__main__`` module (as with
multiprocessing's spawn, which re-runs the parent's main script in each child:
under Streamlit that is the app, whose script runner replaces ``__main__``).
Everything a worker needs travels in its stdin pipe as pickled frames: the
settings, the request headers (the API key is in memory and in the pipe, never
in an argument or the environment), the parent's
:class:`~planner.probe.safety.PinnedResolver` (a worker connects only to the
addresses the parent checked) and its pool size.  Each worker runs its own
event loop (:func:`planner.probe.loop.run_on_fastest_loop`) and connection pool.

Per level the parent sends each worker its part (:class:`LevelPlan`), waits for
every warm-up, then sends one common start time (``perf_counter_ns``,
CLOCK_MONOTONIC, shared by every process of the machine, so the workers'
timestamps are on one clock).  Each worker answers with its raw records and
its own figures (:class:`ClientStats`); the parent concatenates the records
and summarises them as one level: percentiles are recomputed from all the
samples together, never averaged.

Cancelling sends every worker a ``cancel`` frame, which a reader thread in the
worker turns into its loop's cancel event at once; a worker that dies is one
:class:`ProbeError`.  When the run ends each worker is told to stop, and is
killed if it has not exited after :data:`WORKER_STOP_S`.

Server-wide cap: every worker process holds one of :data:`MAX_SERVER_PROBE_PROCESSES`
slots, an exclusive ``flock`` on a slot file in one directory of the machine's
temp dir (``RIDGELINE_PROBE_SLOT_DIR`` to move it), taken before the processes start
and given back when the pool closes, or by the kernel when the process holding it
dies.  So every Streamlit session, app server and CLI run on one machine shares the
cap; a pool that cannot have all its slots at once starts nothing and says how many
are free.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from planner.errors import ProbeError
from planner.io.slots import try_lock_slot
from planner.probe.client import ERROR_DETAIL_CHARS, make_client
from planner.probe.level import LevelPlan, LocalLoad, Progress
from planner.probe.loop import ClientStats, run_on_fastest_loop
from planner.probe.record import RequestRecord
from planner.probe.redact import clip
from planner.probe.safety import PinnedResolver
from planner.probe.settings import ProbeSettings

__all__ = ["MAX_SERVER_PROBE_PROCESSES", "SLOT_DIR_ENV", "WORKER_START_S", "WORKER_STOP_S", "ProcessSlots",
           "WorkerPool", "worker_main"]

log = logging.getLogger(__name__)

# A fresh interpreter imports the probe (numpy, pydantic, aiohttp): about a second
# here, several on a loaded 2-core machine; past this it is reported as failed.
WORKER_START_S = 120.0
# After the run, a worker gets this long to close its connections and exit before
# it is killed.
WORKER_STOP_S = 10.0
# Probe worker processes on one machine at once, over every visitor, session and app
# server: one worker holds 150-200 MB and up to a core (two tabs asking 12 each started
# 24 processes and 4.1 GB in 30 s), so 16 is about 3 GB and more cores than a small
# server has.  A run asking more waits for nobody: it is refused with the count free.
MAX_SERVER_PROBE_PROCESSES = 16
SLOT_DIR_ENV = "RIDGELINE_PROBE_SLOT_DIR"
# The project root: put first on the worker's import path, so it runs this code.
_ROOT = str(Path(__file__).resolve().parents[2])
_HEADER = struct.Struct("!Q")
_WORKER_CMD = "from planner.probe.workers import worker_main; worker_main()"


def _write(pipe: IO[bytes], msg: tuple[Any, ...]) -> None:
    blob = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(_HEADER.pack(len(blob)) + blob)
    pipe.flush()


def _read(pipe: IO[bytes]) -> tuple[Any, ...] | None:
    """The next frame, or None at the end of the pipe.  Frames come only from the
    other end of a pipe this process made with its own code (never from a network)."""
    head = pipe.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (n,) = _HEADER.unpack(head)
    blob = pipe.read(n)
    if len(blob) < n:
        return None
    msg = pickle.loads(blob)  # noqa: S301 - our own worker's frames, over our own pipe
    return msg if isinstance(msg, tuple) else None


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_ROOT, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


class _Worker:
    def __init__(self, k: int) -> None:
        self.name = f"ridgeline-probe-{k}"
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER_CMD], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, cwd=_ROOT, env=_worker_env())

    def send(self, msg: tuple[Any, ...]) -> None:
        assert self.proc.stdin is not None  # noqa: S101 - made with a pipe
        _write(self.proc.stdin, msg)

    async def recv(self, what: str) -> tuple[Any, ...]:
        """The worker's next message, read on a thread; its death is an error."""
        assert self.proc.stdout is not None  # noqa: S101 - made with a pipe
        msg = await asyncio.to_thread(_read, self.proc.stdout)
        if msg is None:
            code = await asyncio.to_thread(self.proc.wait)
            raise ProbeError(f"probe worker {self.name} exited (code {code}) during {what}")
        if msg[0] == "error":
            raise ProbeError(f"probe worker {self.name} failed during {what}: {msg[1]}")
        return msg


def _slot_dir() -> Path:
    d = Path(os.environ.get(SLOT_DIR_ENV) or Path(tempfile.gettempdir()) / f"ridgeline-probe-slots-{os.getuid()}")
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


class ProcessSlots:
    """``n`` of the machine's MAX_SERVER_PROBE_PROCESSES probe-process slots, all or none."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds

    @classmethod
    def acquire(cls, n: int, *, field: str = "workers (Client processes)") -> ProcessSlots:
        """Take ``n`` free slots at once or raise ProbeError naming ``field`` and the free count."""
        if n > MAX_SERVER_PROBE_PROCESSES:
            raise ProbeError(f"{field}: {n} client processes asked; this server runs at most "
                             f"{MAX_SERVER_PROBE_PROCESSES} probe processes at once (MAX_SERVER_PROBE_PROCESSES)")
        d = _slot_dir()
        fds: list[int] = []
        for k in range(MAX_SERVER_PROBE_PROCESSES):
            if len(fds) == n:
                break
            fd = try_lock_slot(d, k)
            if fd is not None:
                fds.append(fd)
        if len(fds) < n:
            free = len(fds)
            cls(fds).release()
            raise ProbeError(f"{field}: {n} client processes asked but only {free} of this server's "
                             f"{MAX_SERVER_PROBE_PROCESSES} probe processes are free (MAX_SERVER_PROBE_PROCESSES; "
                             "other probes hold the rest): ask for fewer or try again when they finish")
        return cls(fds)

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __len__(self) -> int:
        return len(self._fds)


class WorkerPool:
    """N worker processes, each running its part of every level."""

    def __init__(self) -> None:
        self.workers: list[_Worker] = []
        self._watch: asyncio.Task[None] | None = None
        self.slots: ProcessSlots | None = None

    @classmethod
    async def start(cls, settings: ProbeSettings, *, headers: dict[str, str], resolver: PinnedResolver,
                    cancel: asyncio.Event) -> WorkerPool:
        n = settings.workers
        if settings.rate_req_s is None:
            pool = max(len(range(k, c, n)) for c in settings.levels for k in range(n))
        else:
            pool = -(-settings.max_concurrency // n)
        self = cls()
        self.slots = ProcessSlots.acquire(n)
        try:
            for k in range(n):
                w = _Worker(k)
                self.workers.append(w)
                w.send(("init", settings, headers, resolver, max(pool, 1)))
            async with asyncio.timeout(WORKER_START_S):
                for w in self.workers:
                    await w.recv("start")
        except BaseException:
            await self.aclose()
            raise
        self._watch = asyncio.create_task(self._forward_cancel(cancel))
        return self

    async def _forward_cancel(self, cancel: asyncio.Event) -> None:
        await cancel.wait()
        for w in self.workers:
            with contextlib.suppress(OSError, ValueError):
                w.send(("cancel",))

    async def warm(self, plans: Sequence[LevelPlan]) -> None:
        for w, plan in zip(self.workers, plans, strict=True):
            w.send(("warm", plan))
        for w in self.workers:
            await w.recv("the warm-up")

    async def measure(self, t0_ns: int, progress: Progress | None = None,
                      label: str = "") -> tuple[list[RequestRecord], list[ClientStats]]:
        for w in self.workers:
            w.send(("measure", t0_ns))
        records: list[RequestRecord] = []
        stats: list[ClientStats] = []
        for w in self.workers:
            _, recs, st = await w.recv("the level")
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
        for w in self.workers:
            with contextlib.suppress(OSError, ValueError):
                w.send(("stop",))
            if w.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    w.proc.stdin.close()
        for w in self.workers:
            try:
                await asyncio.to_thread(w.proc.wait, WORKER_STOP_S)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                await asyncio.to_thread(w.proc.wait)
            if w.proc.stdout is not None:
                w.proc.stdout.close()
        if self.slots is not None:  # every worker has exited: its slot is free again
            self.slots.release()


def worker_main() -> None:
    """A worker process: serve the parent's level parts (frames on stdin) until it says stop."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the frame pipe
    init = _read(inp)
    if init is None or init[0] != "init":
        return
    _, settings, headers, resolver, pool = init
    try:
        run_on_fastest_loop(_serve(inp, out, settings, headers, resolver, pool))
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one line
        with contextlib.suppress(OSError, ValueError):
            _write(out, ("error", clip(f"{type(exc).__name__}: {exc}", ERROR_DETAIL_CHARS, headers.values())))


def _reader(inp: IO[bytes], loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[tuple[Any, ...]],
            cancel: asyncio.Event) -> None:
    """The parent's frames, from a thread: ``cancel`` at once, the rest in order; the
    pipe's end (the parent is gone) cancels and stops."""
    while True:
        msg = _read(inp)
        with contextlib.suppress(RuntimeError):  # the loop has closed: the worker is ending anyway
            if msg is None or msg[0] in ("cancel", "stop"):
                loop.call_soon_threadsafe(cancel.set)
            if msg is None or msg[0] != "cancel":
                loop.call_soon_threadsafe(queue.put_nowait, msg or ("stop",))
        if msg is None or msg[0] == "stop":
            return


async def _serve(inp: IO[bytes], out: IO[bytes], settings: ProbeSettings, headers: dict[str, str],
                 resolver: PinnedResolver, pool: int) -> None:
    cancel = asyncio.Event()
    queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
    threading.Thread(target=_reader, args=(inp, asyncio.get_running_loop(), queue, cancel),
                     name="ridgeline-probe-pipe", daemon=True).start()
    async with make_client(max_connections=pool, connect_timeout_s=settings.connect_timeout_s,
                           read_timeout_s=settings.read_timeout_s, resolver=resolver) as client:
        load = LocalLoad(settings, client, headers, cancel)
        _write(out, ("ready",))
        try:
            while True:
                msg = await queue.get()
                if msg[0] == "warm":
                    await load.warm([msg[1]])
                    _write(out, ("warmed",))
                elif msg[0] == "measure":
                    records, stats = await load.measure(msg[1])
                    _write(out, ("measured", records, stats))
                else:
                    return
        finally:
            await load.aclose()
