"""What the probe's client adds to TTFT and TPOT, against the pacing server's own clock.

    .venv/bin/python bench/probe_client.py [--streams 1,64,256,1024] [--workers 1,2] [--realtime]

The pacing server (tests/servers/pacing_server.py, its own process, on uvloop,
pinned to the last core) answers chat streams as the issue-17 measurement did:
an empty role chunk at once, the first token 120 ms after the request arrived,
30 tokens in uneven chunks (1, 2, 1, 3 tokens …) at 11.38 ms per token.  Its
clock log (GET /log: receive time and every token's write time, on
CLOCK_MONOTONIC, which every process shares) is the truth.

For each stream count and worker count it prints, over the measured requests:

- added TTFT: per request, the probe's TTFT (from the scheduled time, as the
  probe reports it) minus the server's (first token written − request received);
  p50 and p99 over requests;
- added TPOT: per request, probe TPOT / server TPOT − 1; the median, in %;
- the client's CPU share over the measured level (CPU seconds per wall second,
  summed over its processes; 1.0 = one core busy) and its event-loop lag
  p50/p99 (a periodic timer's delay), as the level reports them (``client``);
  on a probe without self-reporting the bench measures the lag itself with a
  timer of its own beside the run;
- first, the SSE reader's CPU per event, fed the same stream from memory (no
  server, no sockets): the client's own per-chunk cost, which the machine's
  load hardly changes;
- ``CPU/rq``: the client's CPU seconds over the measured level (its processes
  together) per measured request, in µs: the client's cost per request, which,
  unlike the share of a core, does not fall when a starved server slows the
  level down;
- ``CPUrun``: CPU over the whole run call (warm-up, summary and worker
  start-up included), measured by the bench the same way on any probe;
- the concurrency held (time-weighted in-flight requests) against the asked;
- where the added TTFT goes, per request on the shared clock: ``pre``, from
  the scheduled time to the sent time (the client building and writing the
  request), ``send``, from the client's sent time to the server's receive time (the kernel and the
  server's own queue: a saturated server shows here), and ``read``, from the
  server's write of the first token to the client's reading of it (the kernel
  and the client's loop), p50/p99;
- ``+cli``: per request, ``pre`` + ``read``: the part of the added TTFT that is
  the client's (``send`` is the kernel and the server's own accept queue, which
  a pacing server that cannot keep up on a loaded machine fills), p50/p99.

The client is pinned to the cores the server is not on.  With one worker on a
2-core machine that is core 0; two workers there share both cores with the
server (printed as the row's ``cpus``), so at 1,024 streams, where the server
needs most of a core, the 2-worker rows measure the machine more than the client.  Other work on the machine biases every figure: the load
average is printed before and after.  Both processes run at raised priority
(nice -10 where permitted); ``--realtime`` runs them under SCHED_FIFO instead
(Linux, root), so the machine's other work waits while they have something to
do: the kernel still leaves that work 5% of each second (sched_rt_runtime_us).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from servers.procs import log_lines, raise_priority, start_script  # noqa: E402

from planner.probe import ProbeSettings, probe_settings, run_probe  # noqa: E402

TTFT_S = 0.120  # the pacing server: first token 120 ms after the request
TPOT_S = 0.01138  # and 11.38 ms per token after it
TOKENS = 30
CHUNK_TOKENS = "1,2,1,3"  # uneven chunks
LAG_TICK_S = 0.005  # the bench's own lag timer, for a probe that does not report its lag

RT_PRIORITY = 10  # SCHED_FIFO priority of --realtime (1-99; above every normal process)

# The goals.
GOAL_TTFT_S = {256: 0.010, 1024: 0.020}
GOAL_TPOT_REL = 0.005
GOAL_CPU_SHARE = 0.35


def _realtime(pid: int = 0) -> bool:
    """SCHED_FIFO for ``pid`` (0: this process; inherited by the workers it spawns)."""
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
    except (OSError, AttributeError):
        return False
    return True


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the workers, once joined)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def _server_log(url: str, n_before: int) -> dict[int, dict[str, Any]]:
    """request index -> its clock log entry, for the requests logged after line n_before."""
    return {int(e["prompt_head"].rsplit("-", 1)[1]): e for e in map(json.loads, log_lines(url)[n_before:])}


def _server_truth(log: dict[int, dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """request index -> (server TTFT, server TPOT)."""
    out = {}
    for idx, e in log.items():
        t = e["token_ns"]
        out[idx] = ((t[0] - e["recv_ns"]) / 1e9, (t[-1] - t[0]) / 1e9 / (len(t) - 1))
    return out


class _Records:
    """The raw records a level is summarised from (absolute clock readings), caught
    on their way to summarize_level, so the bench can split the added TTFT."""

    def __init__(self) -> None:
        import planner.probe.load as load

        self.load, self.orig, self.records = load, load.summarize_level, []
        self.client: list[Any] = []

        def catch(records: Any, **kw: Any) -> Any:
            self.records = list(records)
            self.client = list(kw.get("client") or [])
            return self.orig(records, **kw)

        load.summarize_level = catch

    def close(self) -> None:
        self.load.summarize_level = self.orig


async def _with_own_lag(settings: ProbeSettings) -> tuple[Any, list[float]]:
    """A probe without self-reporting: run it beside a lag timer of the bench's own."""
    lags: list[float] = []
    stop = False

    async def tick() -> None:
        while not stop:
            due = time.perf_counter() + LAG_TICK_S
            await asyncio.sleep(LAG_TICK_S)
            lags.append(max(time.perf_counter() - due, 0.0))

    task = asyncio.create_task(tick())
    try:
        return await run_probe(settings), lags
    finally:
        stop = True
        await task


