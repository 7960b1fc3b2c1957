"""Per-level summaries of raw request records, and the probe run that holds them.

Definitions (tools disagree, so they are spelled out):

- ``ttft_s``: first token-bearing chunk − scheduled time (client-side queueing
  counts); ``ttft_sent_s``: first token-bearing chunk − sent time.
- ``tpot_s`` per request: (last token time − first token time) / (output tokens − 1).
- ``itl_s``: every gap between consecutive token-bearing chunks: its count and
  mean are exact; its percentiles are exact while every request has at most
  ``MAX_ITL_SAMPLES_PER_REQUEST`` + 1 token chunks (each request keeps every
  gap), and past that estimates from each request's evenly spread sample of
  its gaps, weighted by how many gaps each sample stands for
  (planner.probe.record: a record's size does not grow with its stream).
- ``e2e_s``: last chunk − scheduled time.
- Output tokens: the server's ``usage.completion_tokens`` first, else the count
  of token-bearing chunks; ``token_count_source`` says which.
- ``goodput_req_s``: requests per second meeting both SLOs (TTFT ≤ slo.ttft_s
  and TPOT ≤ slo.itl_s); failures count as violations.
- Latencies use successful, non-warm-up requests; throughput is over the
  level's wall time (first scheduled to last finished).
- ``client`` (:class:`ClientReport`): the client's own figures over the level:
  event-loop lag p50/p99, CPU share (CPU seconds of the processes sending the
  load per wall second: 1.0 is one core), the concurrency held (the requests'
  in-flight time, scheduled to finished, over the level's wall time: the
  time-weighted mean of requests in flight, ramp-up and tail included) against
  the requested, and a warning when the client's delay is in the figures
  (thresholds in :mod:`planner.probe.loop`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.io.export import csv_text, flatten
from planner.probe.loop import CPU_SHARE_WARN, LOOP_LAG_P99_WARN_S, ClientStats
from planner.probe.metrics import EngineDelta
from planner.probe.prediction import PredictedLevel
from planner.probe.record import RequestRecord

__all__ = ["CANCELLED", "ClientReport", "LevelSummary", "ProbeRun", "RequestSample", "Stats", "client_report", "failure_summary",
           "first_failure", "itl_stats", "level_label", "stats", "summarize_level"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Stats(BaseModel):
    """Mean and percentiles (None when there are no samples)."""

    model_config = _FROZEN
    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


def _weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs: Sequence[float]) -> list[float]:
    """Percentiles of a weighted sample: each value stands for ``weight`` observations
    (the midpoint rule on the weighted empirical distribution)."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    mid = (cum - w / 2) / cum[-1]
    return [float(np.interp(q / 100, mid, v)) for q in qs]


def itl_stats(records: Sequence[RequestRecord]) -> Stats:
    """Every inter-token gap of ``records``, from their exact counts and sums and their
    kept samples (exact percentiles while every request kept all its gaps)."""
    count = sum(r.itl_count for r in records)
    if not count:
        return Stats()
    mean = sum(r.itl_sum_ns for r in records) / count / 1e9
    kept = [r for r in records if r.itl_count]
    values = np.concatenate([np.frombuffer(r.itl_kept_ns, dtype=np.int64) for r in kept]).astype(float) / 1e9
    if all(len(r.itl_kept_ns) == r.itl_count for r in kept):
        p50, p90, p99 = (float(x) for x in np.percentile(values, [50, 90, 99]))
    else:
        weights = np.concatenate([np.full(len(r.itl_kept_ns), r.itl_count / len(r.itl_kept_ns)) for r in kept])
        p50, p90, p99 = _weighted_percentiles(values, weights, [50, 90, 99])
    return Stats(count=count, mean=mean, p50=p50, p90=p90, p99=p99)


def stats(values: Sequence[float]) -> Stats:
    if not len(values):
        return Stats()
    a = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return Stats(count=len(a), mean=float(a.mean()), p50=float(p50), p90=float(p90), p99=float(p99))


