"""Real browser: the Live probe page runs its probe in the background, shows the
result when it ends without another click (the page polls it), and cancels a
probe whose requests hang.  Same server and Chromium set-up as test_browser.py."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browser_support import settled as _settled
from playwright.sync_api import Browser, Page, expect
from servers.hits import wait_until_received
from servers.procs import start_script
from test_browser import _goto, browser, server  # noqa: F401 - fixtures shared with test_browser

HANG = "/hang-after-first/v1/completions"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    srv = start_script("hostile_server")
    yield srv.url
    srv.stop()


def _fill(page: Page, label: str, value: str) -> None:
    box = page.get_by_test_id("stMainBlockContainer").get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    _settled(page)


def _probe_page(browser: Browser, server: str, url: str, levels: str, requests: str) -> Page:  # noqa: F811
    page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
    page.goto(server)
    _settled(page)
    _goto(page, "probe")
    _fill(page, "Endpoint URL", url)
    _fill(page, "Concurrency levels", levels)
    _fill(page, "Requests per level", requests)
    _fill(page, "Output tokens", "5")
    page.get_by_role("button", name="Run probe").click()
    return page


def test_probe_result_appears_without_another_click(server: str, browser: Browser, endpoint: str) -> None:  # noqa: F811
    page = _probe_page(browser, server, f"{endpoint}/ok", "1,2", "4")
    expect(page.get_by_text(re.compile(r"^Run probe-\S+: measured beside predicted$"))).to_be_visible(timeout=60_000)
    expect(page.get_by_role("button", name="Cancel probe")).to_have_count(0)
    assert page.locator("[data-testid='stException']").count() == 0
    page.context.close()


def test_probe_cancel_button_stops_a_hanging_probe(server: str, browser: Browser, endpoint: str) -> None:  # noqa: F811
    page = _probe_page(browser, server, f"{endpoint}/hang-after-first", "1,2", "50")
    cancel = page.get_by_role("button", name="Cancel probe")
    expect(cancel).to_be_visible(timeout=30_000)
    assert wait_until_received(None, endpoint, HANG, 2)  # the warm-up came back, the next request hangs
    cancel.click()
    expect(page.get_by_text(re.compile(r"was cancelled"))).to_be_visible(timeout=30_000)
    expect(page.get_by_text(re.compile(r"^Run probe-\S+: measured beside predicted$"))).to_be_visible()
    expect(cancel).to_have_count(0)
    assert page.locator("[data-testid='stException']").count() == 0
    page.context.close()


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then closed): connections to it are refused."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_endpoint_is_an_error_with_its_reasons_not_done(server: str, browser: Browser) -> None:  # noqa: F811
    page = _probe_page(browser, server, f"http://127.0.0.1:{_free_port()}", "1,2", "2")
    expect(page.get_by_text(re.compile(r"no request succeeded"))).to_be_visible(timeout=60_000)
    for level in (1, 2):
        expect(page.get_by_text(re.compile(rf"^concurrency {level}: 2 of 2 requests failed: connection × 2"))
               ).to_be_visible()
    expect(page.get_by_text(re.compile(r"^Done: run"))).to_have_count(0)
    expect(page.get_by_role("button", name="Save this failed run anyway")).to_be_visible()
    assert page.locator("[data-testid='stException']").count() == 0
    page.context.close()
