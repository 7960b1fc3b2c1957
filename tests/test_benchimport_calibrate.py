"""Calibration from imported runs recovers known efficiencies: rows the planner predicts at
efficiencies the test chooses, with seeded noise, are fitted back within 5%."""

from __future__ import annotations

import numpy as np
import pytest

from planner.benchimport import (
    BenchLevel,
    BenchRun,
    LatencyStats,
    bench_setup,
    calibrate_runs,
    calibrated_from_scenario,
    row_setup,
    run_rows,
)
from planner.errors import ScenarioError
from planner.sizing.plan import plan
from planner.spec.context import resolve
from planner.validate import EfficiencySet, predict_row, shared_runs

TRUE = EfficiencySet(bandwidth=0.72, compute=0.48, step_overhead_s=3e-3, layer_overhead_s=0.0,
                     collective_hop_s=0.0, sequence_overhead_s=0.0, gemm_half_width=0.0,
                     graph_layer_overhead_s=0.0, collective_call_s=0.0)
LEVELS = (1, 8, 32, 128, 256)  # a batch wide enough that KV reads separate bandwidth from overhead
NOISE = 0.02  # 2% lognormal scatter, seeded


def synthetic_run(name: str, isl: int, osl: int, setup, rng: np.random.Generator,
                  noise: float = NOISE) -> BenchRun:
    """A run whose TTFT and TPOT are the planner's own at TRUE, times seeded noise."""
    blank = BenchRun(tool="vllm", source_file=name, levels=tuple(
        BenchLevel(concurrency=c, prompt_tokens=isl, output_tokens=osl, ttft_s=LatencyStats(p50=1.0),
                   tpot_s=LatencyStats(p50=1.0)) for c in LEVELS))
    values: dict[tuple[int, str], float] = {}
    with shared_runs():
        for row in run_rows(blank, setup):
            level = int(row.id.rsplit("#", 1)[1].split(":", 1)[0])
            mapped = row_setup(row, setup)
            assert not isinstance(mapped, str), mapped
            values[(level, row.metric)] = predict_row(mapped, TRUE)[0] / 1e3 * float(np.exp(rng.normal(0, noise)))
    return blank.model_copy(update={"levels": tuple(
        lv.model_copy(update={"ttft_s": LatencyStats(p50=values[(i, "ttft_ms")]),
                              "tpot_s": LatencyStats(p50=values[(i, "tpot_ms")])})
        for i, lv in enumerate(blank.levels))})


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(26)
    setup = bench_setup(["gpu=h100-sxm", "model=llama-3.1-8b", "engine=vllm"])
    runs = [synthetic_run("short.json", 512, 256, setup, rng), synthetic_run("long.json", 4096, 256, setup, rng),
            synthetic_run("mid.json", 2048, 128, setup, rng)]
    return setup, runs, calibrate_runs([(r, setup) for r in runs])


def test_known_efficiencies_are_fitted_back_within_5_percent(fitted) -> None:
    _, _, cal = fitted
    assert cal.efficiency["bandwidth"] == pytest.approx(TRUE.bandwidth, rel=0.05)
    assert cal.efficiency["compute"] == pytest.approx(TRUE.compute, rel=0.05)


def test_without_noise_every_fitted_value_is_recovered() -> None:
    setup = bench_setup(["gpu=h100-sxm", "model=llama-3.1-8b", "engine=vllm"])
    rng = np.random.default_rng(0)
    runs = [synthetic_run(f"{isl}.json", isl, 256, setup, rng, noise=0.0) for isl in (512, 4096)]
    cal = calibrate_runs([(r, setup) for r in runs], cross_validate=False)
    assert cal.efficiency["bandwidth"] == pytest.approx(TRUE.bandwidth, rel=0.01)
    assert cal.efficiency["compute"] == pytest.approx(TRUE.compute, rel=0.01)
    # the whole per-step overhead (per step + per layer × 32 layers) is what the rows see
    overhead = cal.efficiency["step_overhead_s"] + cal.efficiency["layer_overhead_s"] * 32
    assert overhead == pytest.approx(TRUE.step_overhead_s, rel=0.01)
    assert cal.in_sample_median_abs_error_pct < 0.1


def test_leave_one_run_out_scores_rows_the_fit_did_not_see(fitted) -> None:
    _, runs, cal = fitted
    assert cal.cross_validation == "leave-one-run-out"
    assert cal.runs == tuple(f"vllm:{r.source_file}" for r in runs)
    assert all(r.held_out_error_pct is not None for r in cal.rows)
    assert cal.held_out_max_abs_error_pct is not None and cal.held_out_max_abs_error_pct < 10.0
    assert cal.in_sample_median_abs_error_pct < 3 * NOISE * 100
    assert cal.warnings == ()


def test_the_calibrated_scenario_names_its_runs_and_plans_say_so(fitted) -> None:
    setup, _, cal = fitted
    scenario = calibrated_from_scenario(setup.scenario, cal)
    assert scenario.efficiency.calibrated_from == "vllm:short.json, vllm:long.json, vllm:mid.json"
    assert scenario.efficiency.bandwidth == pytest.approx(cal.efficiency["bandwidth"])
    r = resolve(scenario)
    assert r.origins["efficiency"] == "calibrated" and r.origins["efficiency.bandwidth"] == "calibrated"
    assert plan(scenario).to_json_dict()["derivations"]  # a plan runs from it


def test_a_fit_that_cannot_reach_the_rows_warns() -> None:
    # the runs measured on an H100 with Llama 8B, "calibrated" as if a 70B on one GPU of the same kind
    rng = np.random.default_rng(1)
    setup = bench_setup(["gpu=h100-sxm", "model=llama-3.1-8b"])
    runs = [synthetic_run("a.json", 512, 256, setup, rng)]
    wrong = bench_setup(["gpu=h200-sxm", "model=llama-3.1-70b", "precision=fp8"])
    cal = calibrate_runs([(runs[0], wrong)])
    assert cal.cross_validation == "leave-one-level-out"
    assert any("bound" in w for w in cal.warnings)


def test_too_few_rows_is_one_line() -> None:
    setup = bench_setup(["gpu=h100-sxm", "model=llama-3.1-8b"])
    run = BenchRun(tool="vllm", source_file="one.json", levels=(
        BenchLevel(concurrency=1, prompt_tokens=512, output_tokens=64, ttft_s=LatencyStats(p50=0.02)),))
    with pytest.raises(ScenarioError, match="needs at least 3"):
        calibrate_runs([(run, setup)])