class RequestSample(BaseModel):
    """One request's derived figures (kept with the run; seconds from level start)."""

    model_config = _FROZEN
    index: int
    scheduled_s: float
    sent_s: float
    done_s: float
    first_token_s: float | None = None
    last_token_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    output_tokens: int = 0
    token_chunks: int = 0
    prompt_tokens: int | None = None
    token_count_source: str = "chunks"
    error: str | None = None
    error_detail: str = ""


class ClientReport(BaseModel):
    """What the probe's client measured of itself during one level."""

    model_config = _FROZEN
    event_loop: str  # "uvloop" or "asyncio"
    workers: int = 1  # processes that sent the load
    loop_lag_p50_s: float | None = None
    loop_lag_p99_s: float | None = None
    loop_lag_samples: int = 0
    cpu_share: float | None = None  # summed over the workers: at most `workers`
    cpu_share_max_worker: float | None = None
    held_concurrency: float = 0.0
    requested_concurrency: int | None = None  # None for an open-loop rate
    warning: str | None = None


def client_report(parts: Sequence[ClientStats], records: Sequence[RequestRecord], *,
                  requested_concurrency: int | None) -> ClientReport:
    """Merge the processes' own figures for one level (lag percentiles from every
    reading together, CPU seconds summed over the level's wall time) and the
    concurrency the records held."""
    recs = [r for r in records if not r.warmup]
    t0 = min((r.scheduled_ns for r in recs), default=0)
    t1 = max((r.done_ns for r in recs), default=t0)
    held = sum(max(r.done_ns - r.scheduled_ns, 0) for r in recs) / (t1 - t0) if t1 > t0 else 0.0
    lags = [x for p in parts for x in p.lags_s]
    p50 = p99 = None
    if lags:
        p50, p99 = (float(v) for v in np.percentile(np.asarray(lags, dtype=float), [50, 99]))
    cpu = cpu_max = None
    if parts:
        start, end = min(p.start_ns for p in parts), max(p.end_ns for p in parts)
        cpu = sum(p.cpu_s for p in parts) / (max(end - start, 1) / 1e9)
        cpu_max = max(p.cpu_share for p in parts)
    reasons = []
    if p99 is not None and p99 > LOOP_LAG_P99_WARN_S:
        reasons.append(f"event-loop lag p99 {p99 * 1e3:.1f} ms (over {LOOP_LAG_P99_WARN_S * 1e3:.0f} ms)")
    if cpu_max is not None and cpu_max > CPU_SHARE_WARN:
        reasons.append(f"a client process used {cpu_max:.0%} of a core (over {CPU_SHARE_WARN:.0%})")
    warning = None
    if reasons:
        warning = ("TTFT and TPOT include client delay: " + "; ".join(reasons)
                   + ". Use more client processes (the CLI's --workers, the Live probe page's \"Client processes\"), "
                   "fewer streams or a less loaded machine.")
    names = sorted({p.event_loop for p in parts})
    return ClientReport(
        event_loop="+".join(names) if names else "none", workers=max(len(parts), 1),
        loop_lag_p50_s=p50, loop_lag_p99_s=p99, loop_lag_samples=len(lags), cpu_share=cpu,
        cpu_share_max_worker=cpu_max, held_concurrency=held, requested_concurrency=requested_concurrency,
        warning=warning,
    )


class LevelSummary(BaseModel):
    """One load level: a closed-loop concurrency or an open-loop rate."""

    model_config = _FROZEN
    concurrency: int | None = None
    rate_req_s: float | None = None
    arrival: str = "closed"
    requests: int
    failures: int
    failure_reasons: dict[str, int] = {}
    duration_s: float
    ttft_s: Stats
    ttft_sent_s: Stats
    tpot_s: Stats
    itl_s: Stats
    e2e_s: Stats
    output_tokens_total: int
    prompt_tokens_mean: float | None = None
    output_tok_s: float
    req_s: float
    goodput_req_s: float
    token_count_source: str | None = None
    engine: EngineDelta = EngineDelta()
    client: ClientReport | None = None  # None in runs stored before issue 17
    samples: tuple[RequestSample, ...] = ()


def _s(ns: int | None, t0: int) -> float | None:
    return None if ns is None else (ns - t0) / 1e9


