"""One load level in one process: its plan, its requests and its load pattern.

- Closed loop (a concurrency sweep 1, 2, 4 … N): N streams each send the next
  request as soon as their previous one finishes; ``ramp_up_s`` staggers their
  first requests evenly (0: all start together and stay in step).
- Open loop at a rate: constant gaps, Poisson (exponential gaps) or gamma gaps
  with shape ``burstiness`` (1 = Poisson, < 1 burstier, as vLLM's benchmark).
  Scheduled times are fixed in advance, so client-side queueing (the pool is
  capped at ``max_concurrency``) shows up in TTFT.

A level is planned as parts (:class:`LevelPlan`), one per process sending load
(:func:`split_level`: stream k, or scheduled request k, goes to part k mod N).
:class:`LocalLoad` runs one part on this process's loop from a given start
time, watching its own loop and CPU (:mod:`planner.probe.loop`).  Prompts are
made unique per request (an index up front) unless ``shared_prefix``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from planner.probe.client import ERROR_DETAIL_CHARS, StreamClient, stream_request
from planner.probe.loop import ClientStats, LagMonitor
from planner.probe.record import RequestRecord
from planner.probe.redact import clip
from planner.probe.settings import ProbeSettings

__all__ = [
    "CANCEL_POLL_S",
    "LevelPlan",
    "LocalLoad",
    "Progress",
    "arrival_offsets_s",
    "make_prompt",
    "request_body",
    "split_level",
    "watch_flag",
]

# How often a run looks at a cancel flag set by another thread or process.
CANCEL_POLL_S = 0.1
# A wait shorter than this is a plain sleep, not one watching the cancel flag: a
# cancel then waits at most this long (uvloop's timer resolution is 1 ms).
UNTIL_SHORT_S = 0.002
# Objects the garbage collector tracks that a level may leave (net) while its
# automatic collection is paused, before the lag timer collects: a request leaves
# about 6 (measured here: 17,600 after the 3,072 requests of a 1,024-stream level,
# 5,000 after 768 at 256), so a level collects every few hundred thousand requests,
# and what waits stays in the tens of MB.
GC_DEFERRED_OBJECTS = 2_000_000
_WORDS = (
    "the quick brown fox jumps over a lazy dog while seven tall ships sail past an old harbor "
    "under grey clouds and bright stars as small birds sing near green fields of wheat corn rice"
).split()

Progress = Callable[[str, int, int], None]


def make_prompt(*, index: int, prompt_tokens: int, nonce: str, shared_prefix: bool = False) -> str:
    """About ``prompt_tokens`` tokens of common words (≈ one token each in BPE
    vocabularies; the server's usage reports the real count).  Unique per
    request through a leading nonce and index, unless ``shared_prefix``."""
    n = max(prompt_tokens - 3, 1)
    first = 0 if shared_prefix else (index * 7) % len(_WORDS)  # word k is _WORDS[(first + k) % len(_WORDS)]
    words = " ".join((_WORDS * ((first + n) // len(_WORDS) + 1))[first:first + n])
    # a per-request digest first, so even the first token differs from the last request's
    head = hashlib.sha256(f"{nonce}-{index}".encode()).hexdigest()[:8]
    return f"{words} {head}-{index}" if shared_prefix else f"{head}-{index} {words}"


def request_body(settings: ProbeSettings, prompt: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": settings.model,
        "max_tokens": settings.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
    }
    if settings.ignore_eos:
        body["ignore_eos"] = True
    if settings.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def arrival_offsets_s(*, rate_req_s: float, n: int, arrival: str, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
    """Scheduled send times (s from level start) of ``n`` open-loop requests."""
    rng = np.random.default_rng(seed)
    if arrival == "constant":
        gaps = np.full(n, 1.0 / rate_req_s)
    elif arrival == "poisson":
        gaps = rng.exponential(1.0 / rate_req_s, size=n)
    else:  # gamma: mean 1/rate, shape = burstiness
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate_req_s * burstiness), size=n)
    offsets = np.cumsum(gaps)
    return np.asarray(offsets - offsets[0], dtype=float)


class _Flag(Protocol):
    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class LevelPlan:
    """One process's part of a level (picklable: a worker process gets it)."""

    concurrency: int | None  # the level asked (closed loop); None for a rate
    streams: tuple[int, ...] = ()  # closed loop: this part's streams, numbered across the level (ramp-up order)
    requests: int = 0  # closed loop: this part's measured requests
    warmup: int = 0
    offsets_s: tuple[float, ...] = ()  # open loop: this part's send times from the level's common start
    first_index: int = 0  # request indices first_index, first_index + index_step, ... (unique across parts)
    index_step: int = 1
    nonce: str = ""

    @property
    def sends_load(self) -> bool:
        return bool(self.streams or self.offsets_s)


def _shares(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder; sums to ``total``)."""
    wsum = sum(weights)
    if wsum <= 0:
        return [0] * len(weights)
    raw = [total * w / wsum for w in weights]
    out = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: out[i] - raw[i])[: total - sum(out)]:
        out[i] += 1
    return out


def split_level(settings: ProbeSettings, *, concurrency: int | None, nonce: str, parts: int) -> list[LevelPlan]:
    """A level as ``parts`` plans: stream k (or scheduled request k) goes to part
    k mod parts, measured requests and warm-ups in proportion to the streams."""
    if concurrency is not None:
        streams = [tuple(range(k, concurrency, parts)) for k in range(parts)]
        weights = [len(x) for x in streams]
        requests = _shares(settings.requests, weights)
        warm = _shares(settings.warmup_requests if settings.warmup_requests is not None else concurrency, weights)
        return [LevelPlan(concurrency=concurrency, streams=streams[k], requests=requests[k], warmup=warm[k],
                          first_index=k, index_step=parts, nonce=nonce) for k in range(parts)]
    s = settings
    offsets = arrival_offsets_s(rate_req_s=s.rate_req_s or 1.0, n=s.requests, arrival=s.arrival,
                                burstiness=s.burstiness, seed=s.seed)
    mine = [tuple(float(x) for x in offsets[k::parts]) for k in range(parts)]
    warm = _shares(s.warmup_requests if s.warmup_requests is not None else 1, [1] * parts)
    return [LevelPlan(concurrency=None, offsets_s=mine[k], warmup=warm[k], first_index=k, index_step=parts,
                      nonce=nonce) for k in range(parts)]


class _Level:
    """State shared by one level's requests in one process."""

    def __init__(self, settings: ProbeSettings, client: StreamClient, headers: dict[str, str],
                 plan: LevelPlan, cancel: asyncio.Event) -> None:
        self.s, self.client, self.headers, self.plan, self.cancel = settings, client, headers, plan, cancel
        self.records: list[RequestRecord] = []
        self.count = 0
        self.measured_done = 0  # for progress: a count, not a scan of the records per request

    async def one(self, *, warmup: bool, scheduled_ns: int | None = None) -> RequestRecord:
        idx = self.plan.first_index + self.plan.index_step * self.count
        self.count += 1
        rec = RequestRecord(index=idx, warmup=warmup, scheduled_ns=scheduled_ns or time.perf_counter_ns())
        self.records.append(rec)
        prompt = make_prompt(index=idx, prompt_tokens=self.s.prompt_tokens, nonce=self.plan.nonce,
                             shared_prefix=self.s.shared_prefix)
        try:
            return await stream_request(self.client, url=self.s.request_url, body=request_body(self.s, prompt),
                                        headers=self.headers, rec=rec, request_timeout_s=self.s.request_timeout_s)
        except Exception as exc:  # noqa: BLE001 - never counted as a success
            rec.error = "unexpected"
            rec.error_detail = clip(f"{type(exc).__name__}: {exc}", ERROR_DETAIL_CHARS, self.headers.values())
            rec.done_ns = rec.done_ns or time.perf_counter_ns()
            return rec
        finally:
            if not warmup:
                self.measured_done += 1


async def _gather_cancellable(tasks: list[asyncio.Task[Any]], cancel: asyncio.Event) -> None:
    if not tasks:
        return
    watcher = asyncio.create_task(cancel.wait())
    pending = set(tasks)
    while pending:
        done, pending = await asyncio.wait(pending | {watcher}, return_when=asyncio.FIRST_COMPLETED)
        pending.discard(watcher)
        if watcher in done:
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            break
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher


def _gc_before_level() -> None:
    """Keep the garbage collector out of the measured part.  Its passes stop the
    loop: measured here at 1,024 streams, full passes of 90-150 ms of CPU (they
    scan every object of the process) and younger ones of up to 18 ms, during
    which no token is read.  So, before the level's start time: collect, freeze
    what survives (the interpreter, the pool, the warm-up: never scanned again
    until the level ends) and pause automatic collection; the lag timer collects
    if the level's own new objects pass :data:`GC_DEFERRED_OBJECTS`."""
    gc.collect()
    gc.freeze()
    gc.disable()


def _gc_after_level() -> None:
    gc.enable()
    gc.unfreeze()


async def _until(t_ns: int, cancel: asyncio.Event) -> None:
    """Sleep until ``t_ns`` (perf_counter_ns) or the cancel flag, never returning
    early: uvloop's timers have 1 ms resolution and can fire up to a millisecond
    before their time, so a wait is resumed until the clock has passed ``t_ns``."""
    while not cancel.is_set():
        delay = (t_ns - time.perf_counter_ns()) / 1e9
        if delay <= 0:
            return
        if delay < UNTIL_SHORT_S:  # the last moments: a plain sleep (no watcher task per request)
            await asyncio.sleep(delay)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(cancel.wait(), timeout=delay)


async def _closed_loop(lv: _Level, t0_ns: int, progress: Progress | None, label: str) -> None:
    s, plan = lv.s, lv.plan
    assert plan.concurrency is not None  # noqa: S101 - a closed-loop plan
    await _until(t0_ns, lv.cancel)
    deadline = t0_ns + int(s.duration_s * 1e9)
    issued = 0

    async def worker(k: int) -> None:
        nonlocal issued
        if s.ramp_up_s > 0 and k:
            await _until(t0_ns + int(k * s.ramp_up_s / (plan.concurrency or 1) * 1e9), lv.cancel)
        while issued < plan.requests and time.perf_counter_ns() < deadline and not lv.cancel.is_set():
            issued += 1
            await lv.one(warmup=False)
            if progress:
                progress(label, lv.measured_done, plan.requests)

    await _gather_cancellable([asyncio.create_task(worker(k)) for k in plan.streams], lv.cancel)


async def _open_loop(lv: _Level, t0_ns: int, progress: Progress | None, label: str) -> None:
    s = lv.s
    deadline = t0_ns + int(s.duration_s * 1e9)
    tasks: list[asyncio.Task[Any]] = []
    for off in lv.plan.offsets_s:
        at = t0_ns + int(off * 1e9)
        if at > deadline or lv.cancel.is_set():
            break
        await _until(at, lv.cancel)
        if lv.cancel.is_set():
            break
        tasks.append(asyncio.create_task(lv.one(warmup=False, scheduled_ns=at)))
        if progress:
            progress(label, len(tasks), len(lv.plan.offsets_s))
    await _gather_cancellable(tasks, lv.cancel)


class LocalLoad:
    """Runs one level part at a time on this process's event loop and client
    (the whole level with one worker; a worker process's share with more)."""

    def __init__(self, settings: ProbeSettings, client: StreamClient, headers: dict[str, str],
                 cancel: asyncio.Event, *, manage_gc: bool = True) -> None:
        self.settings, self.client, self.headers, self.cancel = settings, client, headers, cancel
        self.manage_gc = manage_gc  # False where the process is shared (a page's server): its collector is left alone
        self._gc_paused = False
        self._lv: _Level | None = None

    async def warm(self, plans: Sequence[LevelPlan]) -> None:
        """Start a level (``plans``: this process's one part): its warm-up
        requests, excluded from the figures."""
        (plan,) = plans
        lv = self._lv = _Level(self.settings, self.client, self.headers, plan, self.cancel)
        if plan.concurrency is not None:  # the streams' warm-ups together
            await _gather_cancellable([asyncio.create_task(lv.one(warmup=True)) for _ in range(plan.warmup)],
                                      self.cancel)
        else:
            for _ in range(plan.warmup):  # one after another
                if self.cancel.is_set():
                    break
                await _gather_cancellable([asyncio.create_task(lv.one(warmup=True))], self.cancel)
        if self.manage_gc:
            _gc_before_level()
            self._gc_paused = True

    async def measure(self, t0_ns: int, progress: Progress | None = None,
                      label: str = "") -> tuple[list[RequestRecord], list[ClientStats]]:
        """The measured part from ``t0_ns`` (perf_counter_ns): the level's records
        (warm-ups included, marked) and, if this part sent load, its own figures."""
        lv, self._lv = self._lv, None
        if lv is None:
            raise RuntimeError("LocalLoad.measure() before warm()")
        await _until(t0_ns, self.cancel)
        mon = LagMonitor(gc_limit=GC_DEFERRED_OBJECTS if self.manage_gc else None)
        mon.start()
        try:
            if lv.plan.concurrency is not None:
                await _closed_loop(lv, t0_ns, progress, label)
            else:
                await _open_loop(lv, t0_ns, progress, label)
        finally:
            stats = mon.stop()
            self._resume_gc()
        return lv.records, [stats] if lv.plan.sends_load else []

    def _resume_gc(self) -> None:
        if self._gc_paused:
            self._gc_paused = False
            _gc_after_level()

    async def aclose(self) -> None:
        """Give the collector back if a level stopped between its warm-up and its measurement."""
        self._resume_gc()


async def watch_flag(event: _Flag, cancel: asyncio.Event) -> None:
    while not event.is_set():
        await asyncio.sleep(CANCEL_POLL_S)
    cancel.set()


