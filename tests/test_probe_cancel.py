"""Cancelling a running probe from another thread (what the Live probe page does):
new requests stop, the ones in flight are recorded as cancelled, what was
measured is kept."""

from __future__ import annotations

import threading

import pytest
from servers.hits import hits, wait_until_received
from servers.procs import start_script

from planner import ProbeError
from planner.probe import ProbeJob, probe_settings, run_probe_sync

HANG = "/hang-after-first/v1/completions"


@pytest.fixture()
def hanging():
    """The first request (the warm-up) is answered, every later one is held open."""
    srv = start_script("hostile_server")
    yield srv
    srv.stop()


def _settings(url: str):
    return probe_settings(url=url, model="m", concurrency=(1, 2), requests=50, output_tokens=5,
                          request_timeout_s=600, read_timeout_s=600, metrics_url="")


def test_job_cancel_keeps_what_was_measured(hanging):
    job = ProbeJob.start(_settings(hanging.url + "/hang-after-first"), api_key="sk-job-secret-1234")
    assert "sk-job" not in repr(job)
    with pytest.raises(ProbeError, match="still running"):
        job.result()
    assert wait_until_received(job, hanging.url, HANG, 2)
    assert job.progress[0] == "concurrency 1"
    job.cancel()
    assert job.wait(60)
    run = job.result()
    assert run.cancelled and [lv.concurrency for lv in run.levels] == [1]
    (lv,) = run.levels
    assert lv.requests == 1 and lv.failure_reasons == {"cancelled": 1}


def test_cancel_event_from_another_thread(hanging):
    stop = threading.Event()
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(run=run_probe_sync(_settings(hanging.url + "/hang-after-first"), cancel_event=stop)))
    t.start()
    assert wait_until_received(None, hanging.url, HANG, 2)
    stop.set()
    t.join(60)
    assert not t.is_alive()
    assert box["run"].cancelled and box["run"].levels[0].failure_reasons == {"cancelled": 1}


def test_cancel_before_start_measures_nothing(hanging):
    stop = threading.Event()
    stop.set()
    run = run_probe_sync(_settings(hanging.url + "/hang-after-first"), cancel_event=stop)
    assert run.cancelled and run.levels == ()
    assert hits(hanging.url) == 0


def test_cancel_reaches_worker_processes(hanging):
    """With --workers 2 the cancel flag reaches the worker processes: the request
    hanging in one of them is recorded as cancelled and the run returns."""
    stop = threading.Event()
    box: dict = {}
    s = probe_settings(url=hanging.url + "/hang-after-first", model="m", concurrency=(1, 2), requests=50,
                       output_tokens=5, request_timeout_s=600, read_timeout_s=600, metrics_url="", workers=2)
    t = threading.Thread(target=lambda: box.update(run=run_probe_sync(s, cancel_event=stop)))
    t.start()
    assert wait_until_received(None, hanging.url, HANG, 2)  # the warm-up came back, the first measured one hangs
    stop.set()
    t.join(120)
    assert not t.is_alive()
    run = box["run"]
    assert run.cancelled and [lv.concurrency for lv in run.levels] == [1]
    assert run.levels[0].failure_reasons == {"cancelled": 1} and run.levels[0].client.workers == 1
