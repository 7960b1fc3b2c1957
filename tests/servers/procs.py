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


def start_script(name: str, *args: str, cpu: int | None = None, timeout_s: float = 20.0) -> Server:
    """Run ``tests/servers/<name>.py args`` and wait for its ``PORT n`` line."""
    cmd = [sys.executable, str(HERE / f"{name}.py"), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(proc.pid, {cpu})
        except OSError:
            pass
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
