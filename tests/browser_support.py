"""Real-browser helpers shared by the review, team-scale and bench scripts: a
fresh ``streamlit run app.py`` on a free loopback port (SQLite file or a
DATABASE_URL), Debian's Chromium through Playwright, and waits that read the
app's own "script finished" marker instead of sleeping.

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
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--disable-gpu", "--disable-quic"]
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
SERVER_START_S = 60  # a cold streamlit on a busy 2-core machine: ~2 s; generous for CI
WAIT_MS = 30_000

__all__ = ["CHROMIUM", "IDLE", "LAUNCH_ARGS", "ROOT", "chromium_or_skip", "choose", "expect_number", "fleet_numbers", "metric", "nav",
           "serve", "set_number", "settled"]


def chromium_or_skip() -> None:
    """Fail (CI) or skip (laptop) when Debian's Chromium is not installed."""
    import pytest

    if not CHROMIUM.exists():
        if os.environ.get("RIDGELINE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and RIDGELINE_REQUIRE_BROWSER=1", pytrace=False)
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)", allow_module_level=True)


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
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def settled(page, *, timeout_ms: int = WAIT_MS) -> None:  # type: ignore[no-untyped-def]
    """Wait until the app's script run has finished (and a title is drawn)."""
    from playwright.sync_api import expect

    page.wait_for_timeout(300)  # let a rerun start
    expect(page.locator(IDLE)).to_be_attached(timeout=timeout_ms)
    expect(page.locator("h1").first).to_be_visible(timeout=timeout_ms)


def nav(page, title: str) -> None:  # type: ignore[no-untyped-def]
    """Switch page through the sidebar's navigation link titled ``title``."""
    page.locator("[data-testid='stSidebarNav'] a", has_text=re.compile(f"^{re.escape(title)}$")).first.click()
    settled(page)


def choose(page, label: str, option: str) -> None:  # type: ignore[no-untyped-def]
    """Pick ``option`` in the sidebar selectbox labelled ``label``."""
    box = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").filter(
        has=page.locator("label", has_text=re.compile(f"^{re.escape(label)}")))
    box.first.click()
    page.get_by_role("option", name=option, exact=True).click()
    settled(page)


def set_number(page, label: str, value: float | int) -> None:  # type: ignore[no-untyped-def]
    """Type ``value`` into the sidebar number input whose label starts with ``label``."""
    box = page.locator("[data-testid='stSidebar'] [data-testid='stNumberInput']").filter(
        has=page.locator("label", has_text=re.compile(f"^{re.escape(label)}")))
    field = box.first.locator("input")
    field.fill(str(value))
    field.press("Enter")
    settled(page)


def expect_number(page, label: str, value: float | int) -> None:  # type: ignore[no-untyped-def]
    """Wait until the sidebar number input labelled ``label`` shows ``value``: after a
    link loads a scenario the inputs catch up a moment after the run has finished."""
    from playwright.sync_api import expect

    box = page.locator("[data-testid='stSidebar'] [data-testid='stNumberInput']").filter(
        has=page.locator("label", has_text=re.compile(f"^{re.escape(label)}")))
    whole, _, frac = f"{value}".partition(".")
    shown = re.escape(whole) + (r"(\.0*)?" if frac in ("", "0") else r"\." + re.escape(frac) + "0*")
    expect(box.first.locator("input")).to_have_value(re.compile(f"^{shown}$"), timeout=WAIT_MS)


def metric(scope, label: str) -> str:  # type: ignore[no-untyped-def]
    """The value of the st.metric labelled exactly ``label`` inside ``scope`` (a page or a locator)."""
    root = getattr(scope, "page", scope)  # a `has=` locator is written from the page, matched inside each box
    box = scope.locator("[data-testid='stMetric']").filter(
        has=root.locator("[data-testid='stMetricLabel']", has_text=re.compile(f"^{re.escape(label)}$")))
    return str(box.locator("[data-testid='stMetricValue']").first.inner_text()).strip()


def fleet_numbers(page, mode: str = "Disaggregated") -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """GPUs total and $/Mtok output of one serving mode's column on Fleet & cost."""
    from playwright.sync_api import expect

    nav(page, "Fleet & cost")
    column = page.locator("[data-testid='stColumn']").filter(
        has=page.get_by_role("heading", name=re.compile(f"^{re.escape(mode)}"))).first
    expect(column.locator("[data-testid='stMetric']").first).to_be_visible()
    return metric(column, "GPUs total"), metric(column, "$/Mtok output")
