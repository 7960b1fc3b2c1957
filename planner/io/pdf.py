"""HTML to PDF with the machine's headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright; never a browser download).  The page gets no network:
every request it would make is aborted, so only what the HTML embeds prints.

Each print starts a Chromium (~1 GB at its peak, several seconds of CPU): at most
:data:`MAX_CONCURRENT_PDF_RENDERS` run at once on the machine, over every session,
app server and CLI run (an exclusive ``flock`` on one of that many slot files in
the temp dir, ``RIDGELINE_PDF_SLOT_DIR`` to move it; the kernel frees a dead
process's slot).  A print waits its turn up to :data:`PDF_QUEUE_WAIT_S`, then is
refused with a message saying why."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from planner.errors import PlannerError
from planner.io.slots import try_lock_slot

__all__ = ["CHROMIUM_PATH", "MAX_CONCURRENT_PDF_RENDERS", "PDF_MAX_HTML_BYTES", "PDF_QUEUE_WAIT_S", "PDF_SLOT_DIR_ENV",
           "PDF_TIMEOUT_S", "chromium_path", "html_to_pdf", "no_chromium_message", "render_slot"]

CHROMIUM_PATH = Path("/usr/bin/chromium")  # Debian's package (apt-get install chromium)
PDF_TIMEOUT_S = 60.0  # launch + layout + print of a report: ~2 s here; a stuck browser is stopped
PDF_MAX_HTML_BYTES = 20_000_000  # a report is ~150 kB; refuse to print anything absurd
# Chromiums printing at once on the machine: four at once took 13 s and about 4.5 GB.
MAX_CONCURRENT_PDF_RENDERS = 2
PDF_QUEUE_WAIT_S = 60.0  # a print waits this long for a free slot, then is refused
PDF_SLOT_DIR_ENV = "RIDGELINE_PDF_SLOT_DIR"
_POLL_S = 0.05
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


@contextlib.contextmanager
def render_slot(*, wait_s: float = PDF_QUEUE_WAIT_S) -> Iterator[None]:
    """Hold one of the machine's MAX_CONCURRENT_PDF_RENDERS print slots; PlannerError
    when none frees up within ``wait_s``."""
    d = Path(os.environ.get(PDF_SLOT_DIR_ENV) or Path(tempfile.gettempdir()) / f"ridgeline-pdf-slots-{os.getuid()}")
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        for k in range(MAX_CONCURRENT_PDF_RENDERS):
            fd = try_lock_slot(d, k)
            if fd is None:
                continue
            try:
                yield
                return
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        if time.monotonic() >= deadline:
            raise PlannerError(f"PDF: {MAX_CONCURRENT_PDF_RENDERS} reports are already printing on this server "
                               f"(MAX_CONCURRENT_PDF_RENDERS) and none finished within {wait_s:g} s; "
                               "try again in a moment, or download the HTML report")
        time.sleep(_POLL_S)


def html_to_pdf(html: str, *, timeout_s: float = PDF_TIMEOUT_S, queue_wait_s: float = PDF_QUEUE_WAIT_S) -> bytes:
    """Print ``html`` to A4 PDF bytes (backgrounds kept), once a print slot is free.
    PlannerError when Chromium is missing, the document is too large, no slot frees
    up within ``queue_wait_s``, or printing fails."""
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
        with render_slot(wait_s=queue_wait_s), sync_playwright() as pw:
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
