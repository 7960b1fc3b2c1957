"""The simulator's work per run is capped (MAX_SIM_TOKEN_STEPS) before it allocates anything:
a run past the cap fails at once with a message naming the fields, and its peak memory
stays near the process's own (measured in a subprocess, not by the clock)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner import Scenario
from planner.errors import ScenarioError
from planner.simulate import MAX_SIM_TOKEN_STEPS, fleet_sim, sim_options, simulate
from planner.simulate.options import token_steps
from planner.sizing.plan import plan

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys
from planner import Scenario
from planner.errors import ScenarioError
from planner.simulate import sim_options, simulate
requests, prompt, output = (int(x) for x in sys.argv[1:4])
rate = float(sys.argv[4])


def status_kb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def run(s, n, r):
    simulate(s, sim_options(requests=n, rate_req_s=r, lengths="fixed", kv_capacity_tokens=200_000_000))


# The same run, tiny, first in this process: whatever it compiles or loads from numba's cache is
# then in memory, and the peak is reset (clear_refs 5) so it measures only the run below.
run(Scenario(workload={"prompt_tokens": prompt, "output_tokens": 16}), 2, rate)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status_kb("VmRSS")
try:
    run(Scenario(workload={"prompt_tokens": prompt, "output_tokens": output}), requests, rate)
    message = None
except ScenarioError as exc:
    message = str(exc)
after = status_kb("VmHWM")
print(json.dumps({"message": message, "before_kb": before, "after_kb": after}))
"""


@pytest.fixture(scope="module", autouse=True)
def _kernel_compiled() -> None:
    """Compile the simulator's kernel once, in its own process (numba caches it beside the module):
    a fresh clone's first run would otherwise count the compiler's memory (LLVM) as the run's."""
    subprocess.run([sys.executable, "-c", "from planner.simulate.kernel import warm; warm()"], cwd=ROOT,
                   check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""}, capture_output=True)
    # and every other compiled function the measured run calls: the same run, tiny
    subprocess.run([sys.executable, "-c", _CHILD, "2", "16", "16", "1e-6"], cwd=ROOT,
                   check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""}, capture_output=True)


def _child(requests: int, prompt: int, output: int, rate_req_s: float = 1.0) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(requests), str(prompt), str(output), str(rate_req_s)],
                         cwd=ROOT,
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_tail_page_attack_is_refused_before_allocating() -> None:
    # /tail?output=100000&prompt=1000 with 20,000 requests: 2e9 output tokens (MemoryError before).
    r = _child(20_000, 1000, 100_000)
    message = str(r["message"])
    assert "requests × (workload.output_tokens" in message and f"{MAX_SIM_TOKEN_STEPS:,}" in message
    assert "20,000 requests of 100,000 output tokens" in message and "MAX_SIM_TOKEN_STEPS" in message
    grew_mb = (int(r["after_kb"]) - int(r["before_kb"])) / 1024
    assert grew_mb < 100, f"the refused run grew the process by {grew_mb:.0f} MB"


def test_just_under_the_cap_runs_in_bounded_memory() -> None:
    # One request at a time (one every ~11 days, each done in hours): one iteration per output
    # token, the worst case for memory.
    requests = 10
    output = MAX_SIM_TOKEN_STEPS // requests - 1
    r = _child(requests, 16, output, 1e-6)
    assert r["message"] is None
    # the run's own peak above the warmed process (measured here: about 540 MB for 10M token steps)
    grew_mb = (int(r["after_kb"]) - int(r["before_kb"])) / 1024
    assert grew_mb < 768, f"a run at the cap grew the process by {grew_mb:.0f} MB at its peak"


def test_cap_counts_prefill_chunks() -> None:
    assert token_steps(prompt_tokens=[4097, 1], output_tokens=[10, 20], chunk_tokens=2048, chunked=True) == 30 + 3 + 1
    assert token_steps(prompt_tokens=[4097, 1], output_tokens=[10, 20], chunk_tokens=2048, chunked=False) == 32
    s = Scenario(workload={"prompt_tokens": 1_000_000, "output_tokens": 1}, serving={"chunk_tokens": 16})
    with pytest.raises(ScenarioError, match="MAX_SIM_TOKEN_STEPS"):
        simulate(s, sim_options(requests=200, lengths="fixed"))


def test_fleet_sim_fits_its_requests_under_the_cap() -> None:
    s = Scenario(workload={"output_tokens": 200_000, "prompt_tokens": 1000})
    p = plan(s)
    fs = fleet_sim(p, s)
    assert fs is not None
    assert fs.options.requests * 200_000 <= MAX_SIM_TOKEN_STEPS
