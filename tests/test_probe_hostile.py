"""Hostile endpoints (tests/servers/hostile_server.py) against the probe: every run
ends within its timeout, memory stays bounded, each attack is one failure with
its reason while every other sample is kept, and the API key is in nothing
stored or printed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from servers.hits import hits
from servers.hostile_server import MIXED, TOKENS
from servers.procs import start_script
from sqlalchemy import text

from planner.probe import probe_settings, run_probe_sync
from planner.probe.client import (
    ERROR_DETAIL_CHARS,
    MAX_ERROR_BODY_BYTES,
    RequestRecord,
    make_client,
    read_capped,
    stream_request,
)
from planner.probe.summary import summarize_level
from planner.store.db import make_engine
from planner.store.migrate import upgrade

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "servers" / "probe_driver.py"
SECRET = "sk-hostile-4d5e6f7a8b9c-do-not-leak"
KEY_VAR = "RIDGELINE_HOSTILE_KEY"
TIMEOUT_S = 3.0  # --timeout-s of every attack run (the issue's `--timeout-s 3 --duration-s 2`)
DURATION_S = 2.0
# A run may spend one timed-out request and two timed-out scrapes (before and after
# the level; the one in flight during it is dropped) beyond its duration: 4x the
# timeout bounds it with slack.  Checked on the probe's own clock (run.duration_s).
RUN_BOUND_S = 4 * TIMEOUT_S
# Peak Python allocations (tracemalloc) of one probe command against a hostile server,
# and growth of the process's peak RSS (getrusage maxrss) over its warmed-up baseline.
# Measured here (two runs): peak at most 5.1 MB (the 300 MB /metrics page, read up to
# MAX_METRICS_BYTES = 2 MiB; 0.4-3.1 MB for every other attack), RSS growth at most
# 9.1 MB (endless SSE comments; 5.3-7.7 MB for that page).  The whole CLI process
# peaked at 134-143 MB RSS, imports included.  Before the caps the same page cost
# 2.2 GB and a 400 MB error body 954 MB (issue 11).
MAX_PEAK_BYTES = 32 * 1024 * 1024
MAX_RSS_GROWTH_BYTES = 64 * 1024 * 1024
# A subprocess that runs past this has hung (the unfixed probe never returns on a trickling /metrics).
HANG_GUARD_S = 180


@pytest.fixture(scope="module")
def other_host():
    """A second server on another loopback address: where the redirects point."""
    srv = start_script("hostile_server", "--host", "127.0.0.2")
    srv.url = f"http://127.0.0.2:{srv.port}"
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def hostile(other_host):
    srv = start_script("hostile_server", "--redirect-to", f"{other_host.url}/ok")
    yield srv
    srv.stop()



def _store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return url


def _store_dump(url: str) -> str:
    engine = make_engine(url)
    with engine.connect() as conn:
        tables = [r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))]
        return json.dumps({t: [list(map(str, row)) for row in conn.execute(text(f'SELECT * FROM "{t}"'))]
                           for t in tables})


def _drive(*argv: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, str(DRIVER), *argv], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_err"] = proc.stderr
    return result


# mode -> (failure reasons the requests may end with, the scrape failure expected or None)
ATTACKS = {
    "trickle-metrics": (set(), "timeout"),
    "huge-metrics": (set(), "too_large"),
    "huge-error": ({"http_400"}, None),
    "endless-stream": ({"stream_too_large"}, None),
    # comment lines carry no events: the byte cap or the timeout ends it, whichever first
    "endless-comments": ({"stream_too_large", "timeout"}, None),
    "long-line": ({"sse_line_too_long"}, None),
    "nested-json": ({"malformed_sse"}, None),
    "echo-auth": ({"http_401"}, None),
    "echo-auth-cut": ({"http_401"}, None),
    "echo-auth-sse": ({"malformed_sse"}, None),
    "redirect": ({"http_302"}, "http_302"),
}


@pytest.mark.parametrize("mode", list(ATTACKS))
def test_attack_is_bounded_recorded_and_keyless(mode, hostile, other_host, tmp_path):
    reasons, scrape = ATTACKS[mode]
    db = _store(tmp_path)
    before_other = hits(other_host.url)
    res = _drive("probe", "--url", f"{hostile.url}/{mode}", "--model", "m", "--api-key-env", KEY_VAR,
                 "--timeout-s", str(TIMEOUT_S), "--duration-s", str(DURATION_S), "--concurrency", "1",
                 "--requests", "3", "--warmup", "0", "--output-tokens", str(TOKENS), "--format", "json",
                 "--samples", "--save", env={KEY_VAR: SECRET, "DATABASE_URL": db})
    assert res["rc"] == 0, res["err"]
    run = json.loads(res["out"])
    (lv,) = run["levels"]
    # ends within its timeout, on the probe's own clock
    assert run["duration_s"] <= RUN_BOUND_S
    # memory stays bounded
    assert res["peak_bytes"] < MAX_PEAK_BYTES
    assert res["rss_growth_bytes"] < MAX_RSS_GROWTH_BYTES
    # each request is a success or a failure with the attack's reason
    assert lv["requests"] >= 1
    assert set(lv["failure_reasons"]) <= reasons and (lv["failures"] == lv["requests"]) == bool(reasons)
    assert all(s["error"] in reasons and s["error_detail"] for s in lv["samples"] if s["error"])
    assert all(len(s["error_detail"]) <= ERROR_DETAIL_CHARS for s in lv["samples"])
    if not reasons:  # the endpoint's requests were fine: they are all kept
        assert lv["ttft_s"]["count"] == lv["requests"] and lv["output_tokens_total"] == TOKENS * lv["requests"]
    failures = run["metrics"]["scrape_failures"]
    assert (scrape in failures) if scrape else not failures
    # the key is in nothing printed or stored
    assert SECRET not in res["out"] and SECRET not in res["err"] and SECRET not in res["process_err"]
    assert "saved probe run" in res["err"]
    dump = _store_dump(db)
    assert run["run_id"] in dump and SECRET not in dump
    if mode in ("echo-auth", "echo-auth-sse"):
        assert all("[redacted]" in s["error_detail"] for s in lv["samples"])
    # redirects are not followed: the other host received nothing
    assert hits(other_host.url) == before_other


def test_echo_cut_puts_the_key_across_the_detail_limit(hostile):
    """The echo-auth-cut body really straddles the key over character 200 (so a
    cut before the redaction would keep half of it)."""
    req = urllib.request.Request(f"{hostile.url}/echo-auth-cut/v1/completions", data=b"{}",
                                 headers={"Authorization": f"Bearer {SECRET}"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    body = err.value.read().decode()
    at = body.index(SECRET)
    assert at < ERROR_DETAIL_CHARS < at + len(SECRET)


def test_every_other_sample_is_kept(hostile):
    """Hostile and good answers interleaved: each hostile one is its request's
    failure, every good one is measured in full."""
    s = probe_settings(url=f"{hostile.url}/mixed", model="m", concurrency=(1,), requests=2 * len(MIXED),
                       warmup_requests=0, output_tokens=TOKENS, request_timeout_s=TIMEOUT_S, metrics_url="")
    lv = run_probe_sync(s, api_key=SECRET).levels[0]
    expected = {"huge-error": "http_400", "endless-stream": "stream_too_large", "long-line": "sse_line_too_long",
                "nested-json": "malformed_sse", "echo-auth-sse": "malformed_sse"}
    assert lv.requests == 2 * len(MIXED)
    for smp in lv.samples:
        mode = MIXED[smp.index % len(MIXED)]
        if mode == "ok":
            assert smp.error is None and smp.output_tokens == TOKENS and smp.ttft_s is not None
        else:
            assert smp.error == expected[mode], (mode, smp.error, smp.error_detail)
            assert SECRET not in smp.error_detail
    oks = 2 * MIXED.count("ok")
    assert lv.failures == lv.requests - oks and lv.ttft_s.count == oks and lv.output_tokens_total == TOKENS * oks


def test_read_capped_takes_no_more_than_its_cap():
    """An endless body: read_capped asks the stream for at most its cap, in total."""

    class Endless:
        delivered = 0

        async def read(self, n: int) -> bytes:
            out = b"x" * min(n, 65536)
            self.delivered += len(out)
            return out

    body = Endless()
    got = asyncio.run(read_capped(body, MAX_ERROR_BODY_BYTES))  # type: ignore[arg-type]
    assert len(got) == MAX_ERROR_BODY_BYTES == body.delivered


def test_key_with_a_line_break_is_one_line_not_a_success(hostile):
    key = "sk-abc\r\nX-Injected: 1"
    proc = subprocess.run([sys.executable, "-m", "planner", "probe", "--url", f"{hostile.url}/ok", "--model", "m",
                           "--api-key-env", KEY_VAR, "--requests", "2"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, KEY_VAR: key}, timeout=120)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert err.startswith("error: api key:") and "\n" not in err and "Traceback" not in proc.stderr
    assert "sk-abc" not in proc.stdout + proc.stderr


def test_unexpected_exception_in_a_request_is_a_failure(hostile):
    """A header the client refuses to send (a line break would inject another
    header) raises inside the request: that request is a failure with its
    reason, never a success."""

    async def go() -> RequestRecord:
        rec = RequestRecord(index=0, warmup=False, scheduled_ns=0)
        async with make_client(max_connections=1, connect_timeout_s=5, read_timeout_s=5) as client:
            return await stream_request(client, url=f"{hostile.url}/ok/v1/completions", body={"max_tokens": 5},
                                        headers={"Authorization": "Bearer sk-zz\r\nX-Evil: 1"}, rec=rec,
                                        request_timeout_s=TIMEOUT_S)

    rec = asyncio.run(go())
    assert rec.error == "unexpected" and rec.error_detail and "sk-zz" not in rec.error_detail
    lv = summarize_level([rec], concurrency=1, slo_ttft_s=1.0, slo_tpot_s=1.0)
    assert lv.failures == 1 and lv.failure_reasons == {"unexpected": 1} and lv.req_s == 0


def test_tokens_in_one_chunk_with_a_scenario_is_not_a_crash(hostile):
    """The ok stream sends its five tokens in one chunk (TPOT 0): the prediction
    still comes, measured MBU is null (no decode step was observed), no traceback."""
    proc = subprocess.run([sys.executable, "-m", "planner", "probe", "--url", f"{hostile.url}/ok", "--model", "m",
                           "--concurrency", "1,2", "--requests", "2", "--output-tokens", str(TOKENS),
                           "--set", "gpu=h100-sxm", "--set", "model=llama-3.1-8b", "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    levels = json.loads(proc.stdout)["levels"]
    assert all(lv["failures"] == 0 and lv["tpot_s"]["p50"] == 0 for lv in levels)
    assert all(lv["mbu"] is None and lv["predicted"]["tpot_s"] > 0 for lv in levels)
