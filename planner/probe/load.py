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
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import numpy as np

from planner.errors import ProbeError
from planner.probe.client import ERROR_DETAIL_CHARS, RequestRecord, make_client, stream_request
from planner.probe.metrics import EngineSnapshot, engine_delta
from planner.probe.redact import check_api_key, clip
from planner.probe.safety import PinnedResolver, pin_urls
from planner.probe.scrape import Scraper
from planner.probe.settings import ProbeSettings
from planner.probe.summary import LevelSummary, ProbeRun, summarize_level

__all__ = [
    "CANCEL_POLL_S",
    "arrival_offsets_s",
    "base_url_for_record",
    "make_prompt",
    "new_run_id",
    "request_body",
    "run_probe",
    "run_probe_sync",
]

log = logging.getLogger(__name__)

# How often a run looks at a threading.Event cancel flag set by another thread.
CANCEL_POLL_S = 0.1

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
    words = " ".join(_WORDS[(index * 7 + k) % len(_WORDS)] if not shared_prefix else _WORDS[k % len(_WORDS)]
                     for k in range(n))
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


class _Level:
    """State shared by one level's requests."""

    def __init__(self, settings: ProbeSettings, client: aiohttp.ClientSession, headers: dict[str, str],
                 nonce: str, cancel: asyncio.Event) -> None:
        self.s, self.client, self.headers, self.nonce, self.cancel = settings, client, headers, nonce, cancel
        self.records: list[RequestRecord] = []
        self.next_index = 0

    async def one(self, *, warmup: bool, scheduled_ns: int | None = None) -> RequestRecord:
        idx = self.next_index
        self.next_index += 1
        rec = RequestRecord(index=idx, warmup=warmup, scheduled_ns=scheduled_ns or time.perf_counter_ns())
        self.records.append(rec)
        prompt = make_prompt(index=idx, prompt_tokens=self.s.prompt_tokens, nonce=self.nonce,
                             shared_prefix=self.s.shared_prefix)
        try:
            return await stream_request(self.client, url=self.s.request_url, body=request_body(self.s, prompt),
                                        headers=self.headers, rec=rec, request_timeout_s=self.s.request_timeout_s)
        except Exception as exc:  # noqa: BLE001 - never counted as a success
            rec.error = "unexpected"
            rec.error_detail = clip(f"{type(exc).__name__}: {exc}", ERROR_DETAIL_CHARS, self.headers.values())
            rec.done_ns = rec.done_ns or time.perf_counter_ns()
            return rec


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


async def _closed_loop(lv: _Level, concurrency: int, progress: Progress | None, label: str) -> None:
    s = lv.s
    deadline = time.perf_counter() + s.duration_s
    issued = 0

    async def worker(k: int) -> None:
        nonlocal issued
        if s.ramp_up_s > 0 and k:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lv.cancel.wait(), timeout=k * s.ramp_up_s / concurrency)
        while issued < s.requests and time.perf_counter() < deadline and not lv.cancel.is_set():
            issued += 1
            await lv.one(warmup=False)
            if progress:
                progress(label, sum(1 for r in lv.records if not r.warmup and r.done_ns), s.requests)

    await _gather_cancellable([asyncio.create_task(worker(k)) for k in range(concurrency)], lv.cancel)


async def _open_loop(lv: _Level, progress: Progress | None, label: str) -> None:
    s = lv.s
    offsets = arrival_offsets_s(rate_req_s=s.rate_req_s or 1.0, n=s.requests, arrival=s.arrival,
                                burstiness=s.burstiness, seed=s.seed)
    t0 = time.perf_counter_ns()
    deadline = t0 + int(s.duration_s * 1e9)
    tasks: list[asyncio.Task[Any]] = []
    for off in offsets:
        at = t0 + int(off * 1e9)
        if at > deadline or lv.cancel.is_set():
            break
        delay = (at - time.perf_counter_ns()) / 1e9
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lv.cancel.wait(), timeout=delay)
            if lv.cancel.is_set():
                break
        tasks.append(asyncio.create_task(lv.one(warmup=False, scheduled_ns=at)))
        if progress:
            progress(label, len(tasks), s.requests)
    await _gather_cancellable(tasks, lv.cancel)


