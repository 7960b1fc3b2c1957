"""The review report (issue 16): one self-contained HTML file, and a PDF where
Chromium can print one, with the scenario, the recommended fleet and the
alternatives, cost, the SLO check, charts, derivations with their origins,
assumptions, warnings, catalog sources, the date and the share link.

``review_report_html(scenario)`` is what the Plan page's download and
``python -m planner report`` both write."""

from __future__ import annotations

from datetime import datetime

from planner.spec.scenario import Scenario
from planner.views.report.alternatives import CHEAPEST_GPUS_MAX, COMPARED_GPUS, Alternative
from planner.views.report.content import DEFAULT_APP_URL, ReviewReport, review_report
from planner.views.report.html import report_html
from planner.views.report.numbers import readable_text

__all__ = [
    "CHEAPEST_GPUS_MAX",
    "COMPARED_GPUS",
    "DEFAULT_APP_URL",
    "REPORT_FILE_STEM_MAX_CHARS",
    "Alternative",
    "ReviewReport",
    "readable_text",
    "report_file_name",
    "report_html",
    "review_report",
    "review_report_html",
]

REPORT_FILE_STEM_MAX_CHARS = 60  # a download's file name from the scenario's name, shortened


def review_report_html(scenario: Scenario, *, share_url: str | None = None, app_url: str = DEFAULT_APP_URL,
                       now: datetime | None = None, charts: bool = True) -> str:
    """The review of ``scenario`` as one HTML document."""
    return report_html(review_report(scenario, share_url=share_url, app_url=app_url, now=now), charts=charts)


def report_file_name(scenario: Scenario, suffix: str) -> str:
    """A download name for the report: ``ridgeline-review-<name>.<suffix>``, the
    name reduced to letters, digits and dashes."""
    stem = "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in scenario.name.lower())
    stem = "-".join(part for part in stem.split("-") if part)[:REPORT_FILE_STEM_MAX_CHARS].strip("-")
    return f"ridgeline-review-{stem or 'scenario'}.{suffix}"
