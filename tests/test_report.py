"""The review report: the numbers the CLI's plan states, readable text (no nan,
inf or scientific notation), escaped hostile names, one self-contained file,
and `python -m planner report` writing HTML and PDF atomically."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import (
    Scenario,
    get_gpu,
    get_model,
    plan,
    plan_slo_checks,
    report_file_name,
    review_report_html,
    scenario_from_dict,
    scenario_from_token,
)
from planner.cli import main
from planner.views.report import report_html, review_report
from planner.views.report.numbers import quantity, readable_text, sig

REVIEW = {  # issue 16's review: Llama-3.1-70B FP8 at 50 req/s, 2,000/300 tokens, TTFT ≤ 1 s, ITL ≤ 50 ms
    "name": "H200 review", "model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8",
    "parallel": {"tp": 2}, "serving": {"mode": "disaggregated"},
    "workload": {"requests_per_s": 50, "prompt_tokens": 2000, "output_tokens": 300},
    "slo": {"ttft_s": 1.0, "itl_s": 0.05},
}
# 405B in BF16 (~810 GB of weights) on one 48 GB L40S: nothing fits, every fleet number is NaN.
INFEASIBLE = {"name": "does not fit", "model": "llama-3.1-405b", "gpu": "l40s", "weights_dtype": "bf16"}
SETS = [f"--set=model={REVIEW['model']}", "--set=gpu=h200-sxm", "--set=weights_dtype=fp8", "--set=parallel.tp=2",
        "--set=serving.mode=disaggregated", "--set=workload.requests_per_s=50", "--set=workload.prompt_tokens=2000",
        "--set=workload.output_tokens=300", "--set=slo.ttft_s=1", "--set=slo.itl_s=0.05", "--set=name=H200 review"]
SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")
NON_FINITE = re.compile(r"\b(nan|inf|infinity)\b", re.IGNORECASE)
CHROMIUM = Path("/usr/bin/chromium")


class _Text(HTMLParser):
    """The text a reader sees, the attributes by tag, and the answer cards."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.cards: dict[str, list[str]] = {}
        self._skip = 0
        self._card: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag in ("style", "script"):
            self._skip += 1
        if tag == "div" and a.get("data-key"):
            self._card = a["data-key"]
            self.cards[self._card] = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)
            if self._card is not None and data.strip():
                self.cards[self._card].append(data.strip())


def parse(html: str) -> _Text:
    p = _Text()
    p.feed(html)
    return p


def svg_texts(doc: _Text) -> str:
    """The labels inside the embedded SVG charts."""
    out = []
    for tag, a in doc.tags:
        src = a.get("src") or ""
        if tag == "img" and src.startswith("data:image/svg+xml;base64,"):
            svg = base64.b64decode(src.split(",", 1)[1]).decode()
            out += re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    return " ".join(out)


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def review_html() -> str:
    return review_report_html(scenario_from_dict(REVIEW), share_url="http://127.0.0.1:8501/?s=x")


