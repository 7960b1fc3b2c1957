"""Real-browser helpers shared by the review, team-scale and bench scripts: a
fresh ``streamlit run app.py`` on a free loopback port (SQLite file or a
DATABASE_URL), Debian's Chromium through Playwright, and waits that read the
app's own "script finished" marker instead of sleeping.

Every helper that clicks or types counts it in ``ACTIONS`` (``"click"``, ``"type"``),
so a test can say how many clicks a review took.

RIDGELINE_REQUIRE_BROWSER=1 (CI) makes a missing Chromium a failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--disable-gpu", "--disable-quic"]
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
SERVER_START_S = 60  # a cold streamlit on a busy 2-core machine: ~2 s; generous for CI
WAIT_MS = 30_000

# The process id of each running ``serve`` server, by URL (a bench reads its CPU time).
SERVER_PIDS: dict[str, int] = {}
# Clicks and typed entries made through these helpers (``click``, ``choose``, ``nav``, ``set_number``, ``type_text``).
ACTIONS: Counter[str] = Counter()

__all__ = ["ACTIONS", "CHROMIUM", "IDLE", "LAUNCH_ARGS", "ROOT", "SERVER_PIDS", "chromium_or_skip", "choose", "click", "expect_number",
           "fleet_numbers", "metric", "migrated_server", "nav", "serve", "set_number", "settled", "table_cells",
           "type_text"]


def chromium_or_skip() -> None:
    """Fail (CI) or skip (laptop) when Debian's Chromium is not installed; set the expectation timeout."""
    import pytest

    if not CHROMIUM.exists():
        if os.environ.get("RIDGELINE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and RIDGELINE_REQUIRE_BROWSER=1", pytrace=False)
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)", allow_module_level=True)
    from playwright.sync_api import expect

    # Every expectation waits as long as ``settled`` does: a page still computing on a busy
    # 2-core machine (a CI run beside other work drew Fleet & cost's metrics after Playwright's
    # default 5 s) is slow, not wrong.  A broken page still fails, after WAIT_MS.
    expect.set_options(timeout=WAIT_MS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(*, sqlite: Path | None = None, database_url: str | None = None) -> Iterator[str]:
    """A fresh app server on a free port over the given (already migrated) store; its URL."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "RIDGELINE_DB")}
    if database_url:
        env["DATABASE_URL"] = database_url
    elif sqlite:
        env["RIDGELINE_DB"] = str(sqlite)
    port = _free_port()
    streamlit = shutil.which("streamlit", path=str(Path(sys.executable).parent)) or "streamlit"
    proc = subprocess.Popen(
        [streamlit, "run", "app.py", "--server.headless=true", "--server.address=127.0.0.1",
         f"--server.port={port}", "--browser.gatherUsageStats=false", "--server.fileWatcherType=none",
         "--client.toolbarMode=minimal"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=1).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = proc.stdout.read().decode() if proc.stdout else ""
                raise RuntimeError(f"streamlit did not become healthy:\n{out}")
            time.sleep(0.2)
        SERVER_PIDS[url] = proc.pid
        yield url
    finally:
        SERVER_PIDS.pop(url, None)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def migrated_server(db: Path) -> Iterator[str]:
    """``serve`` over a fresh SQLite file, migrated first."""
    from planner.store.migrate import upgrade

    upgrade(f"sqlite:///{db}")
    with serve(sqlite=db) as url:
        yield url


def settled(page: Page, *, timeout_ms: int = WAIT_MS) -> None:
    """Wait until the app's script run has finished (and a title is drawn)."""
    from playwright.sync_api import expect

    page.wait_for_timeout(300)  # let a rerun start
    expect(page.locator(IDLE)).to_be_attached(timeout=timeout_ms)
    expect(page.locator("h1").first).to_be_visible(timeout=timeout_ms)


def click(target: Locator, *, wait: bool = True) -> None:
    """Click ``target`` (counted), then wait for the rerun it starts unless ``wait`` is False."""
    target.click()
    ACTIONS["click"] += 1
    if wait:
        settled(target.page)


def type_text(field: Locator, text: str) -> None:
    """Type ``text`` into a text or number input and commit it with Enter (counted once)."""
    field.fill(text)
    field.press("Enter")
    ACTIONS["type"] += 1
    settled(field.page)


def nav(page: Page, title: str) -> None:
    """Switch page through the sidebar's navigation link titled ``title``."""
    click(page.locator("[data-testid='stSidebarNav'] a", has_text=re.compile(f"^{re.escape(title)}$")).first)


def choose(page: Page, label: str, option: str) -> None:
    """Pick ``option`` in the sidebar selectbox labelled ``label`` (two clicks)."""
    box = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").filter(
        has=page.locator("label", has_text=re.compile(f"^{re.escape(label)}")))
    click(box.first, wait=False)
    click(page.get_by_role("option", name=option, exact=True))


