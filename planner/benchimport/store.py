"""An imported run is stored as a probe run is: the same record (``probe_runs``), so a
probe run and an imported run show side by side in history.

The stored summary is a :class:`~planner.probe.summary.ProbeRun` (one level per load
point, latencies as ``Stats``), with ``url`` = ``import:<tool>:<file name>`` (a name,
never a path), ``endpoint`` = ``import``, and the settings saying where it came from:
``source: "import"``, the tool and its version, the file name, the setup the user gave,
the figures the tool does not report (``not_measured``: stored as 0, never read back as
measurements) and the whole :class:`~planner.benchimport.model.BenchRun`, so reading
it back gives exactly what was imported.  A stored run (either kind) or a live probe run
reads back as a BenchRun with :func:`bench_run_from_probe` / :func:`bench_run_from_summary`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Engine

from planner.benchimport.model import BenchLevel, BenchRun, LatencyStats
from planner.benchimport.setup import BenchSetup
from planner.errors import ScenarioError
from planner.probe.persist import save_run
from planner.probe.summary import LevelSummary, ProbeRun, Stats

__all__ = ["IMPORT_SOURCE", "bench_run_from_probe", "bench_run_from_summary", "save_bench_run", "to_probe_run"]

IMPORT_SOURCE = "import"


def _stats(s: LatencyStats, count: int) -> Stats:
    return Stats(count=count, mean=s.mean, p50=s.p50, p90=s.p90, p99=s.p99)


def _level(lv: BenchLevel) -> tuple[LevelSummary, list[str]]:
    missing = [k for k in ("output_tok_s", "req_s", "duration_s") if getattr(lv, k) is None] + ["goodput_req_s"]
    ok = lv.completed or 0
    failed = lv.failed or 0
    duration = lv.duration_s or (ok / lv.req_s if lv.req_s else 0.0)
    conc = None if lv.concurrency is None else max(1, round(lv.concurrency))
    return LevelSummary(
        concurrency=conc, rate_req_s=lv.request_rate, arrival="closed" if conc is not None else "poisson",
        requests=ok + failed, failures=failed, duration_s=duration,
        ttft_s=_stats(lv.ttft_s, ok), ttft_sent_s=_stats(lv.ttft_s, ok), tpot_s=_stats(lv.tpot_s, ok),
        itl_s=_stats(lv.itl_s, ok), e2e_s=_stats(lv.e2e_s, ok),
        output_tokens_total=round((lv.output_tokens or 0) * ok), prompt_tokens_mean=lv.prompt_tokens,
        output_tok_s=lv.output_tok_s or 0.0, req_s=lv.req_s or 0.0, goodput_req_s=0.0,
        token_count_source="imported",
    ), missing


def to_probe_run(run: BenchRun, setup: BenchSetup | None = None, *, now: dt.datetime | None = None) -> ProbeRun:
    """The run as the probe's record (levels, settings naming the tool, file and setup)."""
    levels, missing = [], {}
    for i, lv in enumerate(run.levels):
        summary, miss = _level(lv)
        levels.append(summary)
        missing[str(i)] = miss
    started = (now or dt.datetime.now(dt.UTC)).isoformat()
    digest = hashlib.sha256(run.model_dump_json().encode()).hexdigest()[:10]
    first = run.levels[0]
    settings: dict[str, Any] = {
        "source": IMPORT_SOURCE, "tool": run.tool, "tool_version": run.tool_version, "source_file": run.source_file,
        "setup": setup.describe() if setup else None, "not_measured": missing,
        "bench_run": run.model_dump(mode="json"),
    }
    return ProbeRun(
        run_id=run.run_id or f"import-{run.tool}-{digest}", url=f"import:{run.tool}:{run.source_file}",
        model=run.model or "", endpoint=IMPORT_SOURCE,
        pattern="concurrency" if first.concurrency is not None else "rate",
        prompt_tokens=max(1, round(first.prompt_tokens or 1)), output_tokens=max(1, round(first.output_tokens or 1)),
        started_at=started, levels=tuple(levels), settings=settings,
    )


def save_bench_run(*, engine: Engine, run: BenchRun, setup: BenchSetup | None = None) -> int:
    """Store the run as a probe-run record; returns its store id."""
    return save_run(engine=engine, run=to_probe_run(run, setup))


def _latency(d: Any) -> LatencyStats:
    if not isinstance(d, Mapping):
        return LatencyStats()
    return LatencyStats(**{k: d.get(k) for k in ("mean", "p50", "p90", "p99")})


def bench_run_from_summary(summary: Mapping[str, Any], settings: Mapping[str, Any], *,
                           store_id: int | None = None) -> BenchRun:
    """A stored record (its ``summary`` and ``settings``) as a BenchRun: an imported run
    exactly as imported, a probe run from its levels."""
    if settings.get("source") == IMPORT_SOURCE and isinstance(settings.get("bench_run"), Mapping):
        run = BenchRun.model_validate(settings["bench_run"])
        named = f"store {store_id} ({run.tool}:{run.source_file})" if store_id else None
        return run.model_copy(update={"run_id": run.run_id or named})
    levels = []
    for lv in summary.get("levels") or ():
        ok = int(lv.get("requests", 0)) - int(lv.get("failures", 0))
        if ok <= 0:
            continue
        out_total = lv.get("output_tokens_total") or 0
        levels.append(BenchLevel(
            concurrency=lv.get("concurrency"), request_rate=lv.get("rate_req_s"),
            prompt_tokens=lv.get("prompt_tokens_mean") or summary.get("prompt_tokens"),
            output_tokens=out_total / ok if out_total else summary.get("output_tokens"),
            completed=ok, failed=int(lv.get("failures", 0)), duration_s=lv.get("duration_s") or None,
            ttft_s=_latency(lv.get("ttft_s")), tpot_s=_latency(lv.get("tpot_s")), itl_s=_latency(lv.get("itl_s")),
            e2e_s=_latency(lv.get("e2e_s")), output_tok_s=lv.get("output_tok_s") or None,
            req_s=lv.get("req_s") or None,
        ))
    if not levels:
        raise ScenarioError(f"run {summary.get('run_id', store_id)}: no level with a successful request")
    return BenchRun(tool="probe", tool_version=None, source_file=str(summary.get("url", ""))[:120] or "probe",
                    model=None, levels=tuple(levels),  # the name sent, not a catalog name: not checked
                    run_id=str(summary.get("run_id") or (f"store {store_id}" if store_id else "probe")))


def bench_run_from_probe(run: ProbeRun) -> BenchRun:
    """A live probe run as a BenchRun (its label is the probe's run id)."""
    return bench_run_from_summary(run.to_json_dict(samples=False), run.settings)