def test_report_states_the_plan_as_the_cli_does(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = cli_json(capsys, "plan", *SETS)
    out = tmp_path / "review.html"
    written = cli_json(capsys, "report", *SETS, "--out", str(out))
    assert written == {"path": str(out), "format": "html", "bytes": out.stat().st_size}
    doc = parse(out.read_text())
    gpus, usd = plan["fleet"]["gpus_total"], plan["cost"]["usd_per_mtok_output"]
    # The CLI's JSON keeps full precision; the report shows whole GPUs and 3 significant figures.
    assert doc.cards["gpus"][1] == f"{round(gpus):,}"
    assert doc.cards["usd-per-mtok-output"][1] == f"${usd:.3g}"
    text = " ".join(doc.text)
    assert f"{plan['fleet']['prefill_replicas']:.0f} prefill + {plan['fleet']['decode_replicas']:.0f} decode" in text
    for section in ("SLO check", "Recommended fleet", "Alternatives compared", "How the numbers were derived",
                    "Assumptions", "Warnings", "Catalog sources", "Share link"):
        assert section in text
    # The H100 vs H200 comparison: the plan's layout on the other GPU is an alternative.
    assert "Same layout on h100-sxm" in text
    assert get_gpu("h200-sxm").source_url in out.read_text() and get_model("llama-3.1-70b").source_url in out.read_text()


def test_slo_check_puts_each_target_beside_its_value(review_html: str) -> None:
    doc = parse(review_html)
    text = " ".join(doc.text)
    assert "TTFT ≤ 1 s" in text and "TPOT ≤ 50 ms" in text
    assert "TTFT p90 · queueing included" in text and "TPOT p90 · no queueing" in text  # which statistic is checked
    results = re.findall(r"\b(pass|fail)\b", text.split("SLO check", 1)[1].split("Scenario", 1)[0])
    assert results and set(results) == {"pass"}


@pytest.mark.parametrize("data", [REVIEW, INFEASIBLE, {}, {"slo": {"ttft_s": 0.001, "itl_s": 0.001}}],
                         ids=["review", "infeasible", "default", "tight"])
def test_the_slo_check_is_the_pages_check(data: dict[str, Any]) -> None:
    # One truth: the report checks the vocabulary's SloCheck values, with its labels and pass/fail.
    s = scenario_from_dict(data)
    report = review_report(s)
    checks = plan_slo_checks(plan(s), s)
    assert report.slo == checks
    rows = report.slo_rows[:2]
    for row, check in zip(rows, checks, strict=True):
        assert check.label in row.note and row.passed is bool(check.passed)
        assert row.label.startswith(f"{check.metric} ≤ ")
    assert report.feasible is (plan(s).operating_point.feasible and all(r.passed for r in report.slo_rows))
    doc = parse(report_html(report, charts=False))
    slo = " ".join(doc.text).split("SLO check", 1)[1].split("Scenario", 1)[0]
    assert all(check.label in slo for check in checks)


@pytest.mark.parametrize("data", [REVIEW, INFEASIBLE, {}], ids=["review", "infeasible", "default"])
def test_no_nan_inf_or_scientific_notation(data: dict[str, Any]) -> None:
    # A stored scenario's link: a token's base64 could spell "2e7" without being a number.
    doc = parse(review_report_html(scenario_from_dict(data), share_url="http://127.0.0.1:8501/?scenario=x"))
    # Catalog source URLs are addresses, not numbers (a commit hash can spell "1e1").
    page = re.sub(r"https?://\S+", "URL", " ".join(doc.text))
    for where, text in (("page", page), ("charts", svg_texts(doc))):
        assert not NON_FINITE.search(text), (where, NON_FINITE.search(text))
        assert "e+" not in text and not SCIENTIFIC.search(text), (where, SCIENTIFIC.search(text))
    if data is INFEASIBLE:
        text = " ".join(doc.text)
        assert "— (no operating point meets the SLO)" in text and "fail" in text


def test_hostile_names_are_escaped_and_nothing_loads() -> None:
    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    gpu = get_gpu("h100-sxm").model_dump(mode="json") | {
        "id": "evil-gpu", "name": hostile, "vendor": hostile, "source_url": "javascript:alert(3)",
        "source_note": "<iframe src=https://example.com></iframe>"}
    model = get_model("llama-3.1-8b").model_dump(mode="json") | {
        "id": "evil-model", "name": "<b onmouseover=alert(4)>m</b>", "source_url": "data:text/html,<script>"}
    scenario = scenario_from_dict({"name": hostile, "gpu": gpu, "model": model})
    html = review_report_html(scenario)
    assert "<script" not in html.lower() and "<iframe" not in html.lower() and "<b onmouseover" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in html  # shown as typed
    doc = parse(html)
    assert not [(tag, k) for tag, a in doc.tags for k in a if k.startswith("on")]  # no event handler anywhere
    hrefs = [a.get("href") or "" for tag, a in doc.tags if tag == "a"]
    assert hrefs and all(h.startswith(("http://", "https://")) for h in hrefs)
    srcs = [a.get("src") or "" for tag, a in doc.tags if a.get("src") is not None]
    assert srcs and all(s.startswith("data:image/") for s in srcs)
    assert not [tag for tag, _ in doc.tags if tag in ("script", "link", "iframe", "object", "embed")]
    csp = [a.get("content") for tag, a in doc.tags if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp == ["default-src 'none'; style-src 'unsafe-inline'; img-src data:"]


@pytest.mark.parametrize(("name", "expected"), [
    ("H200 review", "ridgeline-review-h200-review.pdf"),
    ("../../etc/passwd <x>", "ridgeline-review-etc-passwd-x.pdf"),  # no path, no markup in a download's name
    ("ÅÅÅ", "ridgeline-review-scenario.pdf"),
])
def test_download_name_is_plain(name: str, expected: str) -> None:
    assert report_file_name(Scenario(name=name), "pdf") == expected


def test_share_link_reopens_the_same_scenario() -> None:
    scenario = scenario_from_dict(REVIEW)
    doc = parse(review_report_html(scenario, app_url="https://ridgeline.example/", charts=False))
    links = [a["href"] for tag, a in doc.tags if tag == "a" and (a.get("href") or "").startswith("https://ridgeline")]
    assert links
    token = links[0].split("?s=", 1)[1]
    assert scenario_from_token(token) == scenario


@pytest.mark.parametrize(("value", "expected"), [
    (2.074, "2.07"), (70.55, "70.6"),  # halves up, as written (70.55 is 70.5499… in binary)
    (999.6, "1,000"), (6204.3, "6,200"), (0.0003111, "0.000311"), (32.0, "32"), (123456789.5, "123,000,000"),
])
def test_three_significant_figures(value: float, expected: str) -> None:
    assert sig(value) == expected


@pytest.mark.parametrize(("value", "unit", "expected"), [
    (70.55e9, "bytes", "70.6 GB"), (0.0382, "s", "38.2 ms"), (17.63, "s", "17.6 s"), (1.979e15, "FLOP/s", "1.98 PFLOP/s"),
    (0.688, "fraction", "68.8%"), (2.074, "USD/Mtok", "$2.07/Mtok"), (float("nan"), "s", "—"), (float("inf"), "s", "—"),
    (0.99996, "s", "1.00 s"), (0.00099996, "s", "1.00 ms"),  # rounding up moves to the next unit
    (1.0, "USD/GPU-hour", "$1.00/GPU-hour"), (112.0, "USD/h", "$112/h"),  # dollars keep 3 significant figures
])
def test_quantities(value: float, unit: str, expected: str) -> None:
    assert quantity(value, unit) == expected


def test_derivation_text_loses_scientific_notation() -> None:
    assert readable_text("7.055e+10 / (2 × 1) = 3.528e+10") == "70.6 G / (2 × 1) = 35.3 G"
    assert readable_text("112 / (50 × 300 × 3600 / 1e6)") == "112 / (50 × 300 × 3600 / 10⁶)"
    assert readable_text("ρ = nan, wait inf, information") == "ρ = —, wait —, information"


@given(st.floats(min_value=-1e18, max_value=1e18, allow_nan=False).filter(lambda x: x == 0 or abs(x) > 1e-12))
def test_sig_is_positional_and_within_rounding(x: float) -> None:
    text = sig(x)
    assert "e" not in text.lower()
    back = float(text.replace(",", ""))
    assert back == pytest.approx(x, rel=5e-3, abs=1e-15)


def test_cli_refuses_a_directory_and_a_wrong_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["report", "--out", str(tmp_path / "r.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ".html or .pdf" in err
    assert main(["report", "--out", str(tmp_path / "missing" / "r.html")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_replaces_a_file_atomically(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    out.write_text("old")
    assert main(["report", "--set=name=second", "--out", str(out)]) == 0
    capsys.readouterr()
    assert "Capacity review: second" in out.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temporary file left behind


def test_cli_writes_a_pdf_with_the_plans_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not CHROMIUM.exists():
        if os.environ.get("RIDGELINE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and RIDGELINE_REQUIRE_BROWSER=1")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    pdftotext = shutil.which("pdftotext")
    if pdftotext is None:
        if os.environ.get("RIDGELINE_REQUIRE_BROWSER") == "1":
            pytest.fail("pdftotext is missing (apt-get install poppler-utils; .ci/run installs it)")
        pytest.skip("pdftotext not installed (apt-get install poppler-utils)")
    plan = cli_json(capsys, "plan", *SETS)
    out = tmp_path / "review.pdf"
    written = cli_json(capsys, "report", *SETS, "--out", str(out))
    assert written["format"] == "pdf" and out.read_bytes()[:5] == b"%PDF-"
    text = subprocess.run([pdftotext, "-layout", str(out), "-"], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    answer = text.split("SLO check", 1)[0]
    assert re.search(rf"(?m)^\s*{round(plan['fleet']['gpus_total'])}\b", answer), answer
    assert f"${plan['cost']['usd_per_mtok_output']:.3g}" in answer


def test_cli_without_chromium_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("planner.io.pdf.CHROMIUM_PATH", tmp_path / "no-chromium")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["report", "--out", str(tmp_path / "r.pdf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Chromium" in err and "Traceback" not in err
    assert not (tmp_path / "r.pdf").exists()


def test_plan_page_offers_the_report() -> None:
    from tests.apptest_v2 import new_app_test

    at = new_app_test(timeout=60)
    at.run()
    assert not at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Review report (HTML)" in labels
    assert ("Review report (PDF)" in labels) == CHROMIUM.exists()
