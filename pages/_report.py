"""The review report's downloads (issue 16, item 6): the self-contained HTML that
``python -m planner report --out FILE.html`` writes, and the same document printed
to PDF where this server has Chromium; each is built only when clicked."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import streamlit as st

from planner import (
    Scenario,
    chromium_path,
    html_to_pdf,
    no_chromium_message,
    report_file_name,
)
from planner.simulate.referee import checked_report_html

__all__ = ["report_downloads"]


def _app_url() -> dict[str, Any]:
    """The address this app is served at, for the report's share link (none in AppTest)."""
    url = urlsplit(st.context.url or "")
    return {"app_url": f"{url.scheme}://{url.netloc}/"} if url.scheme in ("http", "https") and url.netloc else {}


def report_downloads(scenario: Scenario, *, deploy_target: str | None = None) -> None:
    """A "Review report" section: HTML and (where Chromium is installed) PDF downloads (``deploy_target``:
    the report lists that target's commands)."""
    st.subheader("Review report")
    kw: dict[str, Any] = {**_app_url(), "deploy_target": deploy_target}
    row = st.container(horizontal=True)
    row.download_button("Review report (HTML)", data=lambda: checked_report_html(scenario, **kw),
                        file_name=report_file_name(scenario, "html"), mime="text/html", key="report_html",
                        on_click="ignore", icon=":material/download:")
    if chromium_path() is not None:
        row.download_button("Review report (PDF)", data=lambda: html_to_pdf(checked_report_html(scenario, **kw)),
                            file_name=report_file_name(scenario, "pdf"), mime="application/pdf", key="report_pdf",
                            on_click="ignore", icon=":material/picture_as_pdf:")
    else:
        st.caption(no_chromium_message())
