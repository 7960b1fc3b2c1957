"""Bounded ``/metrics`` scrapes: each within :data:`METRICS_TIMEOUT_S` (or the
request timeout, if shorter) and :data:`MAX_METRICS_BYTES`; a failed scrape is
counted by reason (``timeout``, ``too_large``, ``http_<status>``,
``not_prometheus``, ``connection``, ``unexpected``) and never fails the run;
after :data:`MAX_SCRAPE_FAILURES_IN_A_ROW` the run stops scraping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter

import aiohttp

from planner.errors import PlannerError
from planner.probe.client import read_capped
from planner.probe.metrics import EngineSnapshot, parse_metrics

__all__ = ["MAX_METRICS_BYTES", "MAX_SCRAPE_FAILURES_IN_A_ROW", "METRICS_TIMEOUT_S", "Scraper"]

log = logging.getLogger(__name__)

# One /metrics scrape: engines answer in milliseconds (the page is rendered from
# in-memory counters); 5 s tolerates a saturated server, and a page that trickles
# is cut there.  A shorter --timeout-s applies to scrapes too.
METRICS_TIMEOUT_S = 5.0
# One /metrics page: llama.cpp's is 2.6 KB (measured: llama-server 0.3.36 after one
# request); a vLLM or SGLang page for one model is estimated at tens of KB from its
# metric list (a few dozen histograms of 10-40 buckets; not measured here), so
# 2 MiB leaves ample room.  Parsing runs at about 6 MB/s here (measured: a 3.9 MB
# page took 0.64 s), so a full page costs at most a third of a second, off the event loop.
MAX_METRICS_BYTES = 2 * 1024 * 1024
# Consecutive failed scrapes after which the run stops scraping (the endpoint's
# /metrics is broken or hostile; its requests are still measured).
MAX_SCRAPE_FAILURES_IN_A_ROW = 3


class _TooLarge(Exception):
    pass


class Scraper:
    """Bounded /metrics scrapes of one run, their failures counted by reason."""

    def __init__(self, client: aiohttp.ClientSession, url: str | None, t0_ns: int, timeout_s: float) -> None:
        self.client, self.url, self.t0_ns = client, url, t0_ns
        self.timeout_s = min(timeout_s, METRICS_TIMEOUT_S)
        self.failures: Counter[str] = Counter()
        self.in_a_row = 0

    @property
    def active(self) -> bool:
        return self.url is not None and self.in_a_row < MAX_SCRAPE_FAILURES_IN_A_ROW

    async def _fetch(self, url: str) -> EngineSnapshot:
        async with asyncio.timeout(self.timeout_s):
            async with self.client.get(url, allow_redirects=False) as resp:
                if resp.status != 200:
                    raise aiohttp.ClientResponseError(resp.request_info, (), status=resp.status)
                if (resp.content_length or 0) > MAX_METRICS_BYTES:
                    raise _TooLarge
                raw = await read_capped(resp.content, MAX_METRICS_BYTES + 1)
            if len(raw) > MAX_METRICS_BYTES:
                raise _TooLarge
            t_s = (time.perf_counter_ns() - self.t0_ns) / 1e9
            return await asyncio.to_thread(parse_metrics, raw.decode("utf-8", "replace"), t_s=t_s)

    async def once(self) -> EngineSnapshot | None:
        if not self.active or self.url is None:
            return None
        try:
            snap = await self._fetch(self.url)
        except Exception as exc:  # noqa: BLE001 - a scrape never fails the run
            reason = (f"http_{exc.status}" if isinstance(exc, aiohttp.ClientResponseError)
                      else "too_large" if isinstance(exc, _TooLarge)
                      else "timeout" if isinstance(exc, TimeoutError)
                      else "not_prometheus" if isinstance(exc, PlannerError)
                      else "connection" if isinstance(exc, aiohttp.ClientError | OSError) else "unexpected")
            self.failures[reason] += 1
            self.in_a_row += 1
            log.info("metrics scrape failed: %s", reason)
            return None
        self.in_a_row = 0
        return snap

    async def during(self, interval_s: float, out: list[EngineSnapshot], stop: asyncio.Event) -> None:
        while not stop.is_set() and self.active:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
            if stop.is_set():
                return
            snap = await self.once()
            if snap is not None:
                out.append(snap)
