"""Golden rows for issue 24's physics, computed by hand (arithmetic in the comments; the
expected numbers are literals, never the function under test's output).

Efficiencies 1 and no overheads unless a row says otherwise.  Catalog shapes:
Llama-3.1-8B 8,030,261,248 parameters (32 layers, hidden 4,096, 32 heads, 8 KV heads,
head dim 128, MLP 14,336); Llama-3.1-70B 70,553,706,496 (80 layers, hidden 8,192, 64 heads,
8 KV heads, head dim 128, MLP 28,672, vocab 128,256).  H100 SXM: 989e12 BF16 / 1,979e12 FP8
FLOP/s, 3.35e12 B/s, 85,045,477,376 CUDA-visible bytes; H200 SXM: 4.8e12 B/s, same compute;
NVLink 450e9 B/s one way, 5 µs per collective, plus the fitted 26.36 µs per TP all-reduce
call (``collective_call_s``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import Scenario, get_gpu, get_model
from planner.physics.memory import kv_budget_bytes
from planner.physics.queueing import prefill_room_tokens
from planner.physics.step import decode_step, prefill_step
from planner.simulate import sim_options, simulate
from planner.simulate.arrivals import Request

H100, H200 = get_gpu("h100-sxm"), get_gpu("h200-sxm")
EXACT = dict(bandwidth_efficiency=1.0, compute_efficiency=1.0, step_overhead_s=0.0, layer_overhead_s=0.0)
L70 = get_model("llama-3.1-70b")


def test_70b_fp8_tp8_batch_998_is_a_sum_of_kernels() -> None:
    """Llama-3.1-70B fp8 (KV fp8) on 8 × H200, TP8, decode batch 998 at 1,500 live tokens, per GPU:
    dense GEMMs: F = 2 × 70,553,706,496 × 998 / 8 = 1.760315e13 FLOP / 1,979e12     = 8.894972 ms
      bytes: weights 70,553,706,496 / 8 = 8,819,213,312 B + activations: per token per layer
      (8,192 + 10,240/8 + 8,192/8 + 8,192) + (8,192 + 2·28,672/8 + 28,672/8 + 8,192) = 45,824
      elements × 80 layers × 2 B = 7,331,840 B × 998 = 7,317,176,320 B → 16,136,389,632 B
      / 4.8e12 = 3.361748 ms, so the GEMMs are compute-bound: 8.894972 ms
    attention: KV read 2 × 80 × 1 KV head × 128 × 1 B = 20,480 B/token × 998 × 1,500
      = 30,658,560,000 B / 4.8e12 = 6.387200 ms; its FLOPs 2·256·80·64 × 1,500 × 998 / 8
      = 4.905370e11 at the BF16 rate (the FP8 cache does not make attention FP8) = 0.495993 ms:
      memory-bound, 6.387200 ms
    kernels: 8.894972 + 6.387200 = 15.282172 ms (one max over the whole step: 9.142843 ms)
    all-reduces: 2 × 80 × (5 µs + 26.36 µs + 2·7/8 × 998 × 8,192 × 2 B / 450e9) = 15.191700 ms
      (10.974100 ms without the per-call term, + 160 × 26.36 µs = 4.217600 ms)
    step = 15.282172 + 15.191700 = 30.473872 ms"""
    st = decode_step(model=L70, gpu=H200, weights_dtype="fp8", kv_dtype="fp8", batch_size=998,
                     context_tokens=1500, tp=8, **EXACT)
    assert st.gemm_s == pytest.approx(0.008894972092, rel=1e-9)
    assert st.attention_s == pytest.approx(0.0063872, rel=1e-9)
    assert st.comm_s == pytest.approx(0.015191699911, rel=1e-9)
    assert st.step_s == pytest.approx(0.030473872003, rel=1e-9)
    assert st.compute_s == pytest.approx(0.008894972092 + 0.000495992882, rel=1e-9)


def test_fp8_attention_only_when_the_engine_runs_it() -> None:
    """The same pass's attention FLOPs 4.905370e11 take 0.495993 ms at 989e12 (BF16 kernel on
    an FP8 cache) and 0.247871 ms at 1,979e12 only with ``fp8_attention``; a 32k-token 8B
    prefill (fp8 KV, TP1): attention 524,288 × 32,768²/2 = 2.814750e14 FLOP / 989e12 = 284.606 ms."""
    kw = dict(model=L70, gpu=H200, weights_dtype="fp8", kv_dtype="fp8", batch_size=998, context_tokens=1500,
              tp=8, **EXACT)
    assert decode_step(**kw).compute_s - decode_step(**kw).gemm_s == pytest.approx(0.000495992882, rel=1e-8)
    assert (decode_step(fp8_attention=True, **kw).compute_s - decode_step(**kw).gemm_s
            == pytest.approx(0.000247871127, rel=1e-8))
    pf = prefill_step(model=get_model("llama-3.1-8b"), gpu=H100, weights_dtype="fp8", kv_dtype="fp8", tokens=32768,
                      **EXACT)
    assert pf.attention_s == pytest.approx(0.284605888, rel=1e-6)


def test_decode_replays_a_graph_prefill_pays_the_launches() -> None:
    """A per-layer launch cost of 100 µs: a 70B decode step (CUDA graph) pays none of it,
    without graphs 80 × 100 µs = 8 ms more; a prefill pays it (eager) whatever."""
    kw = dict(model=L70, gpu=H200, weights_dtype="fp8", kv_dtype="fp8", tp=8, bandwidth_efficiency=1.0,
              compute_efficiency=1.0, step_overhead_s=0.0)
    graphs = decode_step(batch_size=1, context_tokens=100, layer_overhead_s=1e-4, **kw)
    eager = decode_step(batch_size=1, context_tokens=100, layer_overhead_s=1e-4, cuda_graphs=False, **kw)
    assert float(eager.step_s) - float(graphs.step_s) == pytest.approx(0.008, rel=1e-9)
    with_launch = prefill_step(tokens=512, layer_overhead_s=1e-4, **kw)
    without = prefill_step(tokens=512, layer_overhead_s=0.0, **kw)
    assert float(with_launch.time_s) - float(without.time_s) == pytest.approx(0.008, rel=1e-9)


def test_engine_memory_accounting_70b_fp8_one_h100() -> None:
    """70B fp8 weights 70,553,706,496 B on one H100 (V = 85,045,477,376 CUDA-visible bytes);
    activation peak at an 8,192-token budget: (8,192 + 256) × 4 × (8,192 + 28,672) × 2 B
    + 1,024 × 128,256 × 4 B + 0.5e9 = 3,516,753,152 B; non-torch 1e9.
    TensorRT-LLM, free fraction 0.95 of what is left: 0.95 × (V − W − 3,516,753,152 − 1e9)
                                                     = 0.95 × 9,975,017,728 = 9,476,266,841.6 B
    (the seeds' 80e9 − W − 4e9 reserved = 5,446,293,504 B: 43% less);
    vLLM 0.9 × V − W − act − 1e9 = 1,470,469,990.4 B; SGLang 0.88 × V − W = 4,286,313,594.88 B."""
    w, act = 70_553_706_496.0, 3_516_753_152.0
    assert kv_budget_bytes(gpu=H100, weight_bytes_per_gpu=w, memory_utilization=0.95, activation_bytes=act,
                           engine="trtllm") == pytest.approx(9_476_266_841.6, rel=1e-12)
    assert kv_budget_bytes(gpu=H100, weight_bytes_per_gpu=w, memory_utilization=0.9, activation_bytes=act,
                           engine="vllm") == pytest.approx(1_470_469_990.4, rel=1e-9)
    assert kv_budget_bytes(gpu=H100, weight_bytes_per_gpu=w, memory_utilization=0.88,
                           engine="sglang") == pytest.approx(4_286_313_594.88, rel=1e-12)
    s = Scenario(gpu="h100-sxm", model="llama-3.1-70b", weights_dtype="fp8", kv_dtype="fp8",
                 serving={"engine": "trtllm", "memory_utilization": 0.95, "chunk_tokens": 8192})
    from planner.sizing.operating import replica_memory
    from planner.spec.context import resolve
    mem = replica_memory(resolve(s), tp=1, pp=1, ep=1)
    assert float(mem.kv_budget_bytes) == pytest.approx(9_476_266_841.6, rel=1e-9)
    with pytest.raises(ValueError, match="engine"):
        kv_budget_bytes(gpu=H100, weight_bytes_per_gpu=w, memory_utilization=0.9, engine="tgi")


def test_prompt_room_is_the_budget_after_the_decodes() -> None:
    """T = 2,048: at B = 1,000 decodes 1,048 prompt tokens fit (8 prompts of 128, with 24 to
    spare); at B = 2,048 none; a 3-token verify pass per sequence (k = 2) at B = 600: 248."""
    assert float(prefill_room_tokens(budget_tokens=2048, batch=1000)) == 1048.0
    assert float(prefill_room_tokens(budget_tokens=2048, batch=2048)) == 0.0
    assert float(prefill_room_tokens(budget_tokens=2048, batch=600, decode_tokens=3)) == 248.0


def test_simulated_iteration_packs_prompts_into_the_budget_after_decodes() -> None:
    """Llama-3.1-8B bf16 on one H100, token budget 1,024, 16 requests of 128/128 at t = 0.
    Activations per token: per layer (4,096 + 6,144 + 4,096 + 4,096) + (4,096 + 28,672 + 14,336
    + 4,096) = 69,632 elements × 32 layers × 2 B = 4,456,448 B.
    Iteration 1 starts at the first arrival with request 0 alone: GEMMs max(2P × 128 / 989e12
      = 2.078 ms, (16,060,522,496 + 128 × 4,456,448) / 3.35e12 = 4.964462 ms) + attention
      max(524,288 × 128²/2 / 989e12, 128 × 131,072 / 3.35e12 = 0.005008 ms) = 4.969470 ms.
    Iteration 2: request 0 decodes (1 of the budget's tokens), leaving 1,023: requests 1–7
      whole (896 tokens) and 127 tokens of request 8.  Decode at B = 1, 129 tokens:
      (16,060,522,496 + 4,456,448) / 3.35e12 = 4.795516 ms + KV 129 × 131,072 / 3.35e12
      = 0.005047 ms = 4.800563 ms; the 1,023 riding tokens: GEMM compute 2P × 1,023 / 989e12
      = 16.612654 ms + attention 524,288 × 1,023²/2 / 989e12 = 0.277393 ms = 16.890046 ms
      → 21.690610 ms; requests 1–7 see their first token at 26.660080 ms.
    Iteration 3: 8 decodes leave 1,016: request 8's last token and requests 9–15 whole
      (897 tokens): request 8 finishes with 9–15, one iteration after 1–7 (the old rule, a
      budget the decodes did not use, gave request 8 all 128 tokens in iteration 2)."""
    s = Scenario(model="llama-3.1-8b", gpu="h100-sxm", serving={"chunk_tokens": 1024},
                 efficiency={"bandwidth": 1.0, "compute": 1.0, "step_overhead_s": 0.0, "layer_overhead_s": 0.0})
    reqs = tuple(Request(arrival_s=0.0, prompt_tokens=128, output_tokens=128) for _ in range(16))
    run = simulate(s, sim_options(replicas=1, max_batch=256), requests=reqs)
    first = run.first_token_s - run.arrival_s
    assert first[0] == pytest.approx(0.004969470166, rel=1e-9)
    assert first[1:8] == pytest.approx([0.026660079840] * 7, rel=1e-9)
    assert first[9:16] == pytest.approx([first[8]] * 7, rel=1e-12)
    assert first[8] > 0.0267


def test_eight_prompts_in_one_pass_attend_one_eighth_of_one_long_prompt() -> None:
    """Llama-3.1-70B, attention FLOPs per (query, key) pair 2·(128 + 128)·80 layers·64 heads
    = 2,621,440.  One 8,192-token prompt: 8,192² / 2 = 33,554,432 pairs → 8.796093e13 FLOP.
    Eight 1,024-token prompts sharing the pass: 8 × 1,024² / 2 = 4,194,304 pairs → 1.099512e13
    FLOP; the linear FLOPs are the 8,192 tokens' either way."""
    kw = dict(model=L70, gpu=H100, weights_dtype="bf16", kv_dtype="bf16", **EXACT)
    long = prefill_step(tokens=8192, **kw)
    shared = prefill_step(tokens=8192, sequences=8, **kw)
    assert float(long.attention_flops) == pytest.approx(8.796093e13, rel=1e-6)
    assert float(shared.attention_flops) == pytest.approx(1.099512e13, rel=1e-6)
    assert float(shared.flops) - float(shared.attention_flops) == pytest.approx(
        float(long.flops) - float(long.attention_flops), rel=1e-12)


@given(n=st.integers(min_value=1, max_value=512), p=st.floats(min_value=0.0, max_value=1.0))
@settings(max_examples=200, deadline=None)
def test_busiest_gpu_binomial_cdf_is_scipys(n: int, p: float) -> None:
    """The binomial CDF the busiest-GPU expert count uses (incomplete beta, no scipy.stats
    import at start-up) is scipy.stats.binom.cdf at every whole x."""
    from scipy.stats import binom

    from planner.physics.kernels import _binomial_cdf

    x = np.arange(n + 3, dtype=float)
    np.testing.assert_allclose(_binomial_cdf(x, np.full_like(x, n), np.full_like(x, p)), binom.cdf(x, n, p),
                               rtol=1e-9, atol=1e-12)


def test_importing_planner_does_not_load_scipy_stats() -> None:
    """scipy.stats costs about half a second to import; the core's start (every CLI call, every
    app replica) must not pay it."""
    import subprocess
    import sys

    code = "import sys, planner; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
