"""planner.views.curves: chart tables from the one physics, checked by hand arithmetic."""

from __future__ import annotations

import pytest

from planner import get_gpu, scenario_from_dict
from planner.spec.defaults import DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_LAYER_OVERHEAD_S, DEFAULT_STEP_OVERHEAD_S
from planner.views.curves import (
    batch_curve,
    chunk_curve,
    max_sequences_curve,
    memory_breakdown,
    parallel_options,
    roof_lines,
    roofline_points,
    speculative_curve,
    ttft_curve,
)

BASE = scenario_from_dict({"gpu": "h100-sxm", "model": "llama-3.1-8b"})

# Per-step overhead of the 32-layer Llama-3.1-8B at the default efficiencies: a prefill pass
# pays the per-layer launches (eager), a decode step replays a CUDA graph (issue 24).
OVERHEAD_8B_S = DEFAULT_STEP_OVERHEAD_S + DEFAULT_LAYER_OVERHEAD_S * 32
DECODE_OVERHEAD_8B_S = DEFAULT_STEP_OVERHEAD_S


def test_roof_lines_ridge_and_flat_roof() -> None:
    h100, h200 = get_gpu("h100-sxm"), get_gpu("h200-sxm")
    roofs, ridges = roof_lines(gpus=[h100, h200], weights_dtypes=["bf16", "fp8"], intensities=[1.0, 1e4])
    by = {r["series"]: r for r in ridges}
    assert set(by) == {"h100-sxm bf16", "h100-sxm fp8", "h200-sxm bf16", "h200-sxm fp8"}
    # 989e12 / 3.35e12 ≈ 295 FLOP/byte
    assert by["h100-sxm bf16"]["intensity_flop_per_byte"] == pytest.approx(989e12 / 3.35e12, rel=1e-3)
    low = [r for r in roofs if r["series"] == "h200-sxm bf16" and r["intensity_flop_per_byte"] == 1.0][0]
    assert low["attainable_flops_per_s"] == pytest.approx(h200.hbm_bytes_per_s)  # 1 FLOP/B × 4.8e12 B/s
    high = [r for r in roofs if r["series"] == "h100-sxm bf16" and r["intensity_flop_per_byte"] == 1e4][0]
    assert high["attainable_flops_per_s"] == h100.flops_per_s.bf16 and high["bound"] == "compute"


def test_roof_lines_drop_a_format_the_chip_lacks() -> None:
    _, ridges = roof_lines(gpus=[get_gpu("a100-sxm-80gb")], weights_dtypes=["bf16", "fp8"], intensities=[1.0])
    assert [r["series"] for r in ridges] == ["a100-sxm-80gb bf16"]  # FP8 computes at the BF16 rate


def test_roofline_points_decode_intensity_rises_with_batch() -> None:
    rows = roofline_points(BASE, batches=[1, 64], contexts=[1024], prompt_lengths=[2048])
    dec = {r["batch_size"]: r for r in rows if r["kind"] == "decode"}
    # Batch 1: ≈ 2P / (2P bytes + KV) ≈ 1 FLOP/byte for 16-bit weights.
    assert dec[1]["intensity_flop_per_byte"] == pytest.approx(1.0, rel=0.02)
    assert dec[64]["intensity_flop_per_byte"] > 30 * dec[1]["intensity_flop_per_byte"]
    pre = [r for r in rows if r["kind"] == "prefill"][0]
    assert pre["intensity_flop_per_byte"] == pytest.approx(2048, rel=1e-6)  # 2P·N / 2P bytes = N
    assert pre["bound"] == "compute" and dec[1]["bound"] == "memory"


# Llama-3.1-8B by hand from its config (32 layers, hidden 4,096, 32 heads / 8 KV heads of 128,
# FFN 14,336, vocabulary 128,256, untied embeddings):
#   per layer: attention 4,096 × (4,096 + 1,024 + 1,024 + 4,096) = 41,943,040, MLP 3 × 4,096 × 14,336
#   = 176,160,768, two norms 8,192 -> 218,112,000; × 32 = 6,979,584,000; embeddings and LM head
#   2 × 128,256 × 4,096 = 1,050,673,152; final norm 4,096 -> 8,030,261,248 parameters.
PARAMS_8B = 8_030_261_248
# Profile-run activations at 2,048 chunk + 256 tokens: 2,304 × 4 × (4,096 + 14,336) × 2 B = 339,738,624,
# fp32 logits for 1,024 sampled tokens 1,024 × 128,256 × 4 B = 525,336,576, CUDA graphs 0.5 GB.
ACTIVATIONS_8B = 339_738_624 + 525_336_576 + 500_000_000