def one_level(url: str, streams: int, workers: int) -> dict[str, Any]:
    n0 = len(log_lines(url))
    e2e = TTFT_S + TOKENS * TPOT_S
    kwargs: dict[str, Any] = dict(
        url=url, model="pacer", endpoint="chat", concurrency=(streams,), requests=max(16, 3 * streams),
        output_tokens=TOKENS, prompt_tokens=8, metrics_url="", ramp_up_s=e2e if streams > 1 else 0.0,
        keep_samples=True, request_timeout_s=120, duration_s=600)
    self_reporting = "workers" in ProbeSettings.model_fields
    caught = _Records()
    c0, k0, w0 = time.process_time(), _children_cpu_s(), time.perf_counter()
    if self_reporting:
        kwargs["workers"] = workers
        from planner.probe import run_probe_sync

        run = run_probe_sync(probe_settings(**kwargs))
        own_lags: list[float] = []
    else:
        run, own_lags = asyncio.run(_with_own_lag(probe_settings(**kwargs)))
    # the whole run's CPU (warm-up, summary and worker start-up included), the same way on every probe
    run_cpu = (time.process_time() - c0 + _children_cpu_s() - k0) / (time.perf_counter() - w0)
    caught.close()
    lv = run.levels[0]
    log = _server_log(url, n0)
    truth = _server_truth(log)
    pre = [(r.sent_ns - r.scheduled_ns) / 1e9 for r in caught.records if not r.warmup and r.sent_ns]
    send = [(log[r.index]["recv_ns"] - r.sent_ns) / 1e9 for r in caught.records
            if not r.warmup and r.index in log and r.sent_ns]
    read = [(r.first_token_ns - log[r.index]["token_ns"][0]) / 1e9 for r in caught.records
            if not r.warmup and r.index in log and r.first_token_ns is not None]
    # the client's own share of the added TTFT: before the send, and from the first token's write to its read
    cli = [(r.sent_ns - r.scheduled_ns + r.first_token_ns - log[r.index]["token_ns"][0]) / 1e9 for r in caught.records
           if not r.warmup and r.index in log and r.first_token_ns is not None and r.sent_ns]
    add_ttft, add_tpot = [], []
    for smp in lv.samples:
        if smp.index not in truth or smp.ttft_s is None or smp.tpot_s is None:
            continue
        s_ttft, s_tpot = truth[smp.index]
        add_ttft.append(smp.ttft_s - s_ttft)
        add_tpot.append(smp.tpot_s / s_tpot - 1)
    client = getattr(lv, "client", None)
    out = {
        "streams": streams, "workers": workers, "requests": lv.requests, "failures": lv.failures,
        "server_ttft_p50": float(np.median([truth[s.index][0] for s in lv.samples if s.index in truth])),
        "ttft_p50": lv.ttft_s.p50,
        "added_ttft_p50": float(np.percentile(add_ttft, 50)) if add_ttft else float("nan"),
        "added_ttft_p99": float(np.percentile(add_ttft, 99)) if add_ttft else float("nan"),
        "added_tpot_p50": float(np.median(add_tpot)) if add_tpot else float("nan"),
        "run_cpu": run_cpu,
        "cpu_req_us": (sum(p.cpu_s for p in caught.client) / lv.requests * 1e6
                       if caught.client and lv.requests else float("nan")),
        "cli_p50": _pct(cli, 50), "cli_p99": _pct(cli, 99),
        "pre_p50": _pct(pre, 50), "send_p50": _pct(send, 50), "read_p50": _pct(read, 50), "read_p99": _pct(read, 99),
    }
    if client is not None:
        out.update(cpu=client.cpu_share, lag_p50=client.loop_lag_p50_s, lag_p99=client.loop_lag_p99_s,
                   held=client.held_concurrency, warning=client.warning or "")
    else:
        out.update(cpu=float("nan"), lag_p50=float(np.percentile(own_lags, 50)) if own_lags else float("nan"),
                   lag_p99=float(np.percentile(own_lags, 99)) if own_lags else float("nan"),
                   held=float("nan"), warning="(bench-measured: no self-reporting)")
    return out


