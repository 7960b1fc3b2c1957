"""Issue 17: the probe reports its own client (event-loop lag, CPU share, held
concurrency), warns when its delay is in the figures, runs on uvloop where it
is installed (asyncio otherwise), and merges ``--workers N`` exactly as one run."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from servers.procs import start_script

from planner.probe import (
    CPU_SHARE_WARN,
    LOOP_LAG_P99_WARN_S,
    ClientStats,
    RequestRecord,
    client_report,
    loop_factory,
    probe_settings,
    run_probe,
    run_probe_sync,
    split_level,
)

ROOT = Path(__file__).resolve().parents[1]
TTFT_S = 0.02
TPOT_S = 0.005
TOKENS = 16


@pytest.fixture(scope="module")
def pacer():
    srv = start_script("pacing_server", "--ttft-s", str(TTFT_S), "--tpot-s", str(TPOT_S), "--chunk-tokens", "1,2,1,3")
    yield srv
    srv.stop()


def _settings(url: str, **kw):
    base = dict(url=url, model="pacer", concurrency=(1, 6), requests=24, output_tokens=TOKENS, prompt_tokens=8,
                metrics_url="", endpoint="chat")
    return probe_settings(**{**base, **kw})


def test_each_level_reports_its_client_within_bounds(pacer):
    run = run_probe_sync(_settings(pacer.url))
    for lv in run.levels:
        c = lv.client
        assert c is not None and c.workers == 1 and c.requested_concurrency == lv.concurrency
        assert c.loop_lag_samples > 0 and 0 <= c.loop_lag_p50_s <= c.loop_lag_p99_s
        assert 0 <= c.cpu_share <= 1 and c.cpu_share_max_worker == c.cpu_share
        # a closed loop never has more in flight than its streams; against a server that answers every
        # request alike (4 rounds of the same length) it holds them nearly all the time
        assert c.held_concurrency <= lv.concurrency
        assert c.held_concurrency >= 0.8 * lv.concurrency, (lv.concurrency, c.held_concurrency)
    assert {lv.client.event_loop for lv in run.levels} <= {"uvloop", "asyncio"}


def _rec(i: int, scheduled: int, done: int) -> RequestRecord:
    return RequestRecord(index=i, warmup=False, scheduled_ns=scheduled, done_ns=done)


def test_client_report_by_hand():
    # two requests: [0, 4 s] and [2, 6 s]: 8 request-seconds over a 6 s window
    recs = [_rec(0, 0, 4_000_000_000), _rec(1, 2_000_000_000, 6_000_000_000)]
    calm = ClientStats(event_loop="asyncio", lags_s=[0.001] * 99 + [0.002], cpu_s=0.3, start_ns=0, end_ns=3 * 10**9)
    rep = client_report([calm], recs, requested_concurrency=2)
    assert rep.held_concurrency == pytest.approx(8 / 6)
    assert rep.cpu_share == pytest.approx(0.1) and rep.warning is None
    assert rep.loop_lag_p50_s == pytest.approx(0.001)
    # lag p99 past the threshold: a warning naming it
    laggy = ClientStats(event_loop="uvloop", lags_s=[0.001] * 90 + [3 * LOOP_LAG_P99_WARN_S] * 10, cpu_s=0.3,
                        start_ns=0, end_ns=3 * 10**9)
    rep = client_report([laggy], recs, requested_concurrency=2)
    assert rep.warning and "client delay" in rep.warning and "lag p99" in rep.warning
    # one of two processes past the CPU threshold: a warning, although the sum over both is under 2 cores
    busy = ClientStats(event_loop="uvloop", lags_s=[0.001] * 100, cpu_s=3 * (CPU_SHARE_WARN + 0.1),
                       start_ns=0, end_ns=3 * 10**9)
    rep = client_report([calm, busy], recs, requested_concurrency=2)
    assert rep.workers == 2 and rep.cpu_share == pytest.approx(0.1 + CPU_SHARE_WARN + 0.1)
    assert rep.warning and "of a core" in rep.warning and "lag" not in rep.warning


def test_a_blocked_loop_is_reported(pacer):
    """A CPU-bound callback holds the probe's loop 60 ms at a time: the level says
    its TTFT includes client delay."""
    block_s = 0.06

    async def go():
        stop = False

        async def hog() -> None:
            while not stop:
                t = time.perf_counter()
                while time.perf_counter() - t < block_s:  # the loop can run nothing meanwhile
                    pass
                await asyncio.sleep(0.02)

        task = asyncio.create_task(hog())
        try:
            return await run_probe(_settings(pacer.url, concurrency=(4,), requests=16))
        finally:
            stop = True
            await task

    lv = asyncio.run(go()).levels[0]
    # every block delays at least one timer reading by nearly all of it (the timer is due every 5 ms)
    assert lv.client.loop_lag_p99_s > LOOP_LAG_P99_WARN_S
    assert lv.client.warning and "TTFT and TPOT include client delay" in lv.client.warning
    assert lv.failures == 0


def test_two_workers_merge_as_one_run(pacer):
    one = run_probe_sync(_settings(pacer.url, concurrency=(6,), requests=24, workers=1)).levels[0]
    two = run_probe_sync(_settings(pacer.url, concurrency=(6,), requests=24, workers=2)).levels[0]
    for lv in (one, two):
        assert lv.requests == 24 and lv.failures == 0 and lv.output_tokens_total == 24 * TOKENS
    # the same requests (indices), each sent once, from both layouts
    assert sorted(s.index for s in one.samples) == sorted(s.index for s in two.samples)
    assert two.client.workers == 2 and 0 <= two.client.cpu_share <= 2
    assert 0 <= two.client.held_concurrency <= 6
    # same definitions on the merged samples: percentiles from all of them together,
    # per-request figures from their own times (one clock across the processes)
    ttft = [s.ttft_s for s in two.samples]
    assert two.ttft_s.count == 24 and two.ttft_s.p50 == pytest.approx(float(np.percentile(ttft, 50)), abs=1e-12)
    assert two.tpot_s.p99 == pytest.approx(float(np.percentile([s.tpot_s for s in two.samples], 99)), abs=1e-12)
    assert min(s.scheduled_s for s in two.samples) == 0
    for s in two.samples:
        assert s.ttft_s == pytest.approx(s.first_token_s - s.scheduled_s, abs=1e-9)
        assert s.tpot_s == pytest.approx((s.last_token_s - s.first_token_s) / (s.output_tokens - 1), abs=1e-9)
        assert s.first_token_s - s.sent_s >= TTFT_S  # the server waits that long after it gets the request


def test_cli_workers_json_carries_the_client_keys(pacer):
    proc = subprocess.run([sys.executable, "-m", "planner", "probe", "--url", pacer.url, "--model", "pacer",
                           "--concurrency", "2,4", "--requests", "8", "--output-tokens", "6", "--no-metrics",
                           "--workers", "2", "--format", "json"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    levels = json.loads(proc.stdout)["levels"]
    assert [lv["requests"] for lv in levels] == [8, 8]
    for lv in levels:
        assert {"loop_lag_p50_s", "loop_lag_p99_s", "cpu_share", "held_concurrency", "warning",
                "event_loop", "workers"} <= set(lv["client"])
        assert lv["client"]["workers"] == 2
        # a warning printed on stdout would break the JSON; it goes to stderr, naming the level
        if lv["client"]["warning"]:
            assert f"concurrency {lv['concurrency']}: " in proc.stderr


def test_uvloop_when_it_imports(monkeypatch):
    try:
        import uvloop
    except ImportError:
        uvloop = None
    assert loop_factory() is (asyncio.new_event_loop if uvloop is None else uvloop.new_event_loop)
    # and the choice itself, with or without uvloop on this machine
    fake = types.SimpleNamespace(new_event_loop=lambda: None)
    monkeypatch.setitem(sys.modules, "uvloop", fake)
    assert loop_factory() is fake.new_event_loop


def test_standard_loop_when_uvloop_is_absent(pacer, monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` now raises ImportError
    assert loop_factory() is asyncio.new_event_loop
    lv = run_probe_sync(_settings(pacer.url, concurrency=(2,), requests=4)).levels[0]
    assert lv.client.event_loop == "asyncio" and lv.failures == 0 and lv.requests == 4


@settings(deadline=None)  # pure, but a loaded machine can stall any one example
@given(conc=st.integers(1, 80), parts=st.integers(1, 9), requests=st.integers(1, 500),
       warmup=st.one_of(st.none(), st.integers(0, 100)))
def test_split_level_partitions_streams_requests_and_indices(conc, parts, requests, warmup):
    s = probe_settings(url="http://127.0.0.1:1", model="m", concurrency=(conc,), requests=requests,
                       warmup_requests=warmup)
    plans = split_level(s, concurrency=conc, nonce="n", parts=parts)
    assert sorted(k for p in plans for k in p.streams) == list(range(conc))
    assert sum(p.requests for p in plans) == requests
    assert sum(p.warmup for p in plans) == (conc if warmup is None else warmup)
    for p in plans:  # a part's share follows its streams
        assert not p.streams and p.requests == 0 or abs(p.requests - requests * len(p.streams) / conc) < 1
    # request indices first_index + k * index_step never collide across parts
    firsts = [p.first_index for p in plans]
    assert sorted(firsts) == list(range(parts)) and all(p.index_step == parts for p in plans)


def test_split_level_open_loop_keeps_the_whole_schedule():
    s = probe_settings(url="http://127.0.0.1:1", model="m", rate_req_s=20, requests=37, arrival="poisson")
    one = split_level(s, concurrency=None, nonce="n", parts=1)[0].offsets_s
    three = split_level(s, concurrency=None, nonce="n", parts=3)
    assert sorted(x for p in three for x in p.offsets_s) == sorted(one) and len(one) == 37


def test_the_collector_is_paused_only_during_the_measured_part(pacer):
    import gc

    seen: list[tuple[bool, int]] = []

    async def go(manage_gc: bool):
        async def watch() -> None:
            while True:
                seen.append((gc.isenabled(), gc.get_freeze_count()))
                await asyncio.sleep(0.005)

        task = asyncio.create_task(watch())
        try:
            return await run_probe(_settings(pacer.url, concurrency=(4,), requests=16), manage_gc=manage_gc)
        finally:
            task.cancel()

    lv = asyncio.run(go(True)).levels[0]
    assert lv.failures == 0
    assert any(not enabled and frozen > 0 for enabled, frozen in seen)  # paused, the rest frozen, in the level
    assert gc.isenabled() and gc.get_freeze_count() == 0  # and given back after it
    seen.clear()
    asyncio.run(go(False))
    assert seen and all(enabled and frozen == 0 for enabled, frozen in seen)


def test_the_lag_timer_collects_past_its_limit():
    import gc

    from planner.probe import LagMonitor

    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "stop":
            collections.append(info["generation"])

    async def go() -> None:
        mon = LagMonitor(tick_s=0.001, gc_limit=1000)
        mon.start()
        junk = []
        for _ in range(20):
            junk.extend({"a": []} for _ in range(500))  # tracked containers, kept alive
            await asyncio.sleep(0.002)
        mon.stop()

    gc.disable()
    gc.callbacks.append(count)
    try:
        asyncio.run(go())
    finally:
        gc.callbacks.remove(count)
        gc.enable()
    assert 2 in collections  # full collections ran although automatic collection was off


def test_a_level_stopped_before_its_measurement_gives_the_collector_back():
    import gc

    from planner.probe import LevelPlan, LocalLoad, StreamClient

    async def go() -> tuple[bool, bool]:
        client = StreamClient(max_connections=1, connect_timeout_s=1.0, read_timeout_s=1.0)  # warm-up sends nothing
        load = LocalLoad(probe_settings(url="http://127.0.0.1:1", model="m"), client, {}, asyncio.Event())
        await load.warm([LevelPlan(concurrency=1, streams=(0,), requests=0, warmup=0)])
        paused = not gc.isenabled() and gc.get_freeze_count() > 0
        await load.aclose()  # the run ends here (an error, an interrupt): no measure() follows
        return paused, gc.isenabled() and gc.get_freeze_count() == 0

    assert asyncio.run(go()) == (True, True)


def test_workers_start_whatever_the_parents_main_module_is(pacer, tmp_path, monkeypatch):
    """Under Streamlit (and after any AppTest in the same process) ``__main__`` is the
    app's script; workers are fresh interpreters that never re-run it."""
    script = tmp_path / "app_like.py"
    script.write_text("raise SystemExit('a worker must never run the parent main script')\n")
    fake_main = types.ModuleType("__main__")
    fake_main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    monkeypatch.chdir(tmp_path)  # and whatever the working directory
    lv = run_probe_sync(_settings(pacer.url, concurrency=(4,), requests=8, workers=2)).levels[0]
    assert lv.failures == 0 and lv.requests == 8 and lv.client.workers == 2
