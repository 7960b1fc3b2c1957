"""The report as one file: its HTML and its download name."""

from __future__ import annotations

from datetime import datetime

from planner.spec.scenario import Scenario
from planner.views.referee import Simulate
from planner.views.report.content import DEFAULT_APP_URL, review_report
from planner.views.report.html import report_html
from planner.views.report.simulated import SimulatedCheck

__all__ = ["REPORT_FILE_STEM_MAX_CHARS", "report_file_name", "review_report_html"]

REPORT_FILE_STEM_MAX_CHARS = 60  # a download's file name from the scenario's name, shortened


def review_report_html(scenario: Scenario, *, share_url: str | None = None, app_url: str = DEFAULT_APP_URL,
                       now: datetime | None = None, charts: bool = True, simulated: SimulatedCheck | None = None,
                       referee: Simulate | None = None, deploy_target: str | None = None) -> str:
    """The review of ``scenario`` as one HTML document (``simulated``/``referee``/``deploy_target``: see
    ``review_report``)."""
    return report_html(review_report(scenario, share_url=share_url, app_url=app_url, now=now, simulated=simulated,
                                     referee=referee, deploy_target=deploy_target), charts=charts)


def report_file_name(scenario: Scenario, suffix: str) -> str:
    """A download name for the report: ``ridgeline-review-<name>.<suffix>``, the
    name reduced to letters, digits and dashes."""
    stem = "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in scenario.name.lower())
    stem = "-".join(part for part in stem.split("-") if part)[:REPORT_FILE_STEM_MAX_CHARS].strip("-")
    return f"ridgeline-review-{stem or 'scenario'}.{suffix}"