class _Pieces:
    """A stand-in for aiohttp's StreamReader over given reads (``readany`` and ``iter_any``)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.i = 0

    async def readany(self) -> bytes:
        if self.i == len(self.pieces):
            return b""
        self.i += 1
        return self.pieces[self.i - 1]

    async def iter_any(self) -> Any:
        for p in self.pieces:
            yield p


def _paced_stream_reads() -> list[bytes]:
    """The pacing server's chat stream as the client reads it when paced: one read per event."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pacing_server", ROOT / "tests" / "servers" / "pacing_server.py")
    assert spec is not None and spec.loader is not None
    pacer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pacer)
    reads = [pacer._chunk({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})]
    i = 0
    sizes = pacer._chunk_sizes(tuple(int(x) for x in CHUNK_TOKENS.split(",")), TOKENS)
    for n, k in enumerate(sizes):
        reads.append(pacer._chunk(pacer._token(True, i, "length" if n == len(sizes) - 1 else None, k)))
        i += k
    reads.append(pacer._chunk({"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": TOKENS}}))
    reads.append(b"data: [DONE]\n\n")
    return reads


def parse_us_per_event(streams: int = 3000) -> float:
    """CPU microseconds per SSE event of the probe's stream reader (split, time, parse),
    over ``streams`` paced streams fed from memory: the client's per-chunk cost without a server."""
    from planner.probe import RequestRecord

    reads = _paced_stream_reads()
    from planner.probe.sse import max_stream_events, read_events

    async def one(rec: Any) -> None:
        await read_events(_Pieces(reads), rec, [], max_stream_events(TOKENS))

    async def run() -> float:
        c0 = time.process_time()
        for k in range(streams):
            rec = RequestRecord(index=k, warmup=False, scheduled_ns=0)
            await one(rec)
            assert rec.token_chunks == len(reads) - 3
        return time.process_time() - c0

    cpu = asyncio.run(run())
    return cpu / (streams * (len(reads) - 1)) * 1e6


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _row(r: dict[str, Any], cpus: str) -> str:
    return (f"{r['streams']:>7d} {r['workers']:>7d} {cpus:>5} {r['requests']:>6d} {r['failures']:>4d} "
            f"{r['server_ttft_p50'] * 1e3:>8.1f} {r['ttft_p50'] * 1e3:>8.1f} "
            f"{r['added_ttft_p50'] * 1e3:>+8.1f} {r['added_ttft_p99'] * 1e3:>+8.1f} "
            f"{r['added_tpot_p50'] * 100:>+7.2f}% {r['cli_p50'] * 1e3:>+6.1f} {r['cli_p99'] * 1e3:>+6.1f} {r['cpu']:>6.0%} {r['cpu_req_us']:>6.0f} {r['run_cpu']:>6.0%} "
            f"{r['lag_p50'] * 1e3:>6.2f} {r['lag_p99'] * 1e3:>7.2f} {r['held']:>7.1f} "
            f"{r['pre_p50'] * 1e3:>6.1f} {r['send_p50'] * 1e3:>7.1f} {r['read_p50'] * 1e3:>7.1f} {r['read_p99'] * 1e3:>7.1f}  {r['warning'][:60]}")


