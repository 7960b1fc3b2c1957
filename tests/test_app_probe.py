"""AppTest of the Live probe page against the project's pacing server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from servers.hits import wait_until_received
from servers.procs import start_script

from planner.store import get_probe_run, list_probe_runs
from planner.store.db import make_engine
from planner.store.migrate import upgrade
from tests.apptest_v2 import new_app_test

SECRET = "sk-page-91c2e7"


# Polls of a running probe before a test gives up (0.2 s apart: at most a minute).
MAX_POLLS = 300


def _wait_for_run(at) -> None:
    """The probe runs in the background: rerun the page until it has taken the result."""
    for _ in range(MAX_POLLS):
        if "probe_job" not in at.session_state:
            return
        time.sleep(0.2)
        at.run()
    raise AssertionError("the probe did not finish")


@pytest.fixture(scope="module")
def pacer():
    srv = start_script("pacing_server", "--ttft-s", "0.02", "--tpot-s", "0.005")
    yield srv
    srv.stop()


def test_probe_page_measures_saves_and_calibrates(pacer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "ridgeline.db"
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("RIDGELINE_DB", str(db))
    upgrade(f"sqlite:///{db}")
    at = new_app_test()
    at.run()
    at.switch_page("pages/probe.py").run()
    assert not at.exception
    at.text_input(key="pr_url").set_value(pacer.url)
    at.text_input(key="pr_key").set_value(SECRET)
    at.text_input(key="pr_levels").set_value("1,2,4")
    at.number_input(key="pr_requests").set_value(4)
    at.number_input(key="pr_output").set_value(8)
    at.button(key="pr_run").click().run()
    _wait_for_run(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = at.session_state["probe_run"]
    assert [lv.concurrency for lv in run.levels] == [1, 2, 4]
    # The pacing server's first token comes 20 ms after the request arrives: the page measured that
    # (a busy machine only adds; 1 ms off for the moment between sending and reading the clock),
    # and every token of every request.
    assert all(lv.ttft_s.p50 >= 0.019 for lv in run.levels)
    assert all(lv.failures == 0 and lv.output_tokens_total == 4 * 8 for lv in run.levels)
    assert run.predicted is not None
    at.button(key="pr_save").click().run()
    assert any("Saved as probe run" in s.value for s in at.success)
    stored = get_probe_run(engine=make_engine(f"sqlite:///{db}"), run_id=list_probe_runs(engine=make_engine(
        f"sqlite:///{db}"))[0].id)
    assert len(stored.samples) == 3 * 4
    assert SECRET not in str(stored.model_dump())
    at.button(key="pr_cal").click().run()
    cal, calibrated = at.session_state["probe_cal"]
    assert calibrated.efficiency.calibrated_from == run.run_id
    at.button(key="pr_use").click().run()
    assert not at.exception
    # The key never reaches the URL.
    assert all(SECRET not in str(v) for v in at.query_params.values())


@pytest.fixture()
def hanging():
    """The first request (the warm-up) is answered, every later one is held open."""
    srv = start_script("hostile_server")
    yield srv
    srv.stop()


def test_probe_page_cancels_a_running_probe(hanging) -> None:
    at = new_app_test()
    at.run()
    at.switch_page("pages/probe.py").run()
    at.text_input(key="pr_url").set_value(hanging.url + "/hang-after-first")
    at.text_input(key="pr_levels").set_value("1,2")
    at.number_input(key="pr_requests").set_value(50)
    at.number_input(key="pr_output").set_value(5)
    at.button(key="pr_run").click().run()
    job = at.session_state["probe_job"]
    # the warm-up came back, the next one hangs
    assert wait_until_received(job, hanging.url, "/hang-after-first/v1/completions", 2)
    at.button(key="pr_cancel").click().run()
    _wait_for_run(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("was cancelled" in w.value for w in at.warning)
    run = at.session_state["probe_run"]
    assert run.cancelled and [lv.concurrency for lv in run.levels] == [1]
    assert run.levels[0].failure_reasons == {"cancelled": 1} and run.levels[0].requests == 1
