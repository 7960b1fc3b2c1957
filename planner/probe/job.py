"""A probe run in a background thread, for a page: progress to poll, a cancel
button to press, the run (or its one-line error) when it ends.

The page stays thin: it starts a :class:`ProbeJob`, shows :attr:`ProbeJob.progress`
while :attr:`ProbeJob.done` is false, calls :meth:`ProbeJob.cancel` from its
Cancel button, and takes :meth:`ProbeJob.result` at the end.  Cancelling stops
new requests at once and cancels those in flight (recorded as ``cancelled``);
the levels measured so far are kept.
"""

from __future__ import annotations

import logging
import threading

from planner.errors import PlannerError, ProbeError
from planner.probe.load import run_probe_sync
from planner.probe.settings import ProbeSettings
from planner.probe.summary import ProbeRun

__all__ = ["ProbeJob"]

log = logging.getLogger(__name__)


class ProbeJob:
    """One probe run on its own thread and event loop."""

    def __init__(self, settings: ProbeSettings, *, api_key: str | None = None) -> None:
        self.settings = settings
        self._api_key = api_key  # memory only; dropped when the run ends
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._run: ProbeRun | None = None
        self._error: PlannerError | None = None
        self.progress: tuple[str, int, int] = ("starting", 0, 0)  # (level label, requests done, requests asked)
        self._thread = threading.Thread(target=self._main, name="ridgeline-probe", daemon=True)

    def __repr__(self) -> str:  # never the key
        state = "done" if self.done else "cancelling" if self.cancelled else "running"
        return f"ProbeJob({self.settings.url!r}, {state})"

    @classmethod
    def start(cls, settings: ProbeSettings, *, api_key: str | None = None) -> ProbeJob:
        job = cls(settings, api_key=api_key)
        job._thread.start()
        return job

    def _on_progress(self, label: str, done: int, total: int) -> None:
        self.progress = (label, done, total)

    def _main(self) -> None:
        try:
            # a page's server process is shared: its garbage collector is left alone
            self._run = run_probe_sync(self.settings, api_key=self._api_key, cancel_event=self._cancel,
                                       progress=self._on_progress, manage_gc=False)
        except PlannerError as exc:
            self._error = exc
        except Exception as exc:  # noqa: BLE001 - reported as one line, never a traceback on the page
            log.error("probe run failed: %s", type(exc).__name__)  # no message: it could quote a header
            self._error = ProbeError(f"probe failed unexpectedly ({type(exc).__name__})")
        finally:
            self._api_key = None
            self._done.set()

    def cancel(self) -> None:
        """Stop the run (safe from any thread); :meth:`result` then holds what was measured."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the run ends (True) or ``timeout_s`` passes (False)."""
        return self._done.wait(timeout_s)

    def result(self) -> ProbeRun:
        """The finished run; raises its :class:`PlannerError`, or ProbeError while still running."""
        if not self.done:
            raise ProbeError("probe: still running")
        if self._error is not None:
            raise self._error
        assert self._run is not None  # noqa: S101 - done without an error means a run
        return self._run
