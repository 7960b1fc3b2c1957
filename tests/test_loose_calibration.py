"""Calibration says when it says nothing: a fitted value at its bound, or a level
still off by more than CALIBRATION_MAX_REL_ERROR, is a warning the CLI prints."""

from __future__ import annotations

import json

import pytest
from servers.procs import start_script

from planner.cli import main
from planner.probe import CALIBRATION_MAX_REL_ERROR, calibrate
from planner.spec.scenario import Scenario
from planner.spec.specs import GpuSpec
from tests.test_probe_units import CPU, SMALL, _synthetic_run


def _scenario(*, gpu=CPU, bandwidth: float = 0.55, compute: float = 0.3, overhead_s: float = 0.002) -> Scenario:
    base = Scenario(gpu=gpu, model=SMALL, weights_dtype="fp32", kv_dtype="fp32")
    return base.model_copy(update={"efficiency": base.efficiency.model_copy(
        update={"bandwidth": bandwidth, "compute": compute, "step_overhead_s": overhead_s})})


def test_a_fit_inside_its_bounds_has_no_warning() -> None:
    run = _synthetic_run(_scenario(), levels=(1, 2, 4, 8, 16, 32))
    cal = calibrate(run, _scenario(bandwidth=0.8, compute=0.5, overhead_s=0.0))
    assert cal.warnings == ()


def test_an_endpoint_faster_than_the_gpu_allows_pins_the_bounds_and_warns() -> None:
    # 'measured' on a GPU with 4x the bandwidth and FLOP/s of the scenario's at full efficiency: the
    # scenario's GPU cannot reach it at efficiency 1.0, so both efficiencies sit at the bound.
    fast = GpuSpec(id="unit-fast", name="unit", hbm_bytes=64e9, hbm_bytes_per_s=200e9,
                   flops_per_s={"bf16": 800e9, "fp32": 800e9}, pcie_bytes_per_s=16e9, tdp_w=100,
                   usd_per_gpu_hour=0.1, gpus_per_node=1)
    run = _synthetic_run(_scenario(gpu=fast, bandwidth=1.0, compute=1.0, overhead_s=0.0), levels=(1, 2, 4, 8))
    cal = calibrate(run, _scenario())
    assert cal.bandwidth_efficiency == pytest.approx(1.0) and cal.compute_efficiency == pytest.approx(1.0)
    text = "\n".join(cal.warnings)
    assert "efficiency.bandwidth = 1 sits at its upper bound 1" in text
    assert "efficiency.compute = 1 sits at its upper bound 1" in text
    worst = max(abs(r.rel_error) for r in cal.residuals)
    assert worst > CALIBRATION_MAX_REL_ERROR
    assert f"fit error up to {worst:.0%}" in text


@pytest.fixture(scope="module")
def pacer():
    srv = start_script("pacing_server", "--ttft-s", "0.002", "--tpot-s", "0.001")
    yield srv
    srv.stop()


def test_cli_prints_the_calibration_warning(pacer, capsys) -> None:
    # llama-3.1-8b's 16 GB of weights take 4.8 ms a step on an H100 at full bandwidth: the pacer's 1 ms is
    # out of reach, so the fit pins efficiency.bandwidth at 1.0
    assert main(["probe", "--url", pacer.url, "--model", "p", "--concurrency", "1,2,4", "--requests", "4",
                 "--output-tokens", "6", "--no-metrics", "--set", "gpu=h100-sxm", "--set", "model=llama-3.1-8b",
                 "--calibrate", "--format", "json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["calibration"]["warnings"]
    assert "warning: calibration: efficiency.bandwidth = 1 sits at its upper bound 1" in captured.err
