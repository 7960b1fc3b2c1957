"""How much load the probe's client holds on one core.

    .venv/bin/python bench/probe_client.py [--max-concurrency 1024]

1. Against the pacing server at 20 ms per token (its own process, pinned to
   another core), the highest concurrency at which the client, pinned to one
   core, adds under 1 ms to the measured TPOT (median over requests of
   |probe TPOT − the server's own TPOT from its clock log|).
2. The most SSE chunks per second the client ingests (the server writes each
   2,000-token stream at once).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from servers.procs import log_lines, start_script  # noqa: E402

from planner.probe import probe_settings, run_probe_sync  # noqa: E402

TPOT_S = 0.020
TOKENS = 50


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {cpu})


def tpot_added_s(url: str, concurrency: int) -> tuple[float, float]:
    """(median |probe TPOT − server TPOT|, client CPU seconds per wall second)."""
    n0 = len(log_lines(url))
    e2e = TOKENS * TPOT_S
    s = probe_settings(url=url, model="pacer", concurrency=(concurrency,), requests=2 * concurrency,
                       output_tokens=TOKENS, prompt_tokens=8, metrics_url="", ramp_up_s=e2e, keep_samples=True,
                       request_timeout_s=60)
    c0, w0 = time.process_time(), time.perf_counter()
    lv = run_probe_sync(s).levels[0]
    cpu = (time.process_time() - c0) / (time.perf_counter() - w0)
    truth = {}
    for line in log_lines(url)[n0:]:
        e = json.loads(line)
        t = e["token_ns"]
        truth[int(e["prompt_head"].rsplit("-", 1)[1])] = (t[-1] - t[0]) / 1e9 / (len(t) - 1)
    errs = [abs(smp.tpot_s - truth[smp.index]) for smp in lv.samples if smp.tpot_s is not None and smp.index in truth]
    if lv.failures or not errs:
        return float("inf"), cpu
    return float(np.median(errs)), cpu


def ingest_chunks_per_s() -> float:
    srv = start_script("pacing_server", "--ttft-s", "0", "--tpot-s", "0", cpu=1)
    try:
        s = probe_settings(url=srv.url, model="pacer", concurrency=(8,), requests=48, output_tokens=2000,
                           prompt_tokens=8, metrics_url="", keep_samples=True)
        lv = run_probe_sync(s).levels[0]
        chunks = sum(smp.token_chunks for smp in lv.samples)
        return chunks / lv.duration_s
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-concurrency", type=int, default=1024)
    args = ap.parse_args()
    _pin(0)
    srv = start_script("pacing_server", "--ttft-s", "0.02", "--tpot-s", str(TPOT_S), cpu=1)
    best = 0
    try:
        c = 1
        while c <= args.max_concurrency:
            added, cpu = tpot_added_s(srv.url, c)
            print(f"concurrency {c:5d}: probe adds {added * 1e3:7.3f} ms to TPOT (median); client CPU {cpu:.0%}")
            if added < 1e-3:
                best = c
            else:
                break
            c *= 2
    finally:
        srv.stop()
    rate = ingest_chunks_per_s()
    print(f"highest concurrency held on one core with < 1 ms added to TPOT at 20 ms/token: {best}")
    print(f"SSE chunks ingested per second (one core): {rate:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
