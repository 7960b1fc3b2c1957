"""Start a test server as a subprocess and stop it by its own handle."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Server:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc, self.port = proc, port
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def raise_priority(pid: int = 0, niceness: int = -10) -> int | None:
    """Give a timing-critical process (a pacing server, the probe itself) CPU
    before the machine's other work, so the measurement measures the probe and
    not the scheduler of a busy shared machine.  Returns the old niceness, or
    None where it is not permitted (not root)."""
    try:
        old = os.getpriority(os.PRIO_PROCESS, pid)
        os.setpriority(os.PRIO_PROCESS, pid, niceness)
        return old
    except (OSError, AttributeError):
        return None


def start_script(name: str, *args: str, cpu: int | None = None, timeout_s: float = 20.0,
                 priority: bool = False) -> Server:
    """Run ``tests/servers/<name>.py args`` and wait for its ``PORT n`` line."""
    cmd = [sys.executable, str(HERE / f"{name}.py"), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(proc.pid, {cpu})
        except OSError:
            pass
    if priority:
        raise_priority(proc.pid)
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("PORT "):
            return Server(proc, int(line.split()[1]))
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"{name} did not start")


def log_lines(url: str) -> list[str]:
    """The pacing server's per-request clock log (GET /log, JSON lines)."""
    import urllib.request

    with urllib.request.urlopen(url + "/log", timeout=30) as resp:
        return resp.read().decode().splitlines()
