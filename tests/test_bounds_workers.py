"""Probe worker processes are capped over the whole machine (MAX_SERVER_PROBE_PROCESSES):
slots are flock'd files, so another process's pool (another session, another app server)
counts; a pool that cannot have all its slots starts no process and says how many are free."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.errors import ProbeError
from planner.probe.settings import probe_settings
from planner.probe.workers import MAX_SERVER_PROBE_PROCESSES, SLOT_DIR_ENV, ProcessSlots, WorkerPool

ROOT = Path(__file__).resolve().parents[1]
_HOLDER = ("import sys, time; from planner.probe.workers import ProcessSlots; s = ProcessSlots.acquire(int(sys.argv[1]));"
           " print(len(s), flush=True); time.sleep(120)")


def _children() -> int:
    pid = os.getpid()
    return sum(len(Path(f"/proc/{pid}/task/{t}/children").read_text().split()) for t in os.listdir(f"/proc/{pid}/task"))


@pytest.fixture()
def slot_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(SLOT_DIR_ENV, str(tmp_path))
    return tmp_path


def test_another_process_holding_slots_refuses_a_pool_before_it_starts(slot_dir: Path) -> None:
    held = MAX_SERVER_PROBE_PROCESSES - 2
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(held)], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == str(held)
        settings = probe_settings(url="http://127.0.0.1:9/v1", model="m", workers=4)
        before = _children()
        with pytest.raises(ProbeError) as err:
            asyncio.run(WorkerPool.start(settings, headers={}, resolver=None, cancel=asyncio.Event()))  # type: ignore[arg-type]
        message = str(err.value)
        assert message.startswith("workers (Client processes): 4 client processes asked but only 2 of")
        assert f"{MAX_SERVER_PROBE_PROCESSES} probe processes are free (MAX_SERVER_PROBE_PROCESSES" in message
        assert _children() == before  # no worker process was started
        two = ProcessSlots.acquire(2)  # what is free can still be had
        assert len(two) == 2
        with pytest.raises(ProbeError, match="only 0 of"):
            ProcessSlots.acquire(1)
        two.release()
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing: the kernel dropped its locks
    every = ProcessSlots.acquire(MAX_SERVER_PROBE_PROCESSES)
    assert len(every) == MAX_SERVER_PROBE_PROCESSES
    every.release()


def test_more_than_the_cap_is_refused_outright(slot_dir: Path) -> None:
    with pytest.raises(ProbeError, match=f"at most {MAX_SERVER_PROBE_PROCESSES} probe processes at once"):
        ProcessSlots.acquire(MAX_SERVER_PROBE_PROCESSES + 1)
    assert not list(slot_dir.iterdir())  # nothing taken