def set_number(page: Page, label: str, value: float | int) -> None:
    """Type ``value`` into the sidebar number input whose label starts with ``label``."""
    box = page.locator("[data-testid='stSidebar'] [data-testid='stNumberInput']").filter(
        has=page.locator("label", has_text=re.compile(f"^{re.escape(label)}")))
    type_text(box.first.locator("input"), str(value))


def expect_number(page: Page, label: str, value: float | int) -> None:
    """Wait until the sidebar number input labelled ``label`` shows ``value``: after a
    link loads a scenario the inputs catch up a moment after the run has finished."""
    from playwright.sync_api import expect

    box = page.locator("[data-testid='stSidebar'] [data-testid='stNumberInput']").filter(
        has=page.locator("label", has_text=re.compile(f"^{re.escape(label)}")))
    whole, _, frac = f"{value}".partition(".")
    shown = re.escape(whole) + (r"(\.0*)?" if frac in ("", "0") else r"\." + re.escape(frac) + "0*")
    expect(box.first.locator("input")).to_have_value(re.compile(f"^{shown}$"), timeout=WAIT_MS)


def metric(scope: Page | Locator, label: str) -> str:
    """The value of the st.metric labelled exactly ``label`` inside ``scope`` (a page or a locator)."""
    from playwright.sync_api import Page

    root = scope if isinstance(scope, Page) else scope.page  # a `has=` locator is written from the page
    box = scope.locator("[data-testid='stMetric']").filter(
        has=root.locator("[data-testid='stMetricLabel']", has_text=re.compile(f"^{re.escape(label)}$")))
    return str(box.locator("[data-testid='stMetricValue']").first.inner_text()).strip()


_TABLE_JS = """t => Array.from(t.querySelectorAll('tr')).map(
    r => Array.from(r.querySelectorAll('th, td')).map(c => c.innerText.trim()))"""


def table_cells(table: Locator) -> dict[str, dict[str, str]]:
    """An ``st.table`` as {row label: {column label: cell text}} (its first row is the header)."""
    from playwright.sync_api import expect

    expect(table).to_be_visible(timeout=WAIT_MS)
    rows: list[list[str]] = table.locator("table").first.evaluate(_TABLE_JS)
    head, body = rows[0][1:], rows[1:]
    return {r[0]: dict(zip(head, r[1:], strict=True)) for r in body}


def fleet_numbers(page: Page, mode: str = "Disaggregated") -> tuple[str, str]:
    """GPUs total and $/Mtok output of one serving mode's column on Fleet & cost."""
    from playwright.sync_api import expect

    nav(page, "Fleet & cost")
    column = page.locator("[data-testid='stColumn']").filter(
        has=page.get_by_role("heading", name=re.compile(f"^{re.escape(mode)}"))).first
    expect(column.locator("[data-testid='stMetric']").first).to_be_visible()
    return metric(column, "GPUs total"), metric(column, "$/Mtok output")