def _sample(r: RequestRecord, t0: int) -> RequestSample:
    toks = r.output_tokens
    ttft = None if r.first_token_ns is None else (r.first_token_ns - r.scheduled_ns) / 1e9
    tpot = None
    if r.first_token_ns is not None and r.last_token_ns is not None and toks > 1:
        tpot = (r.last_token_ns - r.first_token_ns) / 1e9 / (toks - 1)
    end = r.last_chunk_ns if r.last_chunk_ns is not None else r.done_ns
    return RequestSample(
        index=r.index, scheduled_s=(r.scheduled_ns - t0) / 1e9, sent_s=(r.sent_ns - t0) / 1e9,
        done_s=(r.done_ns - t0) / 1e9, first_token_s=_s(r.first_token_ns, t0), last_token_s=_s(r.last_token_ns, t0),
        ttft_s=ttft, tpot_s=tpot, e2e_s=(end - r.scheduled_ns) / 1e9, output_tokens=toks,
        token_chunks=r.token_chunks, prompt_tokens=r.prompt_tokens, token_count_source=r.token_count_source,
        error=r.error, error_detail=r.error_detail,
    )


def summarize_level(
    records: Sequence[RequestRecord],
    *,
    concurrency: int | None = None,
    rate_req_s: float | None = None,
    arrival: str = "closed",
    slo_ttft_s: float,
    slo_tpot_s: float,
    engine: EngineDelta | None = None,
    keep_samples: bool = True,
    client: Sequence[ClientStats] | None = None,
) -> LevelSummary:
    """Summarize the measured (non-warm-up) records of one level."""
    recs = [r for r in records if not r.warmup]
    ok = [r for r in recs if r.ok]
    t0 = min((r.scheduled_ns for r in recs), default=0)
    t1 = max((r.done_ns for r in recs), default=t0)
    duration = max((t1 - t0) / 1e9, 1e-9)
    samples = [_sample(r, t0) for r in recs]
    good = [s for s in samples if s.error is None]
    sources = {r.token_count_source for r in ok}
    prompt = [p for r in ok if (p := r.prompt_tokens) is not None]
    meets = sum(
        1 for s in good
        if s.ttft_s is not None and s.ttft_s <= slo_ttft_s and (s.tpot_s is None or s.tpot_s <= slo_tpot_s)
    )
    out_total = sum(s.output_tokens for s in good)
    return LevelSummary(
        concurrency=concurrency, rate_req_s=rate_req_s, arrival=arrival,
        requests=len(recs), failures=len(recs) - len(ok),
        failure_reasons=dict(Counter(r.error for r in recs if r.error)),
        duration_s=duration,
        ttft_s=stats([s.ttft_s for s in good if s.ttft_s is not None]),
        ttft_sent_s=stats([(r.first_token_ns - r.sent_ns) / 1e9 for r in ok if r.first_token_ns is not None]),
        tpot_s=stats([s.tpot_s for s in good if s.tpot_s is not None]),
        itl_s=itl_stats(ok),
        e2e_s=stats([s.e2e_s for s in good if s.e2e_s is not None]),
        output_tokens_total=out_total,
        prompt_tokens_mean=float(np.mean(prompt)) if prompt else None,
        output_tok_s=out_total / duration,
        req_s=len(ok) / duration,
        goodput_req_s=meets / duration,
        token_count_source=None if not sources else (sources.pop() if len(sources) == 1 else "mixed"),
        engine=engine or EngineDelta(),
        client=None if client is None else client_report(client, recs, requested_concurrency=concurrency),
        samples=tuple(samples) if keep_samples else (),
    )


def level_label(lv: LevelSummary) -> str:
    """``concurrency 8`` or ``rate 2.5 req/s``."""
    return f"concurrency {lv.concurrency}" if lv.concurrency is not None else f"rate {lv.rate_req_s:g} req/s"


CANCELLED = "cancelled"  # the reason of a request stopped by the user's cancel: not the endpoint's failure


def first_failure(lv: LevelSummary) -> RequestSample | None:
    """The level's first failed request (not one the user cancelled), or None."""
    return next((smp for smp in lv.samples if smp.error and smp.error != CANCELLED), None)


