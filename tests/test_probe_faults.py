"""A fault server: every failure becomes a record with its reason, the run
completes, and every good request's sample is kept."""

from __future__ import annotations

import pytest
from servers.procs import start_script

from planner.probe import probe_settings, run_probe_sync

FAULTS = ["ok", "500", "ok", "429", "hang", "ok", "reset", "cut", "garbage"]
EXPECTED_REASON = {"500": "http_500", "429": "http_429", "hang": "timeout", "reset": "connection",
                   "cut": "stream_cut", "garbage": "malformed_sse"}


@pytest.fixture(scope="module")
def faulty():
    srv = start_script("fault_server", "--faults", ",".join(FAULTS))
    yield srv
    srv.stop()


def test_each_fault_recorded_with_reason_and_nothing_else_lost(faulty):
    rounds = 2
    s = probe_settings(url=faulty.url, model="faulty", concurrency=(1,), requests=len(FAULTS) * rounds,
                       warmup_requests=0, output_tokens=5, request_timeout_s=1.0, read_timeout_s=1.0,
                       metrics_url="")
    run = run_probe_sync(s)
    lv = run.levels[0]
    assert lv.requests == len(FAULTS) * rounds
    # one request at a time, so request i met fault i mod len(FAULTS)
    for smp in lv.samples:
        fault = FAULTS[smp.index % len(FAULTS)]
        if fault == "ok":
            assert smp.error is None, smp.error_detail
            assert smp.output_tokens == 5 and smp.token_chunks == 5 and smp.token_count_source == "usage"
            assert smp.tpot_s is not None and smp.ttft_s is not None
        else:
            assert smp.error == EXPECTED_REASON[fault], (fault, smp.error, smp.error_detail)
            assert smp.error_detail
    oks = FAULTS.count("ok") * rounds
    assert lv.failures == lv.requests - oks
    assert lv.failure_reasons == {r: rounds for r in EXPECTED_REASON.values()}
    assert lv.ttft_s.count == oks and lv.tpot_s.count == oks
    assert lv.output_tokens_total == 5 * oks
    # failures count as SLO violations: goodput covers only the good requests
    assert lv.goodput_req_s <= lv.req_s == pytest.approx(oks / lv.duration_s)
    # the stream cut after 3 tokens keeps what arrived
    cut = [smp for smp in lv.samples if smp.error == "stream_cut"]
    assert all(smp.token_chunks == 3 for smp in cut)
    # and the CSV carries the reasons
    row = run.csv_rows()[0]
    assert row["failures.timeout"] == rounds and row["failures"] == lv.failures


def test_cancel_stops_the_run_and_records_cancelled(faulty):
    import asyncio

    from planner.probe import run_probe

    # The server's first four requests (ok, 500, ok, 429) complete; its fifth hangs.  Once four have
    # completed, each worker that finished has sent its next request, the hanging one among them.
    hang = FAULTS.index("hang")

    async def go():
        cancel = asyncio.Event()

        def progress(label: str, done: int, total: int) -> None:
            if done >= hang:  # cancel now, while the hanging request is in flight (no wall-clock wait)
                cancel.set()

        s = probe_settings(url=faulty.url, model="faulty", concurrency=(4,), requests=400, warmup_requests=0,
                           output_tokens=5, request_timeout_s=30.0, read_timeout_s=30.0, metrics_url="")
        return await asyncio.wait_for(run_probe(s, cancel=cancel, progress=progress), timeout=25)

    run = asyncio.run(go())
    lv = run.levels[0]
    assert hang < lv.requests < 400  # issuing stopped at the cancel
    assert lv.failure_reasons.get("cancelled", 0) >= 1
    assert "timeout" not in lv.failure_reasons  # cancelled, not left to the 30 s timeout