HEADER = (f"{'streams':>7} {'workers':>7} {'cpus':>5} {'reqs':>6} {'fail':>4} {'srvTTFT':>8} {'TTFT50':>8} "
          f"{'+TTFT50':>8} {'+TTFT99':>8} {'+TPOT50':>8} {'+cli50':>6} {'+cli99':>6} {'CPU':>6} {'CPU/rq':>6} {'CPUrun':>6} {'lag50':>6} {'lag99':>7} {'held':>7} "
          f"{'pre50':>6} {'send50':>7} {'read50':>7} {'read99':>7}  warning\n"
          f"{'':>7} {'':>7} {'':>5} {'':>6} {'':>4} {'ms':>8} {'ms':>8} {'ms':>8} {'ms':>8} {'':>8} {'ms':>6} {'ms':>6} "
          f"{'core':>6} {'µs':>6} {'core':>6} {'ms':>6} {'ms':>7} {'':>7} {'ms':>6} {'ms':>7} {'ms':>7} {'ms':>7}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,64,256,1024")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--realtime", action="store_true", help="run the server and the client under SCHED_FIFO")
    ap.add_argument("--parse-only", action="store_true", help="only the SSE reader's CPU per event, from memory")
    args = ap.parse_args()
    print(f"SSE reader: {parse_us_per_event():.2f} µs of CPU per event (split, time, parse; from memory)")
    if args.parse_only:
        return 0
    streams = [int(x) for x in args.streams.split(",")]
    workers = [int(x) for x in args.workers.split(",")]
    if "workers" not in ProbeSettings.model_fields:
        workers = [w for w in workers if w == 1]
        print("this probe has no --workers: one worker only")
    cpus = _cpus()
    server_cpu = cpus[-1]
    client_cpus = set(cpus[:-1]) or set(cpus)
    print(f"load average before: {os.getloadavg()}; cpus {cpus}; server on cpu {server_cpu}")
    srv = start_script("pacing_server", "--ttft-s", str(TTFT_S), "--tpot-s", str(TPOT_S),
                       "--chunk-tokens", CHUNK_TOKENS, "--uvloop", cpu=server_cpu, priority=True)
    raised = raise_priority() is not None
    if args.realtime:
        raised = _realtime(srv.proc.pid) and _realtime()
    print(f"pacing server: first token {TTFT_S * 1e3:.0f} ms, {TOKENS} tokens in chunks of {CHUNK_TOKENS} "
          f"at {TPOT_S * 1e3:.2f} ms/token; processes at raised priority: {raised}"
          + (" (SCHED_FIFO)" if args.realtime else " (nice -10)"))
    print(HEADER)
    rows = []
    try:
        for w in workers:
            own = client_cpus if w <= len(client_cpus) else set(cpus)
            if hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, own)
            for c in streams:
                r = one_level(srv.url, c, w)
                rows.append(r)
                print(_row(r, ",".join(map(str, sorted(own)))), flush=True)
    finally:
        srv.stop()
    print(f"load average after: {os.getloadavg()}")
    for r in rows:
        goal = GOAL_TTFT_S.get(r["streams"])
        if goal is None or (r["streams"] == 256) != (r["workers"] == 1):
            continue
        ok = r["added_ttft_p50"] <= goal and abs(r["added_tpot_p50"]) <= GOAL_TPOT_REL and (
            r["streams"] != 256 or (r["cpu"] if r["cpu"] == r["cpu"] else r["run_cpu"]) <= GOAL_CPU_SHARE)
        print(f"goal at {r['streams']} streams, {r['workers']} worker(s): TTFT +{goal * 1e3:.0f} ms, TPOT "
              f"{GOAL_TPOT_REL:.1%}" + (f", CPU {GOAL_CPU_SHARE:.0%}" if r["streams"] == 256 else "")
              + f": {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
