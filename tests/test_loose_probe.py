"""The review's loose ends on the probe: the endpoint follows the URL, a 404 names
its path, the page's probe runs outside the app's process, and the client-delay
warning names the page's own field."""

from __future__ import annotations

import pytest
from servers.procs import start_script

from planner.errors import ProbeError
from planner.probe import probe_settings, run_probe_sync
from planner.probe.loop import ClientStats
from planner.probe.summary import client_report
from tests.apptest_v2 import new_app_test
from tests.test_app_probe import _wait_for_run


@pytest.fixture(scope="module")
def pacer():
    srv = start_script("pacing_server", "--ttft-s", "0.01", "--tpot-s", "0.002")
    yield srv
    srv.stop()


@pytest.mark.parametrize(("url", "endpoint", "path"), [
    ("http://127.0.0.1:8000/v1/chat/completions", "chat", "/v1/chat/completions"),
    ("http://127.0.0.1:8000/v1/chat/completions/", "chat", "/v1/chat/completions"),
    ("http://127.0.0.1:8000/v1/completions", "completions", "/v1/completions"),
    ("http://127.0.0.1:8000", "completions", "/v1/completions"),
    ("http://127.0.0.1:8000/v1", "completions", "/v1/completions"),
])
def test_endpoint_follows_the_url(url: str, endpoint: str, path: str) -> None:
    s = probe_settings(url=url, model="m")
    assert s.endpoint == endpoint
    assert s.request_url == "http://127.0.0.1:8000" + path
    # an explicit None (the CLI's default, the page's "from the URL") is the same
    assert probe_settings(url=url, model="m", endpoint=None).endpoint == endpoint


def test_a_server_root_takes_either_endpoint() -> None:
    s = probe_settings(url="http://127.0.0.1:8000", model="m", endpoint="chat")
    assert s.request_url == "http://127.0.0.1:8000/v1/chat/completions"


def test_an_endpoint_contradicting_the_url_is_refused_naming_both() -> None:
    with pytest.raises(ProbeError, match=r"endpoint: the URL's path is /v1/chat/completions .* completions "
                                         r"\(/v1/completions\)"):
        probe_settings(url="http://127.0.0.1:8000/v1/chat/completions", model="m", endpoint="completions")


def test_a_404_names_the_path(pacer) -> None:
    s = probe_settings(url=pacer.url + "/api", model="m", concurrency=(1,), requests=2, output_tokens=4,
                       metrics_url="", warmup_requests=0)
    lv = run_probe_sync(s).levels[0]
    assert lv.failures == 2
    assert lv.failure_reasons == {"http_404": 2}
    assert all(smp.error_detail.startswith("POST /api/v1/completions not found (HTTP 404)") for smp in lv.samples)


def test_chat_url_probes_chat(pacer) -> None:
    s = probe_settings(url=pacer.url + "/v1/chat/completions", model="m", concurrency=(1,), requests=2,
                       output_tokens=4, metrics_url="")
    run = run_probe_sync(s)
    assert run.endpoint == "chat"
    assert run.levels[0].failures == 0


def test_client_delay_warning_names_the_page_field_and_the_flag() -> None:
    slow = ClientStats(event_loop="asyncio", lags_s=[0.3] * 100, cpu_s=0.1, start_ns=0, end_ns=10**9)
    warning = client_report([slow], [], requested_concurrency=1).warning
    assert warning is not None
    assert '"Client processes"' in warning and "--workers" in warning


def test_page_probes_chat_from_a_worker_process(pacer) -> None:
    at = new_app_test()
    at.run()
    at.switch_page("pages/probe.py").run()
    assert not at.exception
    assert at.selectbox(key="pr_endpoint").value == "from the URL"
    at.text_input(key="pr_url").set_value(pacer.url + "/v1/chat/completions")
    at.text_input(key="pr_levels").set_value("1")
    at.number_input(key="pr_requests").set_value(2)
    at.number_input(key="pr_output").set_value(4)
    at.button(key="pr_run").click().run()
    _wait_for_run(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = at.session_state["probe_run"]
    assert run.endpoint == "chat"
    assert run.settings["separate_process"] is True and run.settings["workers"] == 1
    assert run.levels[0].failures == 0 and run.levels[0].client.workers == 1


def test_page_endpoint_choice_contradicting_the_url_is_one_error(pacer) -> None:
    at = new_app_test()
    at.run()
    at.switch_page("pages/probe.py").run()
    at.text_input(key="pr_url").set_value(pacer.url + "/v1/chat/completions")
    at.selectbox(key="pr_endpoint").set_value("completions (/v1/completions)")
    at.button(key="pr_run").click().run()
    assert not at.exception
    assert any("endpoint: the URL's path is /v1/chat/completions" in e.value for e in at.error)
