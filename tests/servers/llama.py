"""llama.cpp's native llama-server on a loopback port, for the probe's tests and bench.

The binary is built by tests/servers/build_llama_server.sh and cached under
``$RIDGELINE_CACHE_DIR`` (default ~/.cache/ridgeline), keyed by version.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from planner import GpuSpec, Scenario
from planner.probe import ProbeSettings, probe_settings
from servers.procs import raise_priority

VERSION = "0.3.36"
BINARY = Path(os.environ.get("RIDGELINE_CACHE_DIR", Path.home() / ".cache" / "ridgeline")) / \
    f"llama-server-{VERSION}" / "llama-server"
HEALTHY_WITHIN_S = 120
SLOTS = 8

# Short prompts (one word after the unique head: ~17 tokens of the character-level
# vocabulary), so a new request's prefill barely stalls the running streams' decode.
OUTPUT_TOKENS = 64
PROMPT_TOKENS = 1

# Nominal figures for this test machine (2 cores of a Xeon with AVX-512): DDR
# bandwidth of the order of 50 GB/s; 2 cores × ~2.5 GHz × 32 fp32 FLOP/cycle
# (two AVX2 FMA ports) ≈ 160 GFLOP/s.  Nominal, not measured: the calibration's
# efficiencies absorb the difference.
TEST_CPU = GpuSpec(
    id="test-cpu-2core", name="2-core Xeon (nominal)", vendor="intel", hbm_bytes=16e9, hbm_bytes_per_s=50e9,
    flops_per_s={"bf16": 160e9, "fp32": 160e9}, pcie_bytes_per_s=16e9, tdp_w=50, usd_per_gpu_hour=0.1,
    gpus_per_node=1, source_note="nominal figures for the test machine",
)


LEVELS = (1, 2, 4, 8)
REQUESTS_PER_LEVEL = 8
FIT_LEVELS = (0, 2, 3)  # level indices: c = 1, 4, 8; c = 2 is held out


def sweep_settings(url: str) -> ProbeSettings:
    """The probe sweep the tests and bench run: 8 requests at each of c = 1, 2, 4, 8."""
    return probe_settings(url=url, model="tiny-llama", concurrency=LEVELS, requests=REQUESTS_PER_LEVEL,
                          prompt_tokens=PROMPT_TOKENS, output_tokens=OUTPUT_TOKENS, request_timeout_s=120,
                          metrics_interval_s=0.25)


def scenario_for(shape: object) -> Scenario:
    """The tiny model (a ``TinyLlama``) on the nominal test CPU, fp32 weights and fp16 KV."""
    return Scenario(name="tiny-llama on test cpu", gpu=TEST_CPU, model=shape.model_spec(),  # type: ignore[attr-defined]
                    weights_dtype="fp32", kv_dtype="fp16")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``llama-server -m model -np 8 --metrics -t 1`` at raised priority; ``stop()`` ends it."""

    def __init__(self, model: Path, log_path: Path, binary: Path = BINARY) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port), "-c", "8192",
             "-np", str(SLOTS), "--metrics", "--no-webui", "-t", "1"],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        # A shared 2-core machine: one engine thread (no spin barrier between two threads
        # that other work can split) at raised priority keeps the engine's timing its own.
        raise_priority(self.proc.pid, -20)

    def wait_healthy(self) -> None:
        """Poll /health; raise RuntimeError (naming the log) if the server exits or stays down."""
        deadline = time.monotonic() + HEALTHY_WITHIN_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}; see {self._log.name}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama-server did not become healthy in {HEALTHY_WITHIN_S} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
