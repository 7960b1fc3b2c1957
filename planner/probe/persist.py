"""Save a probe run, with its per-request samples, in the scenario store.

The settings saved are the ProbeSettings (they never hold the API key); the
store refuses credential-like keys and URLs with a user:password part.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.engine import Engine

from planner.probe.summary import ProbeRun
from planner.store.common import Ref
from planner.store.probe_runs import ProbeSample, save_probe_run

__all__ = ["save_run"]


def _at(started: dt.datetime, offset_s: float) -> dt.datetime:
    return started + dt.timedelta(seconds=offset_s)


def save_run(*, engine: Engine, run: ProbeRun, scenario_ref: Ref | None = None) -> int:
    """Store ``run`` (summary = its JSON without samples) and one sample row per
    request of every level; returns the stored run id."""
    started = dt.datetime.fromisoformat(run.started_at)
    if started.tzinfo is None:
        started = started.replace(tzinfo=dt.UTC)
    samples: list[ProbeSample] = []
    seq = 0
    for level_index, lv in enumerate(run.levels):
        for smp in lv.samples:
            data: dict[str, Any] = smp.model_dump(mode="json")
            data["level"] = level_index
            samples.append(ProbeSample(
                seq=seq, started_at=_at(started, smp.scheduled_s), ttft_s=smp.ttft_s, e2e_s=smp.e2e_s,
                prompt_tokens=smp.prompt_tokens, output_tokens=smp.output_tokens, error=smp.error, data=data,
            ))
            seq += 1
    finished = _at(started, sum(lv.duration_s for lv in run.levels))
    return save_probe_run(engine=engine, endpoint_url=run.url, settings=dict(run.settings),
                          summary=run.to_json_dict(samples=False), started_at=started, finished_at=finished,
                          samples=samples, scenario_ref=scenario_ref)
