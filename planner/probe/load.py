"""A probe run: every level of the settings, measured and summarised.

Each level is bounded by ``requests`` and ``duration_s`` (no new request after
the deadline), preceded by warm-up requests that are excluded, and can be
cancelled through an ``asyncio.Event`` or, from another thread (a page), a
``threading.Event``.  The load patterns are :mod:`planner.probe.level`.

Hosts are resolved and checked once before any connection and the run connects
only to the checked addresses (:mod:`planner.probe.safety`); ``/metrics`` scrapes
are bounded in time and bytes (:mod:`planner.probe.scrape`).

With ``workers`` > 1 (:mod:`planner.probe.workers`) each worker process holds
its share of the streams (or of the open-loop schedule, from one common start
time) and the parent merges their raw records, so every figure is computed from
all the samples together exactly as from one process.  Each part watches its
own event loop and CPU (:mod:`planner.probe.loop`); the level reports them
(``client``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import secrets
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from planner.errors import ProbeError
from planner.probe.client import make_client, make_scrape_client
from planner.probe.level import LevelPlan, LocalLoad, Progress, split_level, watch_flag
from planner.probe.loop import ClientStats, run_on_fastest_loop
from planner.probe.metrics import EngineSnapshot, engine_delta
from planner.probe.record import RequestRecord
from planner.probe.redact import check_api_key
from planner.probe.safety import PinnedResolver, pin_urls
from planner.probe.scrape import Scraper
from planner.probe.settings import ProbeSettings
from planner.probe.summary import LevelSummary, ProbeRun, summarize_level

__all__ = [
    "WORKER_START_MARGIN_NS",
    "base_url_for_record",
    "new_run_id",
    "run_probe",
    "run_probe_sync",
]

log = logging.getLogger(__name__)

# With workers, the measured part starts this far after the parent's "go": the
# message reaches every worker process (a pipe write and a wake-up, well under a
# millisecond idle, tens of ms on a loaded machine) before the common start.
WORKER_START_MARGIN_NS = 50_000_000

def new_run_id() -> str:
    return "probe-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


class _Load(Protocol):
    async def warm(self, plans: Sequence[LevelPlan]) -> None: ...

    async def measure(self, t0_ns: int, progress: Progress | None = None,
                      label: str = "") -> tuple[list[RequestRecord], list[ClientStats]]: ...

    async def aclose(self) -> None: ...


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
        if exc is not None or result is None:
            fut.set_exception(exc or RuntimeError("resolver thread gave no result"))
        else:
            fut.set_result(result)

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
    watcher = asyncio.create_task(watch_flag(cancel_event, cancel)) if cancel_event is not None else None
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
            mclient = await stack.enter_async_context(make_scrape_client(
                max_connections=2, connect_timeout_s=settings.connect_timeout_s,
                read_timeout_s=settings.read_timeout_s, resolver=resolver))
            scrape = Scraper(mclient, murl, t0, settings.request_timeout_s)
            load: _Load
            if settings.workers > 1 or settings.separate_process:
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
                pooled = settings.workers > 1 or settings.separate_process
                start_ns = time.perf_counter_ns() + (WORKER_START_MARGIN_NS if pooled else 0)
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
