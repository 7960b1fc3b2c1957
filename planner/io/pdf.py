"""HTML to PDF with the machine's headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright; never a browser download).  The page gets no network:
every request it would make is aborted, so only what the HTML embeds prints."""

from __future__ import annotations

import shutil
from pathlib import Path

from planner.errors import PlannerError

__all__ = ["CHROMIUM_PATH", "PDF_MAX_HTML_BYTES", "PDF_TIMEOUT_S", "chromium_path", "html_to_pdf", "no_chromium_message"]

CHROMIUM_PATH = Path("/usr/bin/chromium")  # Debian's package (apt-get install chromium)
PDF_TIMEOUT_S = 60.0  # launch + layout + print of a report: ~2 s here; a stuck browser is stopped
PDF_MAX_HTML_BYTES = 20_000_000  # a report is ~150 kB; refuse to print anything absurd
_LAUNCH_ARGS = ("--disable-gpu", "--disable-quic", "--disable-extensions")


def chromium_path() -> Path | None:
    """The Chromium to print with, or None when the machine has none."""
    if CHROMIUM_PATH.exists():
        return CHROMIUM_PATH
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return Path(found) if found else None


def no_chromium_message() -> str:
    return (f"PDF needs headless Chromium ({CHROMIUM_PATH}), which this machine does not have "
            "(apt-get install chromium); write the .html report and print it from a browser instead")


def html_to_pdf(html: str, *, timeout_s: float = PDF_TIMEOUT_S) -> bytes:
    """Print ``html`` to A4 PDF bytes (backgrounds kept).  PlannerError when
    Chromium is missing, the document is too large, or printing fails."""
    exe = chromium_path()
    if exe is None:
        raise PlannerError(no_chromium_message())
    data = html.encode()
    if len(data) > PDF_MAX_HTML_BYTES:
        raise PlannerError(f"report: {len(data):,} bytes of HTML is more than {PDF_MAX_HTML_BYTES:,}; not printing it")
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise PlannerError("PDF needs the playwright package (pip install playwright)") from None
    ms = timeout_s * 1000
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(exe), args=list(_LAUNCH_ARGS), timeout=ms)
            try:
                page = browser.new_page(java_script_enabled=False, offline=True)
                page.set_default_timeout(ms)
                page.route("**/*", lambda route: route.abort())
                page.set_content(html, wait_until="load")
                return page.pdf(format="A4", print_background=True, prefer_css_page_size=True)
            finally:
                browser.close()
    except PlaywrightError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PlannerError(f"printing the PDF with {exe} failed: {first}") from None
