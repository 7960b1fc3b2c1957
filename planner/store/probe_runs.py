"""Stored probe runs (the probe-runs aggregate): a run, its settings and summary, its samples.

Credentials are never stored: a credential-like key in the settings or summary,
or a user:password part in the endpoint URL, is refused."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from planner.errors import ProbeError
from planner.store.common import Ref, as_utc, guarded
from planner.store.db import writer
from planner.store.limits import check_id
from planner.store.models import ProbeRunRow, ProbeSampleRow
from planner.store.repository import scenario_row

__all__ = ["ProbeRun", "ProbeSample", "get_probe_run", "list_probe_runs", "save_probe_run"]

# Credential-like keys: api_key, Authorization, *_token, secret, password ... but
# not token counts such as prompt_tokens or token_count_source.
_SECRET = re.compile(r"(api[_-]?key|authorization|secret|password|bearer)|(^|[_-])token$", re.I)


class ProbeSample(BaseModel):
    """One request of a probe run."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    seq: int
    started_at: datetime
    ttft_s: float | None = None
    e2e_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None
    data: dict[str, Any] = {}


class ProbeRun(BaseModel):
    """A stored probe run with its samples."""

    model_config = ConfigDict(frozen=True)
    id: int
    scenario_id: int | None
    endpoint_url: str
    settings: dict[str, Any]
    summary: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    samples: tuple[ProbeSample, ...] = ()




def _reject_secrets(data: Any, where: str) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            if _SECRET.search(str(key)):
                raise ProbeError(f"{where}.{key}: credentials are never stored; drop this key before saving")
            _reject_secrets(value, f"{where}.{key}")
    elif isinstance(data, (list, tuple)):
        for item in data:
            _reject_secrets(item, where)


@guarded
def save_probe_run(*, engine: Engine, endpoint_url: str, settings: dict[str, Any], summary: dict[str, Any],
                   started_at: datetime, finished_at: datetime | None = None,
                   samples: Sequence[ProbeSample] = (), scenario_ref: Ref | None = None) -> int:
    """Store a probe run and its samples; returns the run id.  Settings with a
    credential-like key, or a URL with a user:password part, are refused."""
    if "@" in endpoint_url.split("//", 1)[-1].split("/", 1)[0]:
        raise ProbeError("endpoint_url: remove the user:password@ part; credentials are never stored")
    _reject_secrets(settings, "settings")
    _reject_secrets(summary, "summary")
    with Session(writer(engine)) as session, session.begin():
        scenario_id = scenario_row(session, scenario_ref).id if scenario_ref is not None else None
        run = ProbeRunRow(scenario_id=scenario_id, endpoint_url=endpoint_url, settings=settings, summary=summary,
                          started_at=started_at, finished_at=finished_at)
        session.add(run)
        session.flush()
        for s in samples:
            session.add(ProbeSampleRow(run_id=run.id, **s.model_dump()))
        return run.id


def _probe(run: ProbeRunRow, samples: Iterable[ProbeSampleRow]) -> ProbeRun:
    return ProbeRun(
        id=run.id, scenario_id=run.scenario_id, endpoint_url=run.endpoint_url, settings=run.settings,
        summary=run.summary, started_at=as_utc(run.started_at),
        finished_at=as_utc(run.finished_at) if run.finished_at else None,
        samples=tuple(ProbeSample(seq=s.seq, started_at=as_utc(s.started_at), ttft_s=s.ttft_s, e2e_s=s.e2e_s,
                                  prompt_tokens=s.prompt_tokens, output_tokens=s.output_tokens, error=s.error,
                                  data=s.data or {}) for s in samples),
    )


@guarded
def get_probe_run(*, engine: Engine, run_id: int) -> ProbeRun:
    """A stored probe run with its samples in order."""
    check_id(run_id, "run id")
    with Session(engine) as session:
        run = session.get(ProbeRunRow, run_id)
        if run is None:
            raise ProbeError(f"no probe run {run_id}")
        samples = session.scalars(select(ProbeSampleRow).where(ProbeSampleRow.run_id == run_id)
                                  .order_by(ProbeSampleRow.seq))
        return _probe(run, samples)


@guarded
def list_probe_runs(*, engine: Engine, scenario_ref: Ref | None = None, limit: int = 100) -> list[ProbeRun]:
    """Probe runs, newest first (without samples)."""
    with Session(engine) as session:
        stmt = select(ProbeRunRow).order_by(ProbeRunRow.started_at.desc(), ProbeRunRow.id.desc()).limit(limit)
        if scenario_ref is not None:
            stmt = stmt.where(ProbeRunRow.scenario_id == scenario_row(session, scenario_ref).id)
        return [_probe(r, ()) for r in session.scalars(stmt)]
