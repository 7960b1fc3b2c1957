"""PDF prints are capped over the machine (MAX_CONCURRENT_PDF_RENDERS): four at once run
at most that many Chromiums together, and a print that finds every slot held past its
wait is refused with a message, having started no browser."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from planner.errors import PlannerError
from planner.io.pdf import MAX_CONCURRENT_PDF_RENDERS, PDF_SLOT_DIR_ENV, chromium_path, html_to_pdf

ROOT = Path(__file__).resolve().parents[1]
HTML = "<html><body><h1>Report</h1><p>" + "text " * 2000 + "</p></body></html>"
_HOLDER = ("import time; from contextlib import ExitStack; from planner.io.pdf import render_slot, "
           "MAX_CONCURRENT_PDF_RENDERS as N\nwith ExitStack() as s:\n    [s.enter_context(render_slot(wait_s=0)) "
           "for _ in range(N)]\n    print('held', flush=True); time.sleep(120)")

# CI sets RIDGELINE_REQUIRE_BROWSER=1: there a missing Chromium fails the tests instead of skipping them.
pytestmark = pytest.mark.skipif(chromium_path() is None and os.environ.get("RIDGELINE_REQUIRE_BROWSER") != "1",
                                reason="needs Debian's chromium (apt-get install chromium)")


def _browsers() -> int:
    """Chromium browser processes of this test's slot dir: not their renderers and helpers
    (`--type=`), and not a process a browser has forked and not yet exec'd (it shows its parent's
    command line for that instant): only those whose parent is not itself a Chromium."""
    procs: dict[str, tuple[str, bool]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] in ("Z", "X"):  # exited, not yet reaped: holds no memory
            continue
        chromium = bool(cmd) and os.path.basename(cmd[0]) == b"chromium"
        browser = chromium and not any(a.startswith(b"--type=") for a in cmd) \
            and os.environ[PDF_SLOT_DIR_ENV].encode() in environ
        procs[pid] = (fields[1], browser)  # (parent pid, is a browser)
    chromiums = {pid for pid, (_, browser) in procs.items() if browser}
    return sum(1 for pid in chromiums if procs[pid][0] not in chromiums)


@pytest.fixture(autouse=True)
def slot_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(PDF_SLOT_DIR_ENV, str(tmp_path))
    return tmp_path


def test_four_prints_at_once_run_at_most_the_cap_of_chromiums() -> None:
    results: list[bytes] = []
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _browsers())
            stop.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=lambda: results.append(html_to_pdf(HTML))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert len(results) == 4 and all(r.startswith(b"%PDF") for r in results)
    assert 1 <= peak[0] <= MAX_CONCURRENT_PDF_RENDERS, peak[0]


def test_every_slot_held_elsewhere_refuses_without_starting_a_browser() -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(PlannerError) as err:
            html_to_pdf(HTML, queue_wait_s=0.3)
        assert str(err.value).startswith(f"PDF: {MAX_CONCURRENT_PDF_RENDERS} reports are already printing")
        assert "MAX_CONCURRENT_PDF_RENDERS" in str(err.value) and "within 0.3 s" in str(err.value)
        assert _browsers() == 0
    finally:
        holder.kill()
        holder.wait()
    assert html_to_pdf(HTML, queue_wait_s=5).startswith(b"%PDF")  # the dead holder's slots are free