async def _watch_thread_event(event: threading.Event, cancel: asyncio.Event) -> None:
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
) -> ProbeRun:
    """Measure every level of ``settings``.  The URL (and metrics URL) hosts are
    resolved once and checked against the allow-list before any connection, and
    only the checked addresses are connected to; ``api_key`` is sent as a bearer
    header, redacted from every error detail and kept nowhere else.

    ``cancel`` (same event loop) or ``cancel_event`` (any thread) stops the run:
    requests in flight are recorded as ``cancelled`` and the levels so far are
    returned (``cancelled: true``)."""
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
    pool = max(settings.levels or (1,)) if settings.rate_req_s is None else settings.max_concurrency
    levels: list[LevelSummary] = []
    all_snaps: list[EngineSnapshot] = []
    try:
        async with make_client(max_connections=pool, connect_timeout_s=settings.connect_timeout_s,
                               read_timeout_s=settings.read_timeout_s, resolver=resolver) as client, \
                make_client(max_connections=2, connect_timeout_s=settings.connect_timeout_s,
                            read_timeout_s=settings.read_timeout_s, resolver=resolver) as mclient:
            scrape = Scraper(mclient, murl, t0, settings.request_timeout_s)
            plan: list[tuple[int | None, float | None]] = (
                [(c, None) for c in settings.levels] if settings.rate_req_s is None
                else [(None, settings.rate_req_s)]
            )
            for conc, rate in plan:
                if cancel.is_set():
                    break
                lv = _Level(settings, client, headers, f"{nonce}{len(levels)}", cancel)
                label = f"concurrency {conc}" if conc is not None else f"rate {rate} req/s"
                if progress:
                    progress(f"{label}: warm-up", 0, settings.requests)
                snaps: list[EngineSnapshot] = []
                stop = asyncio.Event()
                if conc is not None:
                    # warm-up runs inside the level; the engine delta starts after it
                    warm = settings.warmup_requests if settings.warmup_requests is not None else conc
                    await _gather_cancellable([asyncio.create_task(lv.one(warmup=True)) for _ in range(warm)],
                                              cancel)
                else:
                    warm = settings.warmup_requests if settings.warmup_requests is not None else 1
                    for _ in range(warm):
                        if cancel.is_set():
                            break
                        await _gather_cancellable([asyncio.create_task(lv.one(warmup=True))], cancel)
                if (snap := await scrape.once()) is not None:
                    snaps.append(snap)
                scraper = asyncio.create_task(scrape.during(settings.metrics_interval_s, snaps, stop))
                if progress:
                    progress(label, 0, settings.requests)
                if conc is not None:
                    await _closed_loop(lv, conc, progress, label)
                else:
                    await _open_loop(lv, progress, label)
                stop.set()
                scraper.cancel()  # a scrape in flight is dropped, not waited for
                with contextlib.suppress(asyncio.CancelledError):
                    await scraper
                if (snap := await scrape.once()) is not None:
                    snaps.append(snap)
                all_snaps.extend(snaps)
                if cancel.is_set() and not any(not r.warmup for r in lv.records):
                    break  # cancelled before this level measured anything
                levels.append(summarize_level(
                    lv.records, concurrency=conc, rate_req_s=rate,
                    arrival="closed" if conc is not None else settings.arrival,
                    slo_ttft_s=settings.slo_ttft_s, slo_tpot_s=settings.slo_tpot_s,
                    engine=engine_delta(snaps) if snaps else None, keep_samples=settings.keep_samples,
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
    """``asyncio.run(run_probe(...))`` for the CLI, scripts and background threads
    (pass ``cancel_event=threading.Event()`` to stop it from another thread)."""
    return asyncio.run(run_probe(settings, **kwargs))
