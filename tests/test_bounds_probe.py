"""The probe's records do not grow with their streams (MAX_ITL_SAMPLES_PER_REQUEST): a
200,000-event stream leaves a record of a few KB, the memory held while reading it stays
flat, and the level's ITL statistics stay exact where every gap fits, estimates close to
the exact figures where they do not (count and mean always exact)."""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest

from planner.probe.record import MAX_ITL_SAMPLES_PER_REQUEST, RequestRecord
from planner.probe.sse import SseSplitter, max_stream_events
from planner.probe.summary import itl_stats, summarize_level

EVENT = b'data: {"choices": [{"text": "x", "index": 0}]}\n\n'


def _stream(events: int) -> tuple[RequestRecord, int]:
    """``events`` one-token events, one per read 1 µs apart, then [DONE]; the traced peak (bytes)."""
    rec = RequestRecord(index=0, warmup=False, scheduled_ns=0)
    splitter = SseSplitter(rec, [], max_stream_events(events))
    tracemalloc.start()
    try:
        for k in range(events):
            splitter.feed(EVENT, 1000 * (k + 1))
        splitter.feed(b"data: [DONE]\n\n", 1000 * (events + 1))
        assert splitter.end()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return rec, peak


def test_a_200k_event_stream_leaves_a_bounded_record() -> None:
    small, small_peak = _stream(2_000)
    big, big_peak = _stream(200_000)
    assert big.token_chunks == big.chunks == 200_000 and big.itl_count == 199_999
    assert big.itl_sum_ns == 199_999 * 1000 and big.first_token_ns == 1000 and big.last_token_ns == 200_000_000
    assert len(big.itl_kept_ns) <= MAX_ITL_SAMPLES_PER_REQUEST
    # the record a worker process pickles to the parent: a few KB whatever the stream's length
    assert len(pickle.dumps(big)) <= 8 * MAX_ITL_SAMPLES_PER_REQUEST + 2048
    assert len(pickle.dumps(big)) < 2 * len(pickle.dumps(small))
    # 100× the events, the same memory held (one timestamp per event was ~10 MB here)
    assert big_peak < 200_000, f"reading 200,000 events held {big_peak:,} bytes at its peak"
    assert big_peak < 3 * max(small_peak, 20_000)


def _record(gaps_ns: np.ndarray, index: int) -> RequestRecord:
    rec = RequestRecord(index=index, warmup=False, scheduled_ns=0)
    t = 10_000
    rec.add_chunk(t, token=True)
    for g in gaps_ns.tolist():
        t += int(g)
        rec.add_chunk(t, token=True)
    return rec


def test_itl_percentiles_exact_while_every_gap_fits() -> None:
    rng = np.random.default_rng(1)
    gaps = [rng.integers(1_000_000, 90_000_000, size=n) for n in (1, 50, MAX_ITL_SAMPLES_PER_REQUEST, 7)]
    recs = [_record(g, i) for i, g in enumerate(gaps)]
    every = np.concatenate(gaps).astype(float) / 1e9
    got = itl_stats(recs)
    assert got.count == every.size
    assert got.mean == pytest.approx(float(every.mean()), rel=1e-12)
    assert [got.p50, got.p90, got.p99] == [float(x) for x in np.percentile(every, [50, 90, 99])]


def test_itl_percentiles_past_the_cap_are_close_estimates() -> None:
    rng = np.random.default_rng(2)
    # 12 long streams with different speeds (a heavy-tailed mix): 40,000 gaps each
    gaps = [np.maximum(rng.lognormal(np.log(0.02 * (1 + i % 4)), 0.6, size=40_000) * 1e9, 1).astype(np.int64)
            for i in range(12)]
    recs = [_record(g, i) for i, g in enumerate(gaps)]
    assert all(len(r.itl_kept_ns) <= MAX_ITL_SAMPLES_PER_REQUEST for r in recs)
    every = np.concatenate(gaps).astype(float) / 1e9
    got = itl_stats(recs)
    assert got.count == every.size and got.mean == pytest.approx(float(every.mean()), rel=1e-9)
    for q, value in zip((50, 90, 99), (got.p50, got.p90, got.p99), strict=True):
        assert value == pytest.approx(float(np.percentile(every, q)), rel=0.08), q
    # the level summary reports the same figures under its unchanged keys
    lv = summarize_level(recs, concurrency=1, slo_ttft_s=1.0, slo_tpot_s=1.0)
    assert lv.itl_s == got and set(lv.model_dump()) >= {"ttft_s", "tpot_s", "itl_s", "e2e_s"}
