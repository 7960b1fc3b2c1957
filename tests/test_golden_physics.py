"""Golden rows for issue 13's physics, computed by hand (the arithmetic is in the
comments; the expected numbers are literals, never the function under test's output).

Unless a row says otherwise: efficiencies 1, no overheads, catalog shapes and
datasheets (H100 SXM: 989e12 BF16 / 1,979e12 FP8 FLOP/s, 3.35e12 B/s, NVLink 900
GB/s both ways = 450e9 one way; H200 SXM: 4.8e12 B/s, same compute).
Parameter counts (catalog, checked to the digit against the model cards):
Mixtral-8x7B 46,702,792,704 total, 45,097,156,608 in experts, 12,879,925,248 active;
DeepSeek-V3 671,026,404,352 total, 653,908,770,816 in experts, 37,552,282,624 active;
Llama-3.1-8B 8,030,261,248; Llama-3.1-70B 70,553,706,496.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from planner import Scenario, get_gpu, get_model, max_sequences, plan
from planner.physics.link import kv_transfer_exposed_s
from planner.physics.queueing import pipelined_prefill
from planner.physics.step import (
    all_to_all_s,
    attention_flops_per_token_context,
    decode_step,
    experts_touched_busiest,
    prefill_chunks,
    prefill_step,
)
from planner.physics.techniques import kv_transfer_s
from planner.physics.terms import physics_terms

H100, H200 = get_gpu("h100-sxm"), get_gpu("h200-sxm")
EXACT = dict(bandwidth_efficiency=1.0, compute_efficiency=1.0, step_overhead_s=0.0, layer_overhead_s=0.0)


@pytest.fixture(autouse=True)
def _no_overheads() -> Iterator[None]:
    """"No overheads" includes the fitted MoE layer and all-to-all terms (tests/test_moe_terms.py holds those)."""
    with physics_terms(moe_layer_overhead_s=0.0, moe_token_overhead_s=0.0, moe_prefill_layer_overhead_s=0.0,
                       moe_prefill_token_overhead_s=0.0, all_to_all_call_s=0.0, moe_prefill_slot_passes=0.0):
        yield


def test_moe_ep1_has_no_all_to_all_mixtral_tp2_batch1() -> None:
    """Mixtral-8x7B bf16, TP2, batch 1, empty context:
    dense weights (46,702,792,704 − 45,097,156,608) × 2 B / TP2        = 1,605,636,096 B
    one token touches 8 × (1 − (1 − 2/8)^1) = 2 experts:
      2 × 45,097,156,608 / 8 × 2 B / TP2                               = 11,274,289,152 B
    D = 12,879,925,248 B / 3.35e12 B/s                                 = 3.844754 ms (memory-bound:
      F = 2 × 12,879,925,248 / 2 GPUs / 989e12 = 0.013 ms)
    kernel groups (issue 24), each memory-bound, add the activations their GEMMs read and write:
      dense: per layer h + QKV/TP + O/TP + h = 4,096 + 6,144/2 + 4,096/2 + 4,096 = 13,312 elements
        × 32 layers × 2 B = 851,968 B; experts: (4,096 + 3 × 14,336/2 + 4,096) × 2 experts
        × 32 layers × 2 B = 3,801,088 B
      (1,605,636,096 + 851,968 + 11,274,289,152 + 3,801,088) B / 3.35e12 = 3.846143 ms
    TP all-reduces: 2 × 32 × (5 µs + 26.36 µs fitted per call (collective_call_s)
      + 2·(1/2) × 4,096 × 2 B / 450e9)                                 = 2.008205 ms
      (0.321165 ms without the per-call term, + 64 × 26.36 µs = 1.687040 ms)
    no all-to-all at EP = 1 (the plan once charged one here)
    step = 3.846143 + 2.008205 = 5.854348 ms"""
    st = decode_step(model=get_model("mixtral-8x7b"), gpu=H100, weights_dtype="bf16", kv_dtype="bf16",
                     batch_size=1, context_tokens=0, tp=2, **EXACT)
    assert st.bytes_per_gpu == pytest.approx(12_879_925_248, rel=1e-12)
    assert st.comm_s == pytest.approx(0.002008205084, rel=1e-8)
    assert st.step_s == pytest.approx(0.005854347861, rel=1e-8)
    assert all_to_all_s(gpu=H100, group=2, ep=1, bytes_per_gpu=1e6, count=64) == 0.0


def test_moe_ep8_busiest_gpu_and_per_gpu_all_to_all_deepseek_v3() -> None:
    """DeepSeek-V3 fp8 on 8 × H200, TP8·EP8 with data-parallel attention (issue 25: the
    8 GPUs the replica has; EP once multiplied them, and this row was "EP8 (TP1)"), decode
    batch 8 (one sequence per attention rank), empty context.
    Each expert is touched with q = 1 − (1 − 8/256)^8 = 0.224300; a GPU holds 32
    experts, touched Binomial(32, q): 7.18 on average, but the step waits for the
    busiest of 8 GPUs: E[max] = Σ_{x<32} (1 − F(x)^8) = 10.6362 (computed below
    with math.comb, independently of the planner).
    D = replicated on every attention rank: attention 11,414,421,504 + shared experts
        2,554,331,136 = 13,968,752,640 B
      + the rest of the dense weights over TP: (17,117,633,536 − 13,968,752,640) / 8 = 393,610,112 B
      + 10.6362 × 653,908,770,816 / 256 × 1 B (each expert whole on its GPU) = 27,168,277,521 B
      = 41,530,640,273 B (F = 2 × 37.55e9 × 8 / 8 GPUs / 1,979e12 = 0.038 ms)
    kernel groups (issue 24), both memory-bound, with the activations of the rank's one token
    (attention unsharded: the same elements as at TP1):
      dense (112,640 elements per layer × 61 + MLP 69,632 × 3 dense layers) × 2 B = 14,159,872 B,
      experts (7,168 + 3 × 2,048 + 7,168) × (8 + 1 shared) × 58 layers × 2 B = 21,381,120 B:
      (14,362,362,752 + 14,159,872 + 27,168,277,521 + 21,381,120) B / 4.8e12 = 8.659621 ms
    the 3 dense layers gather/scatter the group's 8 tokens over TP8 (one all-reduce each):
      3 × (5 µs + 26.36 µs + 2·7/8 × 8 × 7,168 × 2 B / 450e9)        = 0.095418 ms
    all-to-all, 58 MoE layers, the busiest GPU receiving 64/8 × f token copies,
      f = 1 + z₈·√(7/64) = 1.474317 (z₈ = Φ⁻¹(7.625/8.25) = 1.434200): 11.794537 copies
      dispatch FP8 (1 + 4/128 B): 58 × (5 µs + 11.794537 × 7,168 × 1.03125 × 7/8 / 450e9) = 0.299833 ms
      combine BF16:               58 × (5 µs + 11.794537 × 7,168 × 2 × 7/8 / 450e9)       = 0.309069 ms
    step = 8.659621 + 0.095418 + 0.608902 = 9.363941 ms"""
    q = 1 - (1 - 8 / 256) ** 8

    def cdf(x: int) -> float:
        return sum(math.comb(32, i) * q**i * (1 - q) ** (32 - i) for i in range(x + 1))

    e_max = sum(1 - cdf(x) ** 8 for x in range(32))
    assert e_max == pytest.approx(10.6362, abs=1e-4)
    assert experts_touched_busiest(experts=256, top_k=8, tokens=8, ep=8) == pytest.approx(e_max, rel=1e-9)
    st = decode_step(model=get_model("deepseek-v3"), gpu=H200, weights_dtype="fp8", kv_dtype="fp8",
                     batch_size=8, context_tokens=0, tp=8, ep=8, dp_attention=True, **EXACT)
    assert st.bytes_per_gpu == pytest.approx(41_530_640_273, rel=1e-9)
    assert st.all_reduce_s == pytest.approx(0.000095418027, rel=1e-7)
    assert st.all_to_all_s == pytest.approx(0.000608901753, rel=1e-7)
    assert st.comm_s == pytest.approx(0.000704319779, rel=1e-8)
    assert st.step_s == pytest.approx(0.009363940876, rel=1e-8)


def test_moe_ep8_prefill_runs_on_one_attention_rank() -> None:
    """DeepSeek-V3 fp8 (KV fp8), TP8·EP8 with data-parallel attention, a 2,000-token prefill
    on 8 × H200: the prompt sits on ONE attention rank (issue 25; the plan once spread it
    over all 8 GPUs), its attention and the replicated projections on that GPU, the MLPs
    and experts over the group; each kernel group on its own roofline:
    dense GEMMs: 2 × 2,000 × (13,968,752,640 replicated + 3,148,880,896 / 8) / 1,979e12
      = 29.029536 ms vs (14,362,362,752 + 2,000 tokens × 14,159,872 B) / 4.8e12 = 8.892106 ms:
      compute-bound, 29.029536 ms
    experts: 2 × 20,434,649,088 × 2,000 / 8 / 1,979e12 = 5.162872 ms vs the GPU's 32 experts
      (653,908,770,816 / 8 B) + 250 × 21,381,120 B activations = 87,083,876,352 B / 4.8e12
      = 18.142474 ms: memory-bound, 18.142474 ms
    attention (MLA un-absorbed: 2·(192 + 128)·61·128 = 4,997,120 per token-context) × 2,000²/2
      on the one rank at the BF16 rate (an FP8 cache alone does not make it FP8) = 10.105399 ms
    kernels 57.277409 ms
    dense layers' gather/scatter: 3 × (5 µs + 26.36 µs + 2·7/8 × 2,000 × 7,168 × 2 B / 450e9) = 0.428587 ms
    all-to-all from the prompt's rank, 2,000 × 8 = 16,000 token copies, (8−1)/8 of them leaving:
      dispatch 58 × (5 µs + 16,000 × 7,168 × 1.03125 × 7/8 / 450e9) = 13.628453 ms,
      combine  58 × (5 µs + 16,000 × 7,168 × 2 × 7/8 / 450e9)       = 26.158516 ms
    t = 57.277409 + 0.428587 + 39.786969 = 97.492965 ms"""
    pf = prefill_step(model=get_model("deepseek-v3"), gpu=H200, weights_dtype="fp8", kv_dtype="fp8",
                      tokens=2000, tp=8, ep=8, dp_attention=True, **EXACT)
    assert pf.gemm_s == pytest.approx(0.029029535628, rel=1e-8)
    assert pf.expert_s == pytest.approx(0.018142474240, rel=1e-8)
    assert pf.attention_s == pytest.approx(0.010105399393, rel=1e-8)
    assert pf.all_to_all_s == pytest.approx(0.039786968889, rel=1e-8)
    assert pf.time_s == pytest.approx(0.097492964817, rel=1e-8)


def test_mla_decode_attention_is_absorbed() -> None:
    """DeepSeek-V3 decode attends over the 576-wide latent: per head per cached token
    2·(512 + 64) (scores) + 2·512 (values) = 2,176 FLOPs (the plan once counted 640).
    Batch 64 at 4,000 cached tokens, TP8·EP8·DP attention, per GPU:
      linear    2 × 37,552,282,624 × 64 / 8          = 600,836,521,984 FLOP
      attention 2,176 × 61 × 128 × 4,000 × 64 / 8    = 543,686,656,000 FLOP
    Attention runs at 989e12 with an FP8 or a BF16 cache (0.303606 + 0.549734 = 0.853340 ms);
    only an engine running FP8 attention on the FP8 cache does both at 1,979e12 -> 0.578334 ms."""
    ds = get_model("deepseek-v3")
    assert attention_flops_per_token_context(ds, absorbed=True) == 2176 * 61 * 128
    assert attention_flops_per_token_context(ds) == 640 * 61 * 128
    kw = dict(model=ds, gpu=H200, weights_dtype="fp8", batch_size=64, context_tokens=4000, tp=8, ep=8,
              dp_attention=True, **EXACT)
    assert decode_step(kv_dtype="fp8", fp8_attention=True, **kw).compute_s == pytest.approx(0.000578334097, rel=1e-8)
    assert decode_step(kv_dtype="fp8", **kw).compute_s == pytest.approx(0.000853339852, rel=1e-8)
    assert decode_step(kv_dtype="bf16", **kw).compute_s == pytest.approx(0.000853339852, rel=1e-8)


CHUNKED = dict(model=get_model("llama-3.1-8b"), gpu=H100, weights_dtype="bf16", kv_dtype="bf16",
               bandwidth_efficiency=1.0, compute_efficiency=0.5, step_overhead_s=0.0, layer_overhead_s=0.0)


@pytest.mark.parametrize(("prompt", "chunks", "total_s", "worst_s"), [
    # 32,000 tokens in ⌈32,000 / 2,048⌉ = 16 chunks.  Chunk i attends to i·2,048 earlier
    # tokens, so the chunks' compute sums to the whole prompt's:
    #   (2 × 8,030,261,248 × 32,000 + 524,288 × 32,000² / 2) / (0.5 × 989e12) = 1.582148 s
    # (524,288 = 2·(128 + 128)·32 layers·32 heads).  The longest is chunk 14 (2,048 tokens
    # after 28,672): (2P × 2,048 + 524,288 × (2,048 × 28,672 + 2,048²/2)) / 494.5e12 = 130.997 ms.
    (32_000, 16, 1.582147980, 0.130996536),
    # 120,000 tokens: 59 chunks, Σ = (2P × 120,000 + 524,288 × 120,000²/2) / 494.5e12 = 11.531115 s;
    # chunk 57 (after 116,736 tokens): (3.28920e13 + 524,288 × 241,172,480) / 494.5e12 = 322.216 ms.
    # (Each chunk is compute-bound: its KV read is ≤ 120,000 × 131,072 B / 3.35e12 = 4.7 ms.)
    (120_000, 59, 11.531114863, 0.322215950),
])
def test_chunk_i_attends_to_its_earlier_chunks(prompt: int, chunks: int, total_s: float, worst_s: float) -> None:
    pc = prefill_chunks(new_tokens=[prompt], cached_tokens=[0], chunk_tokens=2048, **CHUNKED)
    assert int(pc.counts[0]) == chunks
    assert float(pc.marginal_total_s[0]) == pytest.approx(total_s, rel=1e-8)
    assert float(pc.marginal_s[0][pc.mask[0]].max()) == pytest.approx(worst_s, rel=1e-8)
    # The dedicated prefill does the same compute in one pass: chunking never makes it cheaper.
    assert float(prefill_step(tokens=prompt, **CHUNKED).time_s) == pytest.approx(total_s, rel=1e-8)


def test_prefix_blocks_held_once_per_replica() -> None:
    """Llama-3.1-8B on one H100, seeds' accounting (80e9 − 16,060,522,496 − 4e9 reserved
    = 59,939,477,504 B of KV), 2,000-token prompts + 250 output = 2,250 tokens of
    131,072 B.  Without sharing: 59,939,477,504 / (2,250 × 131,072) = 203.245 sequences.
    Every request sharing a 2,000-token prefix (the seeds' "26.2 GB to 0.26 GB"): one
    copy of 2,000 × 131,072 = 262,144,000 B, and each sequence holds only its own 250
    tokens: (59,939,477,504 − 262,144,000) / (250 × 131,072) = 1,821.208 sequences."""
    base = {"serving": {"memory_utilization": None}, "workload": {"prompt_tokens": 2000, "output_tokens": 250}}
    alone = plan(Scenario.model_validate(base)).memory.max_sequences
    shared = plan(Scenario.model_validate({**base, "workload": {**base["workload"], "prefix_tokens": 2000,
                                                                 "prefix_hit_rate": 1.0}})).memory.max_sequences
    assert alone == pytest.approx(203.2452986, rel=1e-9)
    assert shared == pytest.approx(1821.2076875, rel=1e-9)
    # A copy that few share never costs sequences: max(alone, shared).
    assert max_sequences(kv_budget_bytes=59_939_477_504, kv_bytes_per_token_per_gpu=131_072, context_tokens=2250,
                         prefix_tokens=2000, prefix_hit_rate=0.001) == pytest.approx(203.2452986, rel=1e-9)


def test_prefill_averaged_over_hits_and_misses() -> None:
    """2,000-token prompts, 1,500-token prefix hit 95% of the time (8B, compute 50%):
    miss: (2P × 2,000 + 524,288 × 2,000²/2) / 494.5e12                 = 67.0771 ms
    hit:  500 new after 1,500: (2P × 500 + 524,288 × (500 × 1,500 + 500²/2)) / 494.5e12 = 17.1669 ms
    (both compute-bound: memory (16,060,522,496 + 2,000 × 131,072) / 3.35e12 = 4.87 ms)
    mean = 0.95 × 17.1669 + 0.05 × 67.0771 = 19.6624 ms (not the prefill at the mean cached
    length, 1,425 tokens)."""
    sc = Scenario(workload={"prefix_tokens": 1500, "prefix_hit_rate": 0.95},
                  efficiency={"bandwidth": 1.0, "compute": 0.5, "step_overhead_s": 0.0, "layer_overhead_s": 0.0})
    assert plan(sc).prefill.time_s == pytest.approx(0.0196623734, rel=1e-8)


def test_pp2_prefill_replica_pipelines_prompts() -> None:
    """Llama-3.1-70B bf16, TP4, a 2,000-token prompt (one chunk):
    compute (2 × 70,553,706,496 × 2,000 + 2,621,440 × 2,000²/2) / (4 × 989e12) = 72.6637 ms
    (memory (70.55e9 × 2 / 4 + 2,000 × 81,920) / 3.35e12 = 10.58 ms: compute-bound)
    TP all-reduces: 160 × (5 µs + 26.36 µs fitted per call (collective_call_s)
      + 1.5 × 2,000 × 8,192 × 2 B / 450e9)                                    = 22.4939 ms
      (18.2763 ms without the per-call term, + 160 × 26.36 µs = 4.2176 ms)
    PP1: S = 72.6637 + 22.4939 = 95.1576 ms, one prompt at a time: 10.509 prompts/s.
    PP2: + one hop (5 µs + 32,768,000 B / 450e9 = 77.8 µs; a point-to-point send, no
    per-call all-reduce term): S = 95.2354 ms, but the two
    stages work on successive prompts: 2 / S = 21.001 prompts/s.  One prompt's own
    latency stays S: (S/2) / (1 − bubble), bubble = (2 − 1)/(1 + 2 − 1) = 1/2."""
    kw = dict(model=get_model("llama-3.1-70b"), gpu=H100, weights_dtype="bf16", kv_dtype="bf16", tokens=2000,
              tp=4, **EXACT)
    s1 = float(prefill_step(pp=1, **kw).time_s)
    s2 = float(prefill_step(pp=2, **kw).time_s)
    assert s1 == pytest.approx(0.0951575942, rel=1e-8)
    assert s2 == pytest.approx(0.0952354119, rel=1e-8)
    srv1, own1 = pipelined_prefill(prefill_s=s1, stages=1, microbatches=1)
    srv2, own2 = pipelined_prefill(prefill_s=s2, stages=2, microbatches=1)
    assert 1 / srv1 == pytest.approx(10.508883, rel=1e-6)
    assert 1 / srv2 == pytest.approx(21.000592, rel=1e-6)
    assert own2 == pytest.approx(s2, rel=1e-12)


def test_kv_transfer_at_tp4_over_nvlink_and_rdma() -> None:
    """Llama-3.1-70B at TP4: each GPU holds 8 KV heads / 4 = 2, i.e. 327,680 / 4 = 81,920 B
    per token; an 8,000-token prompt is 655,360,000 B per GPU, shipped by every GPU at once:
      RDMA (one 400 Gb/s NIC per GPU, 80% sustained): 655,360,000 / (0.8 × 50e9)  = 16.384 ms
      NVLink (450e9 one way, 80%):                    655,360,000 / (0.8 × 450e9) = 1.8204 ms
    (the seeds' 52 ms and 3 ms send the whole 2.62 GB over one NIC, and over 900 GB/s).
    Layer by layer behind a 10 ms prefill of 80 layers, RDMA exposes
      max(16.384/80, 16.384 − 79/80 × 10) = 6.509 ms, and NVLink only its last layer's 22.8 µs."""
    p = plan(Scenario(model="llama-3.1-70b", parallel={"tp": 4}, serving={"mode": "disaggregated"},
                      workload={"prompt_tokens": 8000, "output_tokens": 250}, slo={"ttft_s": 5.0}))
    assert p.fleet.kv_transfer_s == pytest.approx(0.016384, rel=1e-9)
    nv = plan(Scenario(model="llama-3.1-70b", parallel={"tp": 4}, serving={"mode": "disaggregated"},
                       fleet={"link": "nvlink"}, workload={"prompt_tokens": 8000, "output_tokens": 250},
                       slo={"ttft_s": 5.0}))
    assert nv.fleet.kv_transfer_s == pytest.approx(655_360_000 / 360e9, rel=1e-12)
    rdma = float(kv_transfer_s(kv_bytes=655_360_000, link_bytes_per_s=50e9, efficiency=0.8))
    assert kv_transfer_exposed_s(transfer_s=rdma, prefill_s=0.010, layers=80) == pytest.approx(0.006509, rel=1e-9)
    assert kv_transfer_exposed_s(transfer_s=655_360_000 / 360e9, prefill_s=0.010, layers=80) == pytest.approx(
        655_360_000 / 360e9 / 80, rel=1e-12)
