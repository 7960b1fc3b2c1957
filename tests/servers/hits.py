"""Ask a hostile_server how many requests it received (``GET /hits``)."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

# Polls (0.1 s apart) before giving up waiting for requests to arrive.
MAX_POLLS = 600


def hits(root_url: str, path: str | None = None) -> int:
    """Requests received by the server at ``root_url``: all, or those for ``path``."""
    with urllib.request.urlopen(root_url.rstrip("/") + "/hits", timeout=30) as resp:
        data = json.loads(resp.read())
    return int(data["total"] if path is None else data["paths"].get(path, 0))


def wait_until_received(job: Any, root_url: str, path: str, n: int) -> bool:
    """True once ``path`` got ``n`` requests while ``job`` (a ProbeJob, or None) still runs."""
    for _ in range(MAX_POLLS):
        if job is not None and job.done:
            return False
        if hits(root_url, path) >= n:
            return True
        time.sleep(0.1)
    return False