def test_memory_breakdown_parts_by_hand() -> None:
    rows = {r["part"]: r["bytes"] for r in memory_breakdown(BASE)}
    weights = PARAMS_8B * 2  # bf16
    assert rows["weights"] == pytest.approx(weights, rel=1e-12)
    assert rows["activations + CUDA graphs"] == pytest.approx(ACTIVATIONS_8B, rel=1e-12)
    assert rows["non-torch (CUDA, NCCL)"] == pytest.approx(1e9)
    # memory_utilization 0.9 of the memory CUDA reports (issue 13): 85,045,477,376 bytes on an
    # H100 SXM (catalog cuda_visible_hbm_bytes), not the datasheet's 80e9; less the three parts above.
    cuda_visible = 85_045_477_376
    assert rows["KV budget"] == pytest.approx(0.9 * cuda_visible - weights - ACTIVATIONS_8B - 1e9, rel=1e-12)
    assert rows["headroom (1 − utilization)"] == pytest.approx(0.1 * cuda_visible)
    assert len(rows) == 5
    # Seeds' accounting (no utilization): HBM − weights − 4 GB reserved is all KV, nothing left over.
    seeds = scenario_from_dict({"gpu": "h100-sxm", "model": "llama-3.1-8b", "serving": {"memory_utilization": None}})
    rows = {r["part"]: r["bytes"] for r in memory_breakdown(seeds)}
    assert rows == {"weights": pytest.approx(weights, rel=1e-12), "reserved": pytest.approx(4e9),
                    "KV budget": pytest.approx(80e9 - weights - 4e9, rel=1e-12)}


def test_max_sequences_curve_halves_with_context_and_doubles_with_fp8() -> None:
    rows = max_sequences_curve(BASE, contexts=[2048, 4096], kv_dtypes=["bf16", "fp8"])
    v = {(r["kv_dtype"], r["context_tokens"]): r["max_sequences"] for r in rows}
    assert v[("bf16", 4096)] == pytest.approx(v[("bf16", 2048)] / 2)
    assert v[("fp8", 2048)] == pytest.approx(2 * v[("bf16", 2048)])
    # KV per token 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B; the budget as in the breakdown.
    budget = 0.9 * 85_045_477_376 - PARAMS_8B * 2 - ACTIVATIONS_8B - 1e9  # CUDA-visible H100 memory
    assert v[("bf16", 2048)] == pytest.approx(budget / (2048 * 131_072), rel=1e-12)


def test_batch_curve_throughput_rises_itl_rises() -> None:
    rows = batch_curve(BASE, batches=[1, 8, 64])
    assert [r["batch_size"] for r in rows] == [1, 8, 64]
    assert rows[0]["itl_s"] < rows[1]["itl_s"] < rows[2]["itl_s"]
    assert rows[0]["tok_s_per_replica"] < rows[1]["tok_s_per_replica"] < rows[2]["tok_s_per_replica"]
    assert rows[2]["tok_s_per_replica"] == pytest.approx(64 / rows[2]["itl_s"])
    # Batch-1 decode of 16.06 GB at η_b × 3.35 TB/s, plus the per-step overhead (a graph: no launches).
    assert rows[0]["itl_s"] == pytest.approx(
        16.06e9 / (DEFAULT_BANDWIDTH_EFFICIENCY * 3.35e12) + DECODE_OVERHEAD_8B_S, rel=0.03)


def test_ttft_curve_quadruples_past_linear() -> None:
    rows = ttft_curve(BASE, prompt_lengths=[1000, 4000])
    # Compute-bound: linear plus n² attention, on top of the fixed per-step overhead.
    assert rows[1]["ttft_s"] - OVERHEAD_8B_S > 3.9 * (rows[0]["ttft_s"] - OVERHEAD_8B_S)


def test_chunk_curve_trades_ttft_for_itl() -> None:
    rows = chunk_curve(BASE, chunk_sizes=[128, 2048])
    small, big = rows
    assert small["chunks"] == 16 and big["chunks"] == 1  # ceil(2000 / 128), ceil(2000 / 2048)
    assert small["iteration_s"] < big["iteration_s"] and small["ttft_s"] > big["ttft_s"]


def test_speculative_curve_alpha_zero_and_one() -> None:
    rows = speculative_curve(BASE, acceptances=[0.0, 1.0], draft_tokens=[4])
    assert rows[0]["tokens_per_pass"] == 1.0 and rows[1]["tokens_per_pass"] == 5.0
    assert rows[0]["speedup"] < 1.0 < rows[1]["speedup"]


def test_parallel_options_respect_the_scenario_checks() -> None:
    # bf16 (issue 13 budgets 0.9 × the 85.0 GB CUDA reports, where 70.5 GB of fp8
    # weights now leave room for a few sequences; 141 GB of bf16 weights do not fit).
    rows = parallel_options(scenario_from_dict({"gpu": "h100-sxm", "model": "llama-3.1-70b",
                                                   "weights_dtype": "bf16"}))
    layouts = {(r["tp"], r["pp"], r["ep"]) for r in rows}
    assert (2, 1, 1) in layouts and not any(ep > 1 for _, _, ep in layouts)  # dense: no EP
    one, two = ({(r["tp"], r["pp"]): r for r in rows}[k] for k in ((1, 1), (2, 1)))
    assert not one["fits"] and two["fits"]  # 141 GB: none on one GPU; 70.5 GB per GPU at TP2 leave KV room
    assert two["weight_bytes_per_gpu"] == pytest.approx(one["weight_bytes_per_gpu"] / 2)
    assert [r["current"] for r in rows].count(True) == 1
