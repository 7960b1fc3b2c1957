"""The command line's output is never cut silently (issue 23, item 4).

A pipe holds 64 KiB; ``probe --samples --format json`` prints about 70 kB.  When
the pipe's file description is non-blocking (an event loop may make the standard
streams so, and the flag is shared by every holder of that pipe end), a plain
``print`` stopped at 65,536 bytes and the process still exited 0.  These tests
make the pipe non-blocking on purpose and read it slowly: every byte arrives, or
the command fails with a message and a non-zero exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from servers.procs import start_script

from planner.io.output import OutputError, write_all

ROOT = Path(__file__).resolve().parents[1]
# A reader that takes its time: waits before its first read, then 4 kB at a time with
# a pause after each, so the writer meets a full pipe again and again.
SLOW_READER = (
    "import sys, time\n"
    "time.sleep(0.5)\n"
    "chunks = []\n"
    "while True:\n"
    "    b = sys.stdin.buffer.read1(4096)\n"
    "    if not b:\n"
    "        break\n"
    "    chunks.append(b)\n"
    "    time.sleep(0.002)\n"
    "sys.stdout.buffer.write(b''.join(chunks))\n"
)
# A child that makes its own stdout non-blocking (as an event loop may) and prints
# 200 kB through the CLI's stdout guard.
NONBLOCKING_PRINT = (
    "import os, sys\n"
    "from planner.io.output import whole_stdout\n"
    "with whole_stdout():\n"
    "    os.set_blocking(1, False)\n"
    "    for i in range(2000):\n"
    "        print(f'{i:06d}' + 'x' * 93)\n"
)


def _slow_drain(fd: int, out: list[bytes]) -> None:
    with os.fdopen(fd, "rb", buffering=0) as f:
        import time

        time.sleep(0.2)
        while chunk := f.read(4096):
            out.append(chunk)
            time.sleep(0.001)


def test_write_all_delivers_every_byte_through_a_nonblocking_pipe_to_a_slow_reader() -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)
    data = bytes(range(256)) * 1024  # 256 KiB: four times what the pipe holds
    got: list[bytes] = []
    reader = threading.Thread(target=_slow_drain, args=(r, got))
    reader.start()
    try:
        assert write_all(w, data) == len(data)
    finally:
        os.close(w)
        reader.join(timeout=60)
    assert b"".join(got) == data


def test_write_all_to_a_pipe_nobody_reads_any_more_is_an_error_with_the_counts() -> None:
    r, w = os.pipe()
    os.close(r)
    try:
        with pytest.raises(OutputError, match=r"stdout: the reader closed the pipe after 0 of 100,000 bytes"):
            write_all(w, b"x" * 100_000)
    finally:
        os.close(w)


def test_write_all_gives_up_on_a_reader_that_never_reads_with_a_message() -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)  # a blocking pipe nobody reads blocks, as any program's output does
    try:
        with pytest.raises(OutputError, match=r"took nothing for 0.2 s; the output is cut after 65,536 of 200,000"):
            write_all(w, b"y" * 200_000, stall_s=0.2)
    finally:
        os.close(r)
        os.close(w)


def test_print_under_whole_stdout_survives_a_nonblocking_stdout() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-c", NONBLOCKING_PRINT], stdout=subprocess.PIPE, env=env)
    reader = subprocess.run([sys.executable, "-c", SLOW_READER], stdin=writer.stdout, capture_output=True,
                            timeout=120)
    assert writer.stdout is not None
    writer.stdout.close()
    assert writer.wait(timeout=60) == 0
    lines = reader.stdout.decode().splitlines()
    assert len(lines) == 2000 and lines[-1].startswith("001999")


def test_a_cli_whose_reader_leaves_exits_non_zero_with_a_message() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "planner", "sweep"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert len(head) == 100
    assert "the reader closed the pipe" in err and "the output is incomplete" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def pacer():
    srv = start_script("pacing_server", "--ttft-s", "0.01", "--tpot-s", "0.002")
    yield srv
    srv.stop()


def test_probe_samples_json_through_a_nonblocking_pipe_into_a_slow_reader_is_whole(pacer) -> None:
    """The issue's command, its stdout a pipe made non-blocking before the probe starts
    (the state that cut it at 65,536 bytes with exit status 0), read by a slow reader."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    argv = [sys.executable, "-m", "planner", "probe", "--url", pacer.url, "--model", "pacer",
            "--concurrency", "64", "--requests", "128", "--prompt-tokens", "16", "--output-tokens", "24",
            "--no-metrics", "--samples", "--format", "json"]
    probe = subprocess.Popen(argv, cwd=ROOT, stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    reader = subprocess.Popen([sys.executable, "-c", SLOW_READER], stdin=r, stdout=subprocess.PIPE)
    os.close(r)
    out, _ = reader.communicate(timeout=180)
    assert probe.stderr is not None
    err = probe.stderr.read().decode()
    assert probe.wait(timeout=60) == 0, err
    assert len(out) > 65_536, len(out)  # more than one pipe's worth: the case that was cut
    run = json.loads(out)
    (level,) = run["levels"]
    assert level["concurrency"] == 64 and len(level["samples"]) == 128
    assert len({s["index"] for s in level["samples"]}) == 128 and all(s["error"] is None for s in level["samples"])