def failure_summary(lv: LevelSummary, *, detail: bool = True) -> str | None:
    """One line on a level's failures, with their reasons and (``detail``) the first
    one's detail (already redacted and cut), or None when none failed.  Requests the
    user cancelled are not failures of the endpoint and are left out.  The detail is
    the endpoint's text: a page shows it apart, as text (``detail=False`` here)."""
    reasons = {k: n for k, n in lv.failure_reasons.items() if k != CANCELLED}
    failed = sum(reasons.values())
    if not failed:
        return None
    listed = ", ".join(f"{reason} × {n}" for reason, n in sorted(reasons.items(), key=lambda x: -x[1]))
    first = first_failure(lv) if detail else None
    said = f"; first: {first.error} ({first.error_detail})" if first is not None and first.error_detail else ""
    asked = lv.requests - lv.failure_reasons.get(CANCELLED, 0)
    return f"{level_label(lv)}: {failed} of {asked} requests failed: {listed}{said}"


_LEVEL_CSV_SKIP = ("samples", "failure_reasons")


class ProbeRun(BaseModel):
    """A whole probe: its settings (never the API key), levels, engine series,
    and, with a scenario, predictions and calibration."""

    model_config = _FROZEN
    run_id: str
    url: str
    model: str
    endpoint: str
    pattern: str  # "concurrency" or "rate"
    prompt_tokens: int
    output_tokens: int
    started_at: str
    duration_s: float = 0.0  # the whole run on the probe's monotonic clock (after the host check)
    cancelled: bool = False  # stopped before its plan finished; levels hold what was measured
    levels: tuple[LevelSummary, ...]
    settings: dict[str, Any] = {}  # the ProbeSettings (they never hold the API key)
    metrics: dict[str, Any] = {}
    predicted: tuple[PredictedLevel, ...] | None = None  # with a scenario: per level, in order
    calibration: dict[str, Any] | None = None

    @property
    def succeeded(self) -> int:
        """Measured requests that succeeded, over every level."""
        return sum(lv.requests - lv.failures for lv in self.levels)

    @property
    def outcome(self) -> str:
        """``ok`` (every measured request succeeded), ``partial`` (some failed),
        ``failed`` (none succeeded) or ``empty`` (nothing was measured); requests
        the user cancelled count for none of these."""
        asked = sum(lv.requests - lv.failure_reasons.get(CANCELLED, 0) for lv in self.levels)
        if not asked:
            return "empty"
        return "failed" if not self.succeeded else "ok" if self.succeeded == asked else "partial"

    def to_json_dict(self, *, samples: bool = False) -> dict[str, Any]:
        """JSON-ready dict; per-request samples only when asked (they are large)."""
        data = self.model_dump(mode="json")
        if not samples:
            for lv in data["levels"]:
                lv.pop("samples", None)
        if self.predicted is not None:
            for lv, pred in zip(data["levels"], self.predicted, strict=True):
                lv.update(pred.model_dump(mode="json"))
        return data

    def csv_rows(self) -> list[dict[str, Any]]:
        """One flat row per level (run fields first)."""
        head: dict[str, Any] = {"run_id": self.run_id, "url": self.url, "model": self.model, "endpoint": self.endpoint}
        rows = []
        for i, lv in enumerate(self.levels):
            row = dict(head)
            row.update(flatten({k: v for k, v in lv.model_dump(mode="json").items() if k not in _LEVEL_CSV_SKIP}))
            for reason, n in sorted(lv.failure_reasons.items()):
                row[f"failures.{reason}"] = n
            if self.predicted is not None:
                row.update(flatten(self.predicted[i].model_dump(mode="json")))
            rows.append(row)
        return rows

    def csv_text(self) -> str:
        return csv_text(self.csv_rows())

    def sample_rows(self) -> list[dict[str, Any]]:
        """Every request of every level, one flat row each."""
        rows = []
        for lv in self.levels:
            for s in lv.samples:
                rows.append({"concurrency": lv.concurrency, "rate_req_s": lv.rate_req_s, **s.model_dump(mode="json")})
        return rows

