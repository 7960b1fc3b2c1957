"""Issue 16's review, start to finish in a real browser against a fresh server:
Llama-3.1-70B FP8 at 50 req/s, 2,000/300 tokens, TTFT ≤ 1 s, ITL ≤ 50 ms on
H200 TP2 disaggregated.  Set it in the sidebar, read Fleet & cost, save it,
reopen both share links in fresh browsers and find the same numbers, download
the review report (HTML and PDF) and find the page's GPUs and $/Mtok in it,
download the plan CSV and read it back."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from tests.browser_support import (
    CHROMIUM,
    LAUNCH_ARGS,
    choose,
    chromium_or_skip,
    expect_number,
    fleet_numbers,
    nav,
    serve,
    set_number,
    settled,
)

chromium_or_skip()

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

from planner import plan, scenario_from_dict  # noqa: E402
from planner.store.migrate import upgrade  # noqa: E402
from tests.test_report import _Text  # noqa: E402

REVIEW = {"gpu": "h200-sxm", "model": "llama-3.1-70b", "weights_dtype": "fp8", "parallel": {"tp": 2},
          "serving": {"mode": "disaggregated"}, "workload": {"requests_per_s": 50, "prompt_tokens": 2000,
                                                             "output_tokens": 300},
          "slo": {"ttft_s": 1.0, "itl_s": 0.05}}
NAME = "Review 70B H200"
DOWNLOAD_MS = 120_000  # a deferred download builds the report (and prints the PDF) on click


def _download(page: Page, button: str, path: Path) -> Path:
    with page.expect_download(timeout=DOWNLOAD_MS) as dl:
        page.get_by_role("button", name=button).click()
    dl.value.save_as(path)
    return path


def test_the_whole_review(tmp_path: Path) -> None:
    want = plan(scenario_from_dict(REVIEW))
    db = tmp_path / "ridgeline.db"
    upgrade(f"sqlite:///{db}")
    with serve(sqlite=db) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        ctx = browser.new_context(viewport={"width": 1400, "height": 1600}, accept_downloads=True)
        page = ctx.new_page()
        page.goto(url)
        settled(page)
        # 1. The scenario, from the sidebar's widgets.
        for label, option in (("GPU", "h200-sxm"), ("Model", "llama-3.1-70b"), ("Weights", "fp8"), ("TP", "2"),
                              ("Serving mode", "disaggregated")):
            choose(page, label, option)
        for label, value in (("Requests/s", 50), ("Prompt tokens", 2000), ("Output tokens", 300),
                             ("TTFT target", 1000), ("ITL target", 50)):
            set_number(page, label, value)
        expect(page.locator("[data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h200-sxm")
        assert page.locator("[data-testid='stException']").count() == 0

        # 2. Fleet & cost: the answer, as the core computes it for the same inputs.
        gpus, usd = fleet_numbers(page)
        assert gpus == f"{want.fleet.gpus_total:,.0f}" and usd == f"${want.cost.usd_per_mtok_output:,.2f}"

        # 3. Save, then the two share links and the plan CSV.
        nav(page, "Scenarios")
        page.get_by_label("Name", exact=True).fill(NAME)
        page.get_by_label("Name", exact=True).press("Enter")  # a text input commits on Enter
        settled(page)
        page.get_by_role("button", name="Save").click()
        settled(page)
        expect(page.get_by_text(f"Saved '{NAME}'")).to_be_visible()
        stored = page.get_by_role("link", name=re.compile(r"\?scenario=")).first.get_attribute("href") or ""
        stateless = page.get_by_role("link", name="stateless link", exact=True).first.get_attribute("href") or ""
        assert stored.startswith("./?scenario=") and stateless.startswith("./?s=")
        rows = list(csv.DictReader(_download(page, "Plan CSV", tmp_path / "plan.csv").open(newline="")))
        data = [r for r in rows if r.get("scenario.gpu") == "h200-sxm"]  # a units row, if any, is not data
        assert len(data) == 1, rows
        row = data[0]
        assert (row["scenario.model"], row["scenario.weights_dtype"]) == ("llama-3.1-70b", "fp8")
        assert f"{float(row['fleet.gpus_total']):,.0f}" == gpus
        assert f"${float(row['cost.usd_per_mtok_output']):,.2f}" == usd

        # 4. The review report from the Plan page: the page's GPUs and $/Mtok are in it.
        nav(page, "Plan")
        doc = _Text()
        doc.feed(_download(page, "Review report (HTML)", tmp_path / "review.html").read_text())
        assert doc.cards["gpus"][1] == gpus and doc.cards["usd-per-mtok-output"][1] == usd
        text = " ".join(doc.text)
        assert "llama-3.1-70b" in text and "Same layout on h100-sxm" in text
        assert url.replace("http://", "") in " ".join(a.get("href") or "" for t, a in doc.tags if t == "a")
        pdf = _download(page, "Review report (PDF)", tmp_path / "review.pdf")
        assert pdf.read_bytes()[:5] == b"%PDF-"
        ctx.close()

        # 5. Each link in a fresh browser opens the same scenario with the same numbers.
        for link in (stored, stateless):
            fresh = browser.new_context(viewport={"width": 1400, "height": 1400})
            page = fresh.new_page()
            page.goto(f"{url}/{link.removeprefix('./')}")
            settled(page)
            expect(page.locator("[data-testid='stCaptionContainer']").first).to_contain_text(
                "llama-3.1-70b on h200-sxm")
            expect_number(page, "Requests/s", 50)
            assert fleet_numbers(page) == (gpus, usd), link
            assert page.locator("[data-testid='stException']").count() == 0
            fresh.close()
        browser.close()

