"""Real browser: `streamlit run app.py` driven by Playwright with Debian's Chromium.

Set RIDGELINE_REQUIRE_BROWSER=1 (CI does) to make a missing Chromium a failure.
Screenshots of every page land in test-artifacts/ (gitignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser_support import (
    CHROMIUM,
    LAUNCH_ARGS,
    ROOT,
    choose,
    chromium_or_skip,
    metric,
    migrated_server,
    settled,
)

chromium_or_skip()

import pandas as pd  # noqa: E402
from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
PAGES = ["plan", "roofline", "memory", "latency", "parallelism", "fleet", "tail", "compare", "explore", "scenarios", "probe",
         "catalog"]
NAV = {"memory": "Memory", "latency": "Latency", "roofline": "Roofline", "parallelism": "Parallelism",
       "fleet": "Fleet", "tail": "Tail latency", "compare": "Compare", "explore": "Explore", "scenarios": "Scenarios", "probe": "Live probe",
       "catalog": "Catalog"}
HEADLINES = ("Max sequences", "ITL mean · no queueing", "tok/s per replica", "TTFT mean · queueing included")
CHARTS = {"compare", "roofline", "memory", "latency", "parallelism", "tail", "explore"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with migrated_server(tmp_path_factory.mktemp("store") / "ridgeline.db") as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield b
        b.close()


def _goto(page: Page, name: str) -> None:
    """A page by a prefix of its navigation title; waits for its first chart where it draws one."""
    page.locator("[data-testid='stSidebarNav'] a", has_text=re.compile(NAV[name])).first.click()
    settled(page)
    if name in CHARTS:
        expect(page.locator("[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg")
               .first).to_be_visible(timeout=60_000)


def test_model_change_survives_reload_and_every_page_renders(server: str, browser: Browser) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    ctx = browser.new_context(viewport={"width": 1400, "height": 1600})
    page = ctx.new_page()
    page.goto(server)
    settled(page)
    before = metric(page, "tok/s per replica")
    choose(page, "Model", "llama-3.1-70b")
    choose(page, "Weights", "fp8")
    choose(page, "TP", "2")
    expect(page.locator("[data-testid='stMain'] [data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h100-sxm")
    after = {k: metric(page, k) for k in HEADLINES}
    assert after["tok/s per replica"] != before
    assert "model=llama-3.1-70b" in page.url and "wd=fp8" in page.url and "tp=2" in page.url
    page.screenshot(path=str(ARTIFACTS / "plan.png"), full_page=True)
    shared = page.url
    ctx.close()

    # A tall window: Streamlit scrolls inside its own container, so full_page stops at the viewport.
    fresh = browser.new_context(viewport={"width": 1400, "height": 2200})
    page = fresh.new_page()
    page.goto(shared)
    settled(page)
    assert {k: metric(page, k) for k in after} == after
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
    settled(page)
    choose(page, "GPU", "h200-sxm")
    choose(page, "Model", "llama-3.1-70b")
    choose(page, "Weights", "fp8")
    expect(page.locator("[data-testid='stMain'] [data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h200-sxm")
    shown = {k: metric(page, k) for k in HEADLINES}
    _goto(page, "scenarios")
    page.get_by_label("Name", exact=True).fill("Browser review")
    page.get_by_label("Tags (comma-separated)").fill("browser")
    page.get_by_role("button", name="Save").click()
    settled(page)
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
        settled(page)
        expect(page.locator("[data-testid='stMain'] [data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h200-sxm")
        assert {k: metric(page, k) for k in HEADLINES} == shown, link
        assert page.locator("[data-testid='stException']").count() == 0
        fresh.close()


def test_direct_page_url_on_a_fresh_server(browser: Browser, tmp_path: Path) -> None:
    # The first request a new server sees is a page's own URL, not "/": the page
    # must still run through app.py (navigation, sidebar, the URL's scenario).
    with migrated_server(tmp_path / "ridgeline.db") as url:
        page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
        page.goto(f"{url}/fleet?model=llama-3.1-70b&wd=fp8&tp=2")
        settled(page)
        expect(page.locator("h1").first).to_have_text("Fleet & cost")
        expect(page.locator("[data-testid='stSidebarNav']")).to_contain_text("Review")
        expect(page.locator("[data-testid='stMetric']").first).to_be_visible()
        expect(page).to_have_url(re.compile(r"model=llama-3\.1-70b"))
        page.locator("[data-testid='stSidebarNav'] a", has_text=re.compile("^Plan$")).first.click()
        settled(page)
        expect(page.locator("[data-testid='stMain'] [data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h100-sxm")
        page.context.close()


def test_root_link_on_a_fresh_server_keeps_its_scenario_after_a_page_switch(browser: Browser, tmp_path: Path) -> None:
    # The first session a new server sees opens "/" with a scenario in the link; the
    # first run may start in Streamlit's pages/-folder mode, and the scenario must
    # still survive the first page switch.
    with migrated_server(tmp_path / "ridgeline.db") as url:
        page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
        page.goto(f"{url}/?model=llama-3.1-70b&wd=fp8&tp=2")
        settled(page)
        expect(page.locator("h1").first).to_have_text("Plan")
        page.locator("[data-testid='stSidebarNav'] a", has_text=re.compile("^Fleet & cost$")).first.click()
        settled(page)
        expect(page.locator("h1").first).to_have_text("Fleet & cost")
        expect(page).to_have_url(re.compile(r"model=llama-3\.1-70b"))
        page.context.close()
