"""The review report (issue 16): one self-contained HTML file, and a PDF where
Chromium can print one, with the scenario, the recommended fleet and the
alternatives, cost, the SLO check, charts, derivations with their origins,
assumptions, warnings, catalog sources, the date and the share link.

``review_report_html(scenario)`` is what the Plan page's download and
``python -m planner report`` both write."""

from planner.views.report.alternatives import (
    CHEAPEST_GPUS_MAX,
    COMPARED_GPUS,
    Alternative,
    alternatives,
)
from planner.views.report.charts import (
    CHART_WIDTH_PX,
    Chart,
    report_charts,
    svg_data_uri,
)
from planner.views.report.content import (
    DEFAULT_APP_URL,
    ReportRow,
    ReviewReport,
    Source,
    review_report,
)
from planner.views.report.deployment import deployment_rows
from planner.views.report.derivations import (
    DERIVATION_GROUPS,
    DerivationRow,
)
from planner.views.report.document import (
    REPORT_FILE_STEM_MAX_CHARS,
    report_file_name,
    review_report_html,
)
from planner.views.report.html import (
    CSP,
    report_html,
)
from planner.views.report.numbers import (
    MISSING,
    SIG_FIGS,
    count,
    is_number,
    missing,
    percent,
    quantity,
    readable_text,
    sig,
    usd,
)
from planner.views.report.simulated import (
    ReportCells,
    SimulatedCheck,
    band_row,
    latency_rows,
)

__all__ = [
    "Alternative",
    "CHART_WIDTH_PX",
    "CHEAPEST_GPUS_MAX",
    "COMPARED_GPUS",
    "CSP",
    "Chart",
    "DEFAULT_APP_URL",
    "DERIVATION_GROUPS",
    "DerivationRow",
    "MISSING",
    "REPORT_FILE_STEM_MAX_CHARS",
    "ReportRow",
    "ReviewReport",
    "SIG_FIGS",
    "SimulatedCheck",
    "ReportCells",
    "band_row",
    "latency_rows",
    "Source",
    "alternatives",
    "count",
    "deployment_rows",
    "is_number",
    "missing",
    "percent",
    "quantity",
    "readable_text",
    "report_charts",
    "report_file_name",
    "report_html",
    "review_report",
    "review_report_html",
    "sig",
    "svg_data_uri",
    "usd",
]
