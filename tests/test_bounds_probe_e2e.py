"""The live probe against a loopback server streaming 100,000 one-token events per request:
the probe process's peak memory does not grow with the requests (with one timestamp per
event kept, 8 requests peaked 51 MB above 1 request here; now about 1 MB), and its ITL
count is every gap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers.procs import start_script

ROOT = Path(__file__).resolve().parents[1]
TOKENS = 100_000
_PROBE = ("import json, resource, sys\nfrom planner.cli.main import main\nrc = main(sys.argv[1:])\n"
          "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)")


@pytest.fixture(scope="module")
def flood():
    srv = start_script("pacing_server", "--ttft-s", "0", "--tpot-s", "0")
    yield srv
    srv.stop()


def _probe(url: str, requests: int) -> tuple[dict, int]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, "probe", "--url", url, "--model", "m", "--concurrency", "1",
                           "--requests", str(requests), "--warmup", "0", "--output-tokens", str(TOKENS),
                           "--no-metrics", "--format", "json"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rss = int(next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("MAXRSS_KB")))
    return json.loads(proc.stdout), rss


def test_memory_does_not_grow_with_events_per_request(flood) -> None:
    one, rss_one = _probe(flood.url, 1)
    many, rss_many = _probe(flood.url, 8)
    (lv,) = many["levels"]
    assert lv["failures"] == 0 and lv["output_tokens_total"] == 8 * TOKENS
    assert lv["itl_s"]["count"] == 8 * (TOKENS - 1)  # exact, though each request kept a bounded sample
    grew_mb = (rss_many - rss_one) / 1024
    assert grew_mb < 20, f"8 requests of {TOKENS:,} events peaked {grew_mb:.0f} MB above 1 request"
    assert set(lv) == set(one["levels"][0])  # the same output keys
