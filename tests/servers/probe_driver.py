"""Run the CLI (``python -m planner ARGS``) in this process and report what it cost.

    python tests/servers/probe_driver.py probe --url URL ...

Prints one JSON line: ``rc``, ``out`` and ``err`` (what the CLI printed),
``peak_bytes`` (tracemalloc's peak of Python allocations during the command)
and ``rss_growth_bytes`` (growth of the process's peak RSS, getrusage maxrss,
over the baseline).  The baseline is taken after a warm-up probe of a closed
loopback port in every format, so the modules the command imports lazily are
not counted against it.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import sys
import tracemalloc

import planner.probe.persist  # noqa: F401 - imported before the baseline
import planner.store.migrate  # noqa: F401
from planner.cli import main as cli_main

WARMUP = ["probe", "--url", "http://127.0.0.1:9", "--model", "m", "--requests", "1", "--warmup", "0",
          "--no-metrics", "--timeout-s", "2"]


def _maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def main() -> None:
    for fmt in ("json", "csv", "table"):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cli_main([*WARMUP, "--format", fmt])
    out, err = io.StringIO(), io.StringIO()
    rss0 = _maxrss_bytes()
    tracemalloc.start()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli_main(sys.argv[1:])
        except SystemExit as exc:  # argparse
            rc = int(exc.code or 0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({"rc": rc, "out": out.getvalue(), "err": err.getvalue(), "peak_bytes": peak,
                      "rss_growth_bytes": _maxrss_bytes() - rss0}))


if __name__ == "__main__":
    main()
