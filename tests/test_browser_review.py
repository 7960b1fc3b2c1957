"""Issue 16's review, start to finish in a real browser against a fresh server:
Llama-3.1-70B FP8 at 50 req/s, 2,000/300 tokens, TTFT ≤ 1 s, ITL ≤ 50 ms on
H200 TP2 disaggregated.  Set it in the sidebar, read Fleet & cost, compare H100
vs H200 (two clicks), save it, update it to revision 2 (a negotiated price) and
read the field-by-field history,
reopen both share links in fresh browsers and find the same numbers, download
the review report (HTML and PDF) and find the page's GPUs and $/Mtok in it,
download the plan CSV and read it back.

The clicks and typed entries are counted (``tests.browser_support.ACTIONS``) and
written to test-artifacts/review-clicks.txt beside a screenshot of each step."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.browser_support import (
    ACTIONS,
    CHROMIUM,
    LAUNCH_ARGS,
    ROOT,
    choose,
    chromium_or_skip,
    click,
    expect_number,
    fleet_numbers,
    metric,
    migrated_server,
    nav,
    set_number,
    settled,
    table_cells,
    type_text,
)

chromium_or_skip()

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

from pages._format import shown, usd  # noqa: E402
from planner import compare_columns, gpu_variants, plan, scenario_from_dict  # noqa: E402
from planner.simulate.referee import simulated_attainment  # noqa: E402
from tests.test_report import _Text  # noqa: E402

REVIEW = {"gpu": "h200-sxm", "model": "llama-3.1-70b", "weights_dtype": "fp8", "parallel": {"tp": 2},
          "serving": {"mode": "disaggregated"}, "workload": {"requests_per_s": 50, "prompt_tokens": 2000,
                                                             "output_tokens": 300},
          "slo": {"ttft_s": 1.0, "itl_s": 0.05}}
PRICE = 2.5  # revision 2: a negotiated $/GPU-hour instead of the catalog's $2.75
NAME = "Review 70B H200"
SLUG = "review-70b-h200"
DOWNLOAD_MS = 120_000  # a deferred download builds the report (and prints the PDF) on click
ARTIFACTS = ROOT / "test-artifacts"


def _download(page: Page, button: str, path: Path) -> Path:
    with page.expect_download(timeout=DOWNLOAD_MS) as dl:
        click(page.get_by_role("button", name=button), wait=False)  # a download does not rerun the page
    dl.value.save_as(path)
    return path


def _shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"review-{name}.png"), full_page=True)


def _no_exception(page: Page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0


def test_the_whole_review(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    ACTIONS.clear()
    scenario = scenario_from_dict(REVIEW)
    want = plan(scenario)
    revised = scenario.model_copy(update={"cost": scenario.cost.model_copy(update={"usd_per_gpu_hour": PRICE})})
    want2 = plan(revised)
    assert usd(want2.cost.usd_per_mtok_output) != usd(want.cost.usd_per_mtok_output)  # revision 2 is visible
    with migrated_server(tmp_path / "ridgeline.db") as url, sync_playwright() as pw:
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
        expect(page.locator("[data-testid='stMain'] [data-testid='stCaptionContainer']").first).to_contain_text("llama-3.1-70b on h200-sxm")
        _no_exception(page)
        _shot(page, "1-plan")
        set_up = ACTIONS.copy()

        # 2. Fleet & cost: the answer, as the core computes it for the same inputs.
        gpus, cost = fleet_numbers(page)
        assert (gpus, cost) == (f"{want.fleet.gpus_total:,.0f}", usd(want.cost.usd_per_mtok_output))
        _shot(page, "2-fleet")

        # 3. Compare H100 vs H200: the page and one click; the table is the core's comparison.
        before = ACTIONS["click"]
        nav(page, "Compare")
        click(page.get_by_role("button", name="H100 vs H200", exact=True))
        assert ACTIONS["click"] - before == 2
        # the page's own call: the options and verdicts refereed by the short simulation
        cols = compare_columns(gpu_variants(scenario, ["h100-sxm", "h200-sxm"], referee=simulated_attainment),
                               referee=simulated_attainment)
        cells = table_cells(page.locator("[data-testid='stTable']").first)
        assert list(cells["GPUs"]) == [c.label for c in cols]
        for c in cols:
            assert cells["GPUs"][c.label] == shown(c.gpus_total, fmt=",.0f")
            assert cells["$/Mtok output"][c.label] == usd(c.usd_per_mtok_output)
            assert cells["Verdict"][c.label] == c.verdict
        expect(page.locator("[data-testid='stVegaLiteChart']").first).to_be_visible()
        _no_exception(page)
        _shot(page, "3-compare")

        # 4. Save (version 1).
        nav(page, "Scenarios")
        type_text(page.get_by_label("Name", exact=True), NAME)
        click(page.get_by_role("button", name="Save", exact=True))
        expect(page.get_by_text(f"Saved '{NAME}' as {SLUG}, version 1")).to_be_visible()

        # 5. A negotiated price, then the same name again: the form asks update or copy; update is version 2.
        set_number(page, "Price", PRICE)
        expect(page.get_by_text(f"A saved scenario is named '{NAME}'")).to_be_visible()
        expect(page.get_by_role("button", name="Save as a copy")).to_be_visible()
        click(page.get_by_role("button", name=f"Update {SLUG} to version 2"))
        expect(page.get_by_text(f"Updated {SLUG} to version 2")).to_be_visible()
        expect(page.get_by_text(f"({SLUG}, version 2)").first).to_be_visible()  # the sidebar's banner
        history = page.locator("[data-testid='stExpander']").filter(has_text="History (2 versions)").first
        click(history.locator("summary"), wait=False)  # opening an expander does not rerun
        diff = table_cells(history.locator("[data-testid='stTable']"))
        assert "2.50" in diff["$/GPU-hour"]["version 2"] and "2.50" not in diff["$/GPU-hour"]["version 1"], diff
        _shot(page, "5-revision-2")
        stored = page.get_by_role("link", name=f"?scenario={SLUG}").first.get_attribute("href") or ""
        stateless = page.get_by_role("link", name="stateless link", exact=True).first.get_attribute("href") or ""
        assert stored == f"./?scenario={SLUG}" and stateless.startswith("./?s=")
        gpus2, cost2 = fleet_numbers(page)
        assert (gpus2, cost2) == (gpus, usd(want2.cost.usd_per_mtok_output))

        # 6. The plan CSV: the scenario's name, a units row, the page's numbers.
        nav(page, "Scenarios")
        with _download(page, "Plan CSV (with units)", tmp_path / "plan.csv").open(newline="") as f:
            units, *data = list(csv.DictReader(f))
        assert units["scenario.name"] == "units:" and units["fleet.kv_transfer_s"] == "s"
        assert len(data) == 1
        row = data[0]
        assert (row["scenario.name"], row["scenario.gpu"], row["scenario.model"]) == (NAME, "h200-sxm", "llama-3.1-70b")
        assert float(row["scenario.cost.usd_per_gpu_hour"]) == PRICE
        assert f"{float(row['fleet.gpus_total']):,.0f}" == gpus2
        assert usd(float(row["cost.usd_per_mtok_output"])) == cost2

        # 7. The review report from the Plan page: the page's GPUs and $/Mtok are in it.
        nav(page, "Plan")
        assert (metric(page, "GPUs"), metric(page, "$/Mtok output")) == (gpus2, cost2)  # the Plan page's answer
        doc = _Text()
        doc.feed(_download(page, "Review report (HTML)", tmp_path / "review.html").read_text())
        assert doc.cards["gpus"][1] == gpus2 and doc.cards["usd-per-mtok-output"][1] == cost2
        text = " ".join(doc.text)
        assert "llama-3.1-70b" in text and "Same layout on h100-sxm" in text and NAME in text
        assert url.replace("http://", "") in " ".join(a.get("href") or "" for t, a in doc.tags if t == "a")
        pdf = _download(page, "Review report (PDF)", tmp_path / "review.pdf")
        assert pdf.read_bytes()[:5] == b"%PDF-"
        ctx.close()
        clicks = dict(ACTIONS)

        # 8. Each link in a fresh browser opens revision 2 with the same numbers.
        for link in (stored, stateless):
            fresh = browser.new_context(viewport={"width": 1400, "height": 1400})
            page = fresh.new_page()
            page.goto(f"{url}/{link.removeprefix('./')}")
            settled(page)
            expect(page.locator("[data-testid='stMain'] [data-testid='stCaptionContainer']").first).to_contain_text(
                "llama-3.1-70b on h200-sxm")
            expect_number(page, "Requests/s", 50)
            expect_number(page, "Price", PRICE)
            if "scenario=" in link:
                expect(page.get_by_text(f"({SLUG}, version 2)").first).to_be_visible()
            assert fleet_numbers(page) == (gpus2, cost2), link
            _no_exception(page)
            fresh.close()
        browser.close()
    (ARTIFACTS / "review-clicks.txt").write_text(
        f"whole review: {clicks.get('click', 0)} clicks and {clicks.get('type', 0)} typed entries "
        f"(setting the scenario: {set_up['click']} clicks, {set_up['type']} typed; the rest: "
        f"{clicks.get('click', 0) - set_up['click']} clicks, {clicks.get('type', 0) - set_up['type']} typed)\n")
    print((ARTIFACTS / "review-clicks.txt").read_text())
