"""Work a page starts stops when its visitor leaves: the Autoscaling page's simulated day
(worker processes of the app server) is terminated once the tab closes, instead of
running on for a minute for nobody.  Counts the server's child processes, polled."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from tests.browser_support import SERVER_PIDS, chromium_or_skip, click, settled

chromium_or_skip()

from playwright.sync_api import Browser  # noqa: E402

from tests.test_browser import browser, server  # noqa: E402, F401 - fixtures shared with test_browser

GONE_WITHIN_S = 20.0  # a generous poll bound; the day itself runs for minutes on two cores


def _children(pid: int) -> int:
    """The server's child processes that can still run: a killed worker stays a zombie (state Z)
    until the pool's teardown waits for it, which may come later; it does no work."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            kids = Path(f"/proc/{pid}/task/{t}/children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            try:
                state = Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue  # gone between the two reads
            n += state != "Z"
    return n


def _poll(pred, limit_s: float) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def test_closing_the_tab_stops_the_simulated_day(server: str, browser: Browser) -> None:  # noqa: F811
    pid = SERVER_PIDS[server]
    ctx = browser.new_context(viewport={"width": 1400, "height": 1200})
    page = ctx.new_page()
    page.goto(f"{server}/autoscale")
    settled(page, timeout_ms=240_000)
    assert _children(pid) == 0
    button = page.get_by_role("button", name="Simulate the day (every policy)")
    button.wait_for(timeout=240_000)  # after the page's analytic sizing of every interval
    click(button, wait=False)
    assert _poll(lambda: _children(pid) > 0, 120.0), "the simulated day never started its workers"
    # the workers are running intervals: the progress bar's text (not the sidebar's "SGLang receive interval")
    page.get_by_text(re.compile(r"simulating intervals|: interval \d+ of \d+")).first.wait_for(timeout=120_000)
    ctx.close()  # the visitor leaves
    assert _poll(lambda: _children(pid) == 0, GONE_WITHIN_S), f"{_children(pid)} worker processes still running"
