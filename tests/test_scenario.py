"""Scenarios with inline custom hardware and models, validated like catalog entries."""

from __future__ import annotations

import pytest

from planner import PlannerError, plan, scenario_from_dict

CPU_HOST = {"id": "cpu-host", "name": "test CPU host", "hbm_bytes": 64e9, "hbm_bytes_per_s": 50e9,
            "flops_per_s": {"bf16": 2e12, "fp32": 1e12}, "pcie_bytes_per_s": 16e9, "tdp_w": 200,
            "usd_per_gpu_hour": 0.5}
TINY = {"id": "tiny", "layers": 8, "hidden": 1024, "heads": 16, "kv_heads": 4, "head_dim": 64,
        "intermediate": 2816, "vocab": 32000}


def test_inline_gpu_and_model_plan() -> None:
    p = plan(scenario_from_dict({"gpu": CPU_HOST, "model": TINY, "weights_dtype": "fp32", "kv_dtype": "fp32"}))
    # Batch-1 decode streams at least the fp32 weights: tok/s ≤ 50e9 / (4 × params).
    assert p.memory.weight_bytes == pytest.approx(4 * (32000 * 1024 * 2 + 1024 + 8 * (
        1024 * 1024 * 2 + 2 * 1024 * 256 + 2 * 1024 + 3 * 1024 * 2816)))
    assert p.memory.kv_bytes_per_token == 2 * 8 * 4 * 64 * 4  # 16,384
    assert p.roofline.compute_dtype == "fp32"
    assert any("extrapolation" in w for w in p.warnings)  # no published rows for this host


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"gpu": dict(CPU_HOST, hbm_bytes_per_s=-1)}, "gpu.hbm_bytes_per_s: Input should be greater than 0"),
        ({"gpu": dict(CPU_HOST, flops_per_s={})}, "gpu.flops_per_s.bf16: Field required"),
        ({"model": dict(TINY, kv_heads=5)}, "heads (16) must be divisible by kv_heads (5)"),
        ({"model": dict(TINY, intermediate=None)}, "missing intermediate"),
        ({"model": TINY, "parallel": {"tp": 32}}, "parallel.tp"),
    ],
)
def test_bad_inline_specs_name_the_field(data, needle: str) -> None:
    with pytest.raises(PlannerError) as info:
        scenario_from_dict(data)
    assert needle in str(info.value)
    assert "valid string" not in str(info.value)


def test_overhead_defaults_and_a_stated_step_overhead() -> None:
    from planner import resolve
    from planner.spec.defaults import DEFAULT_LAYER_OVERHEAD_S

    default = resolve(scenario_from_dict({}))
    assert default.layer_overhead_s == DEFAULT_LAYER_OVERHEAD_S > 0
    assert default.origins["efficiency.layer_overhead_s"] == "default (fitted on published data)"
    # A scenario that states its step overhead (a calibration, an older save) states the whole of it.
    stated = resolve(scenario_from_dict({"efficiency": {"step_overhead_s": 0.003}}))
    assert (stated.step_overhead_s, stated.layer_overhead_s) == (0.003, 0.0)
    both = resolve(scenario_from_dict({"efficiency": {"step_overhead_s": 0.001, "layer_overhead_s": 5e-5}}))
    assert (both.step_overhead_s, both.layer_overhead_s) == (0.001, 5e-5)
    # 8B (32 layers): the decode step replays a CUDA graph (issue 24), so it pays the step overhead
    # and 32 × graph_layer_overhead_s (fitted at 0), not the per-layer launch cost; the eager
    # prefill pass pays 32 × layer on top.
    from planner.spec.fitted import FITTED_TERMS

    assert FITTED_TERMS["graph_layer_overhead_s"] == 0
    with_launch = plan(scenario_from_dict({"efficiency": {"step_overhead_s": 0.001, "layer_overhead_s": 5e-5}}))
    no_launch = plan(scenario_from_dict({"efficiency": {"step_overhead_s": 0.001, "layer_overhead_s": 0.0}}))
    assert with_launch.decode.overhead_s == pytest.approx(0.001)
    assert with_launch.prefill.chunks == 1
    assert with_launch.prefill.time_s - no_launch.prefill.time_s == pytest.approx(32 * 5e-5, rel=1e-9)
