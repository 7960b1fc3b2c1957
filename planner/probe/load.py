"""Load patterns and the run that drives them.

- Closed loop (a concurrency sweep 1, 2, 4 … N): N workers each send the next
  request as soon as their previous one finishes; ``ramp_up_s`` staggers their
  first requests evenly (0: all start together and stay in step).
- Open loop at a rate: constant gaps, Poisson (exponential gaps) or gamma gaps
  with shape ``burstiness`` (1 = Poisson, < 1 burstier, as vLLM's benchmark).
  Scheduled times are fixed in advance, so client-side queueing (the pool is
  capped at ``max_concurrency``) shows up in TTFT.

Each level is bounded by ``requests`` and ``duration_s`` (no new request after
the deadline), preceded by warm-up requests that are excluded, and can be
cancelled through an ``asyncio.Event`` or, from another thread (a page), a
``threading.Event``.  Prompts are made unique per request (an index up front)
unless ``shared_prefix`` is asked for.

Hosts are resolved and checked once before any connection and the run connects
only to the checked addresses (:mod:`planner.probe.safety`); ``/metrics`` scrapes
are bounded in time and bytes (:mod:`planner.probe.scrape`).

A level is planned as parts (:class:`LevelPlan`), one per process sending load:
with ``workers`` > 1 (:mod:`planner.probe.workers`) each process holds its share
of the streams (or of the open-loop schedule, from one common start time) and
the parent merges their raw records, so every figure is computed from all the
samples together exactly as from one process.  Each part watches its own event
loop and CPU (:mod:`planner.probe.loop`); the level reports them (``client``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gc
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import numpy as np

from planner.errors import ProbeError
from planner.probe.client import ERROR_DETAIL_CHARS, RequestRecord, make_client, stream_request
from planner.probe.loop import ClientStats, LagMonitor, run_on_fastest_loop
from planner.probe.metrics import EngineSnapshot, engine_delta
from planner.probe.redact import check_api_key, clip
from planner.probe.safety import PinnedResolver, pin_urls
from planner.probe.scrape import Scraper
from planner.probe.settings import ProbeSettings
from planner.probe.summary import LevelSummary, ProbeRun, summarize_level

__all__ = [
    "CANCEL_POLL_S",
    "WORKER_START_MARGIN_NS",
    "LevelPlan",
    "LocalLoad",
    "arrival_offsets_s",
    "base_url_for_record",
    "make_prompt",
    "new_run_id",
    "request_body",
    "run_probe",
    "run_probe_sync",
    "split_level",
]

log = logging.getLogger(__name__)

# How often a run looks at a threading.Event cancel flag set by another thread.
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
# With workers, the measured part starts this far after the parent's "go": the
# message reaches every worker process (a pipe write and a wake-up, well under a
# millisecond idle, tens of ms on a loaded machine) before the common start.
WORKER_START_MARGIN_NS = 50_000_000

_WORDS = (
    "the quick brown fox jumps over a lazy dog while seven tall ships sail past an old harbor "
    "under grey clouds and bright stars as small birds sing near green fields of wheat corn rice"
).split()

Progress = Callable[[str, int, int], None]


def new_run_id() -> str:
    return "probe-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


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

    def __init__(self, settings: ProbeSettings, client: aiohttp.ClientSession, headers: dict[str, str],
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

    def __init__(self, settings: ProbeSettings, client: aiohttp.ClientSession, headers: dict[str, str],
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


class _Load(Protocol):
    async def warm(self, plans: Sequence[LevelPlan]) -> None: ...

    async def measure(self, t0_ns: int, progress: Progress | None = None,
                      label: str = "") -> tuple[list[RequestRecord], list[ClientStats]]: ...

    async def aclose(self) -> None: ...


async def _watch_thread_event(event: _Flag, cancel: asyncio.Event) -> None:
    while not event.is_set():
        await asyncio.sleep(CANCEL_POLL_S)
    cancel.set()


async def _checked_resolver(settings: ProbeSettings, murl: str | None) -> PinnedResolver:
    """Resolve each host once and check every address, within the connect timeout.

    The system resolver cannot be interrupted, so it runs on a daemon thread of
    its own (not the loop's executor, whose shutdown would wait for it): a DNS
    server that never answers costs the timeout, not the process."""
    urls = tuple(u for u in (settings.request_url, murl) if u)
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[PinnedResolver] = loop.create_future()

    def settle(result: PinnedResolver | None, exc: BaseException | None) -> None:
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result: PinnedResolver | None = pin_urls(urls)
            exc: BaseException | None = None
        except Exception as e:  # noqa: BLE001 - handed to the waiting coroutine
            result, exc = None, e
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, result, exc)

    threading.Thread(target=work, name="ridgeline-resolve", daemon=True).start()
    try:
        return await asyncio.wait_for(fut, timeout=settings.connect_timeout_s)
    except TimeoutError:
        raise ProbeError(f"url: resolving the host took over {settings.connect_timeout_s:g} s") from None


async def run_probe(
    settings: ProbeSettings,
    *,
    api_key: str | None = None,
    cancel: asyncio.Event | None = None,
    cancel_event: threading.Event | None = None,
    progress: Progress | None = None,
    run_id: str | None = None,
    manage_gc: bool = True,
) -> ProbeRun:
    """Measure every level of ``settings``.  The URL (and metrics URL) hosts are
    resolved once and checked against the allow-list before any connection, and
    only the checked addresses are connected to; ``api_key`` is sent as a bearer
    header, redacted from every error detail and kept nowhere else.

    ``cancel`` (same event loop) or ``cancel_event`` (any thread) stops the run:
    requests in flight are recorded as ``cancelled`` and the levels so far are
    returned (``cancelled: true``).

    ``manage_gc`` keeps the garbage collector out of each measured part (see
    ``_gc_before_level``); pass False where the process is shared with other
    work (a page's server), whose collector the run then leaves alone."""
    api_key = check_api_key(api_key or None)
    murl = settings.resolved_metrics_url
    resolver = await _checked_resolver(settings, murl)
    cancel = cancel or asyncio.Event()
    if cancel_event is not None and cancel_event.is_set():
        cancel.set()
    watcher = asyncio.create_task(_watch_thread_event(cancel_event, cancel)) if cancel_event is not None else None
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    run_id = run_id or new_run_id()
    nonce = secrets.token_hex(4)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter_ns()
    levels: list[LevelSummary] = []
    all_snaps: list[EngineSnapshot] = []
    plan: list[tuple[int | None, float | None]] = (
        [(c, None) for c in settings.levels] if settings.rate_req_s is None else [(None, settings.rate_req_s)])
    try:
        async with contextlib.AsyncExitStack() as stack:
            mclient = await stack.enter_async_context(make_client(
                max_connections=2, connect_timeout_s=settings.connect_timeout_s,
                read_timeout_s=settings.read_timeout_s, resolver=resolver))
            scrape = Scraper(mclient, murl, t0, settings.request_timeout_s)
            load: _Load
            if settings.workers > 1:
                from planner.probe.workers import WorkerPool

                load = await WorkerPool.start(settings, headers=headers, resolver=resolver, cancel=cancel)
            else:
                pool = max(settings.levels or (1,)) if settings.rate_req_s is None else settings.max_concurrency
                client = await stack.enter_async_context(make_client(
                    max_connections=pool, connect_timeout_s=settings.connect_timeout_s,
                    read_timeout_s=settings.read_timeout_s, resolver=resolver))
                load = LocalLoad(settings, client, headers, cancel, manage_gc=manage_gc)
            stack.push_async_callback(load.aclose)
            for conc, rate in plan:
                if cancel.is_set():
                    break
                label = f"concurrency {conc}" if conc is not None else f"rate {rate} req/s"
                if progress:
                    progress(f"{label}: warm-up", 0, settings.requests)
                snaps: list[EngineSnapshot] = []
                stop = asyncio.Event()
                # warm-up runs inside the level; the engine delta starts after it
                await load.warm(split_level(settings, concurrency=conc, nonce=f"{nonce}{len(levels)}",
                                            parts=settings.workers))
                if (snap := await scrape.once()) is not None:
                    snaps.append(snap)
                scraper = asyncio.create_task(scrape.during(settings.metrics_interval_s, snaps, stop))
                if progress:
                    progress(label, 0, settings.requests)
                # with workers, one start time a little ahead, so every process begins together
                start_ns = time.perf_counter_ns() + (WORKER_START_MARGIN_NS if settings.workers > 1 else 0)
                records, client_stats = await load.measure(start_ns, progress, label)
                stop.set()
                scraper.cancel()  # a scrape in flight is dropped, not waited for
                with contextlib.suppress(asyncio.CancelledError):
                    await scraper
                if (snap := await scrape.once()) is not None:
                    snaps.append(snap)
                all_snaps.extend(snaps)
                if cancel.is_set() and not any(not r.warmup for r in records):
                    break  # cancelled before this level measured anything
                levels.append(summarize_level(
                    records, concurrency=conc, rate_req_s=rate,
                    arrival="closed" if conc is not None else settings.arrival,
                    slo_ttft_s=settings.slo_ttft_s, slo_tpot_s=settings.slo_tpot_s,
                    engine=engine_delta(snaps) if snaps else None, keep_samples=settings.keep_samples,
                    client=client_stats,
                ))
                eng = levels[-1].engine
                if settings.stop_when_kv_full and ((eng.preemptions or 0) > 0 or (eng.kv_usage_max or 0) >= 0.95):
                    log.info("KV full at %s; sweep stopped", label)
                    break
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    engine = next((s.engine for s in all_snaps if s.engine), None)
    return ProbeRun(
        run_id=run_id, url=base_url_for_record(settings.url), model=settings.model, endpoint=settings.endpoint,
        pattern="concurrency" if settings.rate_req_s is None else "rate",
        prompt_tokens=settings.prompt_tokens, output_tokens=settings.output_tokens, started_at=started,
        duration_s=(time.perf_counter_ns() - t0) / 1e9, cancelled=cancel.is_set(),
        levels=tuple(levels),
        settings={**settings.model_dump(mode="json"), "url": base_url_for_record(settings.url),
                  "metrics_url": base_url_for_record(settings.metrics_url or "") or None},
        metrics={"url": base_url_for_record(murl) if murl else None, "engine": engine, "available": bool(all_snaps),
                 "samples": [s.model_dump(mode="json") for s in all_snaps],
                 "scrape_failures": dict(scrape.failures)},
    )


def base_url_for_record(url: str) -> str:
    """The URL as recorded: no user:password part, query string or fragment."""
    out = url.split("#", 1)[0].split("?", 1)[0]
    scheme, sep, rest = out.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        authority, slash, path = rest.partition("/")
        out = f"{scheme}://{authority.rsplit('@', 1)[1]}{slash}{path}"
    return out


def run_probe_sync(settings: ProbeSettings, **kwargs: Any) -> ProbeRun:
    """``run_probe(...)`` on the fastest event loop available (uvloop, else
    asyncio), for the CLI, scripts and background threads (pass
    ``cancel_event=threading.Event()`` to stop it from another thread)."""
    return run_on_fastest_loop(run_probe(settings, **kwargs))
