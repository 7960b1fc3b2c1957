"""AppTest of the Live probe page against the project's pacing server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from servers.hits import wait_until_received
from servers.procs import start_script

from planner.store import get_probe_run, list_probe_runs
from planner.store.db import make_engine
from tests.apptest_v2 import new_app_test, use_migrated_sqlite

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
    db = use_migrated_sqlite(tmp_path, monkeypatch)
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


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then closed): connections to it are refused."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _store_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return f"sqlite:///{use_migrated_sqlite(tmp_path, monkeypatch)}"


def _start(at, url: str, levels: str, requests: int, output: int) -> None:
    at.text_input(key="pr_url").set_value(url)
    at.text_input(key="pr_levels").set_value(levels)
    at.number_input(key="pr_requests").set_value(requests)
    at.number_input(key="pr_output").set_value(output)
    at.button(key="pr_run").click().run()


def test_dead_endpoint_is_a_failure_with_its_reasons_and_is_saved_only_when_asked(tmp_path, monkeypatch) -> None:
    store = _store_env(tmp_path, monkeypatch)
    at = new_app_test()
    at.run()
    at.switch_page("pages/probe.py").run()
    _start(at, f"http://127.0.0.1:{_free_port()}", "1,2", 2, 4)
    _wait_for_run(at)
    assert not at.exception
    run = at.session_state["probe_run"]
    assert run.outcome == "failed" and [lv.failures for lv in run.levels] == [2, 2]
    # not "Done", not green: the run is an error, each level's failures an error with the reason
    assert not any("Done" in s.value for s in at.success)
    errors = [e.value for e in at.error]
    assert any("no request succeeded" in e for e in errors)
    assert any(e.startswith("concurrency 1: 2 of 2 requests failed: connection × 2") for e in errors), errors
    assert any(e.startswith("concurrency 2: 2 of 2 requests failed: connection × 2") for e in errors), errors
    # nothing measured is drawn as 0 tok/s beside the prediction
    assert not at.get("vega_lite_chart")
    # nothing was saved; a button offers to, and saves when pressed
    assert list_probe_runs(engine=make_engine(store)) == []
    assert at.button(key="pr_save").label == "Save this failed run anyway"
    at.button(key="pr_save").click().run()
    assert len(list_probe_runs(engine=make_engine(store))) == 1


def test_an_older_run_is_cleared_when_a_new_one_starts_or_fails(pacer) -> None:
    at = new_app_test()
    at.run()
    at.switch_page("pages/probe.py").run()
    _start(at, pacer.url, "1", 2, 4)
    _wait_for_run(at)
    first = at.session_state["probe_run"]
    assert first.outcome == "ok" and any("Done" in s.value for s in at.success)
    # a new run against a host outside the allow-list: the old results go at once, the new one fails
    _start(at, "http://8.8.8.8", "1", 2, 4)
    assert "probe_run" not in at.session_state
    _wait_for_run(at)
    assert "probe_run" not in at.session_state
    assert any("8.8.8.8" in e.value or "allow" in e.value for e in at.error), [e.value for e in at.error]
    assert not at.success and not at.dataframe and first.run_id not in str([m.value for m in at.markdown])
    # a run refused before it starts (bad levels) leaves nothing of an earlier one either
    _start(at, pacer.url, "1", 2, 4)
    _wait_for_run(at)
    assert at.session_state["probe_run"].outcome == "ok"
    _start(at, pacer.url, "one,two", 2, 4)
    assert "probe_run" not in at.session_state and not at.dataframe
    assert any("comma-separated integers" in e.value for e in at.error)


@pytest.fixture()
def mixed():
    srv = start_script("hostile_server")
    yield srv
    srv.stop()


def test_failures_and_client_delay_are_shown_not_hidden(mixed) -> None:
    from planner.probe import LOOP_LAG_P99_WARN_S, ClientStats, client_report

    at = new_app_test()
    at.run()
    at.switch_page("pages/probe.py").run()
    _start(at, mixed.url + "/mixed", "1", 10, 5)
    _wait_for_run(at)
    assert not at.exception
    run = at.session_state["probe_run"]
    lv = run.levels[0]
    assert run.outcome == "partial" and 0 < lv.failures < lv.requests
    # the level's failures are an error naming every reason, not only a column of the table
    (err,) = [e.value for e in at.error if e.value.startswith("concurrency 1:")]
    assert f"{lv.failures} of {lv.requests} requests failed" in err
    assert all(f"{reason} × {n}" in err for reason, n in lv.failure_reasons.items())
    assert any("finished with failures" in w.value for w in at.warning)
    assert not any("Done" in s.value for s in at.success)
    # a level whose figures include the client's delay says so
    laggy = ClientStats(event_loop="uvloop", lags_s=[3 * LOOP_LAG_P99_WARN_S] * 10, cpu_s=0.1, start_ns=0,
                        end_ns=10**9)
    warned = lv.model_copy(update={"client": client_report([laggy], [], requested_concurrency=1)})
    at.session_state["probe_run"] = run.model_copy(update={"levels": (warned,)})
    at.run()
    assert any(w.value.startswith("concurrency 1: TTFT and TPOT include client delay") for w in at.warning)


def test_two_client_processes_from_the_page(pacer) -> None:
    """The page's server runs its scripts as ``__main__`` (AppTest too): worker processes
    start all the same, and their parts come back merged as one level."""
    at = new_app_test()
    at.run()
    at.switch_page("pages/probe.py").run()
    at.number_input(key="pr_workers").set_value(2)
    _start(at, pacer.url, "4", 8, 4)
    _wait_for_run(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    (lv,) = at.session_state["probe_run"].levels
    assert lv.client.workers == 2 and lv.requests == 8 and lv.failures == 0 and lv.output_tokens_total == 8 * 4
    assert any("Done" in s.value for s in at.success)
