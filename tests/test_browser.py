"""Real browser: `streamlit run app.py` driven by Playwright with Debian's Chromium.

Set RIDGELINE_REQUIRE_BROWSER=1 (CI does) to make a missing Chromium a failure.
Screenshots of every page land in test-artifacts/ (gitignored).
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
import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
PAGES = ["plan", "roofline", "memory", "latency", "parallelism", "fleet", "tail", "compare", "explore", "scenarios", "probe",
         "catalog"]
NAV = {"memory": "Memory", "latency": "Latency", "roofline": "Roofline", "parallelism": "Parallelism",
       "fleet": "Fleet", "tail": "Tail latency", "compare": "Compare", "explore": "Explore", "scenarios": "Scenarios", "probe": "Live probe",
       "catalog": "Catalog"}
HEADLINES = ("Max sequences", "ITL mean · no queueing", "tok/s per replica", "TTFT mean · queueing included")
CHARTS = {"compare", "roofline", "memory", "latency", "parallelism", "tail", "explore"}

if not CHROMIUM.exists():
    if os.environ.get("RIDGELINE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{CHROMIUM} is missing and RIDGELINE_REQUIRE_BROWSER=1", pytrace=False)
    pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)", allow_module_level=True)

import pandas as pd  # noqa: E402
from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

from planner.store.migrate import upgrade  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serve(db: Path) -> Iterator[str]:
    """A fresh ``streamlit run app.py`` on a free port over a migrated SQLite store."""
    upgrade(f"sqlite:///{db}")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"RIDGELINE_DB": str(db)}
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
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=1).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve(tmp_path_factory.mktemp("store") / "ridgeline.db") as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--disable-gpu", "--disable-quic"])
        yield b
        b.close()


def _settled(page: Page) -> None:
    page.wait_for_timeout(300)  # let a rerun start
    expect(page.locator("[data-testid='stApp'][data-test-script-state='notRunning']")).to_be_attached(timeout=30_000)
    expect(page.locator("h1").first).to_be_visible(timeout=30_000)


def _metric(page: Page, label: str) -> str:
    box = page.locator("[data-testid='stMetric']").filter(
        has=page.locator("[data-testid='stMetricLabel']", has_text=re.compile(f"^{re.escape(label)}$")))
    return box.locator("[data-testid='stMetricValue']").first.inner_text().strip()


def _goto(page: Page, name: str) -> None:
    page.locator("[data-testid='stSidebarNav'] a", has_text=re.compile(NAV[name])).first.click()
    _settled(page)
    if name in CHARTS:
        expect(page.locator("[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg")
               .first).to_be_visible(timeout=60_000)


def _choose(page: Page, label: str, option: str) -> None:
    page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    _settled(page)


def test_model_change_survives_reload_and_every_page_renders(server: str, browser: Browser) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    ctx = browser.new_context(viewport={"width": 1400, "height": 1600})
    page = ctx.new_page()
    page.goto(server)
    _settled(page)
    before = _metric(page, "tok/s per replica")
    _choose(page, "Model", "llama-3.1-70b")
    _choose(page, "Weights", "fp8")
    _choose(page, "TP", "2")
    expect(page.locator("[data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h100-sxm")
    after = {k: _metric(page, k) for k in HEADLINES}
    assert after["tok/s per replica"] != before
    assert "model=llama-3.1-70b" in page.url and "wd=fp8" in page.url and "tp=2" in page.url
    page.screenshot(path=str(ARTIFACTS / "plan.png"), full_page=True)
    shared = page.url
    ctx.close()

    # A tall window: Streamlit scrolls inside its own container, so full_page stops at the viewport.
    fresh = browser.new_context(viewport={"width": 1400, "height": 2200})
    page = fresh.new_page()
    page.goto(shared)
    _settled(page)
    assert {k: _metric(page, k) for k in after} == after
    for name in PAGES[1:]:
        _goto(page, name)
        assert page.locator("[data-testid='stException']").count() == 0, name
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        # The scenario travels with the page switch.
        expect(page).to_have_url(re.compile(r"model=llama-3\.1-70b"), timeout=10_000)
    fresh.close()




def test_save_share_links_and_plan_csv(server: str, browser: Browser, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    ctx = browser.new_context(viewport={"width": 1400, "height": 1600}, accept_downloads=True)
    page = ctx.new_page()
    page.goto(server)
    _settled(page)
    _choose(page, "GPU", "h200-sxm")
    _choose(page, "Model", "llama-3.1-70b")
    _choose(page, "Weights", "fp8")
    expect(page.locator("[data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h200-sxm")
    shown = {k: _metric(page, k) for k in HEADLINES}
    _goto(page, "scenarios")
    page.get_by_label("Name", exact=True).fill("Browser review")
    page.get_by_label("Tags (comma-separated)").fill("browser")
    page.get_by_role("button", name="Save").click()
    _settled(page)
    expect(page.get_by_text("Saved 'Browser review'")).to_be_visible()
    expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
    token_href = page.get_by_role("link", name="stateless link", exact=True).get_attribute("href") or ""
    assert token_href.startswith("./?s=") and len(token_href) > 40
    with page.expect_download() as dl:
        page.get_by_role("button", name="Plan CSV").click()
    csv_path = tmp_path / "plan.csv"
    dl.value.save_as(csv_path)
    df = pd.read_csv(csv_path, skiprows=[1])  # row 2 holds the units
    assert len(df) == 1
    assert pd.read_csv(csv_path, nrows=1).iloc[0]["decode.step_s"] == "s"
    row = df.iloc[0]
    assert (row["scenario.gpu"], row["scenario.model"], row["scenario.weights_dtype"]) == (
        "h200-sxm", "llama-3.1-70b", "fp8")
    assert f"{row['decode.tok_s_per_replica']:,.0f}" == shown["tok/s per replica"]
    page.screenshot(path=str(ARTIFACTS / "scenarios-saved.png"), full_page=True)
    ctx.close()

    for link in (f"{server}/?scenario=browser-review", f"{server}/{token_href.removeprefix('./')}"):
        fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = fresh.new_page()
        page.goto(link)
        _settled(page)
        expect(page.locator("[data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h200-sxm")
        assert {k: _metric(page, k) for k in HEADLINES} == shown, link
        assert page.locator("[data-testid='stException']").count() == 0
        fresh.close()


def test_direct_page_url_on_a_fresh_server(browser: Browser, tmp_path: Path) -> None:
    # The first request a new server sees is a page's own URL, not "/": the page
    # must still run through app.py (navigation, sidebar, the URL's scenario).
    with _serve(tmp_path / "ridgeline.db") as url:
        page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
        page.goto(f"{url}/fleet?model=llama-3.1-70b&wd=fp8&tp=2")
        _settled(page)
        expect(page.locator("h1").first).to_have_text("Fleet & cost")
        expect(page.locator("[data-testid='stSidebarNav']")).to_contain_text("Review")
        expect(page.locator("[data-testid='stMetric']").first).to_be_visible()
        expect(page).to_have_url(re.compile(r"model=llama-3\.1-70b"))
        page.locator("[data-testid='stSidebarNav'] a", has_text=re.compile("^Plan$")).first.click()
        _settled(page)
        expect(page.locator("[data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h100-sxm")
        page.context.close()


def test_root_link_on_a_fresh_server_keeps_its_scenario_after_a_page_switch(browser: Browser, tmp_path: Path) -> None:
    # The first session a new server sees opens "/" with a scenario in the link; the
    # first run may start in Streamlit's pages/-folder mode, and the scenario must
    # still survive the first page switch.
    with _serve(tmp_path / "ridgeline.db") as url:
        page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
        page.goto(f"{url}/?model=llama-3.1-70b&wd=fp8&tp=2")
        _settled(page)
        expect(page.locator("h1").first).to_have_text("Plan")
        page.locator("[data-testid='stSidebarNav'] a", has_text=re.compile("^Fleet & cost$")).first.click()
        _settled(page)
        expect(page.locator("h1").first).to_have_text("Fleet & cost")
        expect(page).to_have_url(re.compile(r"model=llama-3\.1-70b"))
        page.context.close()
