"""The simulated day is bounded (MAX_DAY_SIM_REQUESTS, refused before any process starts)
and stops its worker processes at once when its caller goes away (a page's next Streamlit
call raises once the visitor has left: here the heartbeat raises)."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from planner import Scenario
from planner.errors import ScenarioError
from planner.simulate.day import MAX_DAY_SIM_REQUESTS, simulate_day
from planner.sizing.autoscale import autoscale


def _children() -> int:
    pid = os.getpid()
    return sum(len(Path(f"/proc/{pid}/task/{t}/children").read_text().split()) for t in os.listdir(f"/proc/{pid}/task"))


class VisitorLeft(Exception):
    pass


def _scenario(interval_s: float) -> Scenario:
    return Scenario(workload={"requests_per_s": 4.0}, fleet={"scale_interval_s": interval_s})


def test_a_day_past_the_request_cap_is_refused_before_it_runs() -> None:
    s = _scenario(600.0)  # 144 intervals
    result = autoscale(s)
    per_step = MAX_DAY_SIM_REQUESTS // len(result.steps) + 1
    before = _children()
    with pytest.raises(ScenarioError) as err:
        simulate_day(s, result, requests_per_step=per_step, workers=2)
    message = str(err.value)
    assert message.startswith(f"requests_per_step × intervals: {per_step:,} requests per interval × 144 intervals")
    assert f"over the limit of {MAX_DAY_SIM_REQUESTS:,} per day (MAX_DAY_SIM_REQUESTS)" in message
    assert f"lower the requests per interval to {MAX_DAY_SIM_REQUESTS // 144:,}" in message
    assert _children() == before


def test_the_workers_stop_when_the_caller_goes_away() -> None:
    s = _scenario(3600.0)  # 24 intervals of 2,000 requests each: far more than the first heartbeat
    result = autoscale(s)
    done: list[int] = []
    beats = [0]

    def beat() -> None:
        beats[0] += 1
        raise VisitorLeft

    before = _children()
    with pytest.raises(VisitorLeft):
        simulate_day(s, result, workers=2, progress=lambda d, n: done.append(d), heartbeat=beat)
    # returned with every worker process gone (terminated and reaped), the rest of the day undone
    assert multiprocessing.active_children() == [] and _children() == before
    assert beats[0] == 1 and len(done) < len(result.steps)
