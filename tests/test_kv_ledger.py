"""The KV ledger per layer type: sliding-window and chunked layers hold at most their
window, full layers the whole context, MLA its latent once per layer; dense models'
numbers are the seeds' linear ones."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import ModelSpec, get_model, load_catalog
from planner.physics.kvledger import (
    held_tokens,
    kv_bytes_per_layer_token,
    kv_bytes_per_sequence,
    kv_bytes_per_token_at,
    kv_ledger,
    kv_ledger_text,
)
from planner.physics.memory import kv_bytes_per_token, kv_bytes_per_token_per_gpu
from planner.sizing.plan import plan
from planner.spec.scenario import Scenario

WINDOWED = sorted(m for m, spec in load_catalog().models.items() if spec.has_windowed_layers)
FULL = sorted(m for m, spec in load_catalog().models.items() if not spec.has_windowed_layers)


def test_windowed_models_are_gpt_oss_and_llama4() -> None:
    assert WINDOWED == ["gpt-oss-120b", "gpt-oss-20b", "llama-4-maverick", "llama-4-scout"]


def test_gpt_oss_120b_kv_per_sequence_by_hand() -> None:
    m = get_model("gpt-oss-120b")
    # Per layer per token, bf16: 2 (K, V) × 8 KV heads × 64 head_dim × 2 bytes = 2,048 bytes.
    assert kv_bytes_per_layer_token(m, "bf16") == 2048
    # 36 layers alternate sliding (window 128) and full: 18 of each.
    # 8k context:   18 × min(8,192, 128) + 18 × 8,192 = 2,304 + 147,456 = 149,760 layer-tokens
    #               × 2,048 = 306,708,480 bytes (all-full would be 36 × 8,192 × 2,048 = 603,979,776).
    assert kv_bytes_per_sequence(m, "bf16", 8192) == 306_708_480
    # 128k context: 18 × 128 + 18 × 131,072 = 2,304 + 2,359,296 = 2,361,600 layer-tokens
    #               × 2,048 = 4,836,556,800 bytes (≈ 4.84 GB per sequence; all-full 9.66 GB).
    assert kv_bytes_per_sequence(m, "bf16", 131072) == 4_836_556_800
    # fp8 KV halves it.
    assert kv_bytes_per_sequence(m, "fp8", 131072) == 4_836_556_800 / 2
    # Per token at 128k: 4,836,556,800 / 131,072 = 36,900 bytes (vs 73,728 with every layer full).
    assert kv_bytes_per_token(m, "bf16", 131072) == pytest.approx(36_900.0)
    assert kv_bytes_per_token(m, "bf16") == 36 * 2048


def test_deepseek_r1_mla_kv_per_token() -> None:
    # 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 bytes = 70,272 bytes per token (bf16).
    m = get_model("deepseek-r1")
    assert kv_bytes_per_token(m, "bf16") == 70_272
    assert kv_bytes_per_sequence(m, "bf16", 1000) == 70_272_000
    assert kv_bytes_per_token(m, "fp8") == 35_136
    # The latent is replicated on every TP rank (one latent head, not sharded).
    assert kv_bytes_per_token_per_gpu(model=m, kv_dtype="bf16", tp=8) == 70_272


def test_llama4_scout_chunked_ledger_by_hand() -> None:
    m = get_model("llama-4-scout")
    per = 2 * 8 * 128 * 2  # 4,096 bytes per layer per token
    # 100k context: 36 chunked layers hold 8,192 tokens each, 12 full layers 100,000.
    assert kv_bytes_per_sequence(m, "bf16", 100_000) == (36 * 8192 + 12 * 100_000) * per
    # Below one chunk every layer holds the whole context: linear, as a dense model.
    assert kv_bytes_per_sequence(m, "bf16", 4000) == 48 * 4000 * per


@pytest.mark.parametrize("model_id", FULL)
def test_models_without_windows_stay_linear(model_id: str) -> None:
    m = get_model(model_id)
    k = kv_bytes_per_token(m, "bf16")
    for ctx in (1, 4096, 131072):
        assert kv_bytes_per_sequence(m, "bf16", ctx) == pytest.approx(ctx * k, rel=1e-12)
        assert kv_bytes_per_token(m, "bf16", ctx) == k
        assert kv_bytes_per_token_per_gpu(model=m, kv_dtype="bf16", tp=2, context_tokens=ctx) == \
            kv_bytes_per_token_per_gpu(model=m, kv_dtype="bf16", tp=2)


def _windowed_spec(pattern: tuple[str, ...], window: int, layers: int) -> ModelSpec:
    return ModelSpec(id="w", layers=layers, heads=8, kv_heads=2, head_dim=64, params=1e9,
                     attention_pattern=pattern, sliding_window=window, attention_chunk_size=window)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=8192), st.integers(min_value=0, max_value=2_000_000),
       st.lists(st.sampled_from(["full", "sliding", "chunked"]), min_size=1, max_size=6),
       st.integers(min_value=1, max_value=64), st.sampled_from(["bf16", "fp8", "fp32"]))
def test_a_sliding_window_layer_never_holds_more_than_its_window(window, tokens, pattern, layers, kd) -> None:
    m = _windowed_spec(tuple(pattern), window, layers)
    per = kv_bytes_per_layer_token(m, kd)
    rows = {r.kind: r for r in kv_ledger(m, kd, tokens)}
    for kind in ("sliding", "chunked"):
        if kind in rows:
            assert rows[kind].held_tokens <= window
            assert rows[kind].held_tokens == min(tokens, window)
            assert rows[kind].bytes <= rows[kind].layers * window * per
    if "full" in rows:
        assert rows["full"].held_tokens == tokens
    total = kv_bytes_per_sequence(m, kd, tokens)
    assert total == pytest.approx(sum(r.bytes for r in rows.values()), rel=1e-12)
    # Never more than every layer full, never less than the full layers alone; monotone in tokens.
    assert total <= layers * tokens * per * (1 + 1e-12)
    assert kv_bytes_per_sequence(m, kd, tokens + 1) >= total


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(WINDOWED), st.integers(min_value=1, max_value=1_000_000))
def test_catalog_windowed_layers_cap_at_their_window(model_id: str, tokens: int) -> None:
    m = get_model(model_id)
    for row in kv_ledger(m, "bf16", tokens):
        if row.kind in ("sliding", "chunked"):
            assert row.held_tokens <= (m.sliding_window if row.kind == "sliding" else m.attention_chunk_size)
    # Per-token KV falls (never rises) with context once the windows fill.
    assert kv_bytes_per_token_at(m, "bf16", tokens + 1000) <= kv_bytes_per_token_at(m, "bf16", tokens) * (1 + 1e-12)


def test_held_tokens_is_vectorized() -> None:
    assert list(held_tokens([10, 200, 5000], 128)) == [10, 128, 128]
    assert list(held_tokens([10, 200], None)) == [10, 200]


def test_ledger_text_evaluates_to_the_sequence_bytes() -> None:
    m = get_model("gpt-oss-120b")
    formula, substituted = kv_ledger_text(m, "bf16", 8192)
    assert "sliding-window layers × min(context, window)" in formula and "attention sinks" in formula
    assert substituted == "(18 × min(8,192, 128) + 18 × 8,192 + 36 × 0) × 2,048"
    from tests.test_derivations import check  # the interval evaluator every derivation is held to
    check("memory.kv_bytes_per_sequence", substituted, kv_bytes_per_sequence(m, "bf16", 8192))


def test_plan_shows_the_ledger_and_sizes_capacity_with_it() -> None:
    s = Scenario(gpu="h100-sxm", model="gpt-oss-120b", weights_dtype="mxfp4", parallel={"tp": 2},
                 workload={"prompt_tokens": 8000, "output_tokens": 192})
    p = plan(s)
    d = p.derivations["memory.kv_bytes_per_sequence"]
    assert "min(context, window)" in d.formula and "min(8,192, 128)" in d.substituted
    assert p.memory.kv_bytes_per_sequence == pytest.approx(306_708_480)
    # Capacity: budget / per-sequence KV on a GPU (KV heads split over TP=2: half the ledger each).
    per_gpu_seq = 306_708_480 / 2
    assert p.memory.max_sequences == pytest.approx(p.memory.kv_budget_bytes / per_gpu_seq, rel=1e-9)


def test_windowed_decode_reads_less_kv_than_all_full() -> None:
    # The decode step's attention bytes follow the ledger: at 128k, gpt-oss reads about half the all-full KV.
    from planner.physics.step import decode_step
    from planner.spec.catalog import get_gpu
    m, g = get_model("gpt-oss-120b"), get_gpu("h200-sxm")
    full = m.model_copy(update={"attention_pattern": ("full",)})
    kw = dict(gpu=g, weights_dtype="mxfp4", kv_dtype="bf16", batch_size=32, context_tokens=131072)
    windowed_bytes = decode_step(model=m, **kw).bytes_per_gpu
    full_bytes = decode_step(model=full, **kw).bytes_per_gpu
    kv_saved = 32 * (36 * 131072 - (18 * 128 + 18 * 131072)) * 2048
    assert full_bytes - windowed_bytes == pytest.approx(kv_saved, rel=1e-9)


def _pairs_by_sum(kind: str, window: int, n: int, c: int) -> float:
    """Discrete check of the continuous pair count: Σ over new positions of the tokens held, minus ½ per token."""
    total = 0.0
    for p in range(c, c + n):  # 0-based position of each new token
        if kind == "sliding":
            total += min(p + 0.5, window)
        else:
            total += (p % window) + 0.5
    return total


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["sliding", "chunked"]), st.integers(min_value=1, max_value=300),
       st.integers(min_value=0, max_value=900), st.integers(min_value=0, max_value=900))
def test_prefill_pairs_match_the_sum_over_positions(kind, window, n, c) -> None:
    from planner.physics.kvledger import attention_layer_pairs
    m = _windowed_spec((kind,), window, 1)
    got = attention_layer_pairs(m, n, c)
    # The continuous ∫ held(p) dp equals the midpoint sum exactly for these piecewise-linear shapes,
    # except within one token of a window edge (at most ½ pair per crossing).
    edges = 1 + (c + n) // window
    assert abs(got - _pairs_by_sum(kind, window, n, c)) <= 0.5 * edges + 1e-9
    assert got <= n * window + 1e-9  # a windowed layer never attends past its window


def test_full_layers_keep_the_causal_pairs() -> None:
    from planner.physics.kvledger import attended_layer_tokens, attention_layer_pairs
    m = get_model("llama-3.1-8b")
    assert attention_layer_pairs(m, 1000, 500) == 32 * (1000 * 500 + 1000 * 1000 / 2)
    assert attended_layer_tokens(m, 4096) == 32 * 4096


def test_gpt_oss_prefill_attention_by_hand() -> None:
    from planner.physics.kvledger import attention_layer_pairs
    m = get_model("gpt-oss-120b")
    # 8,192-token prompt, nothing cached: 18 full layers × 8,192²/2 + 18 sliding layers × (128²/2 + (8,192 − 128) × 128).
    full = 18 * 8192 * 8192 / 2
    sliding = 18 * (128 * 128 / 2 + (8192 - 128) * 128)
    assert attention_layer_pairs(m, 8192, 0) == pytest.approx(full + sliding, rel=1e-12)


def test_contiguous_reservation_uses_the_ledger_at_max_len() -> None:
    # Pre-paged worst case: the whole max_context_tokens (131,072 for gpt-oss-120b) by the ledger,
    # 4,836,556,800 bytes (see the 128k figure above), not 131,072 × the per-token KV at the plan's context.
    p = plan(Scenario(gpu="h200-sxm", model="gpt-oss-120b", weights_dtype="mxfp4", parallel={"tp": 1},
                      workload={"prompt_tokens": 1000, "output_tokens": 200}))
    assert p.memory.contiguous_reservation_bytes == pytest.approx(4_836_556_800)
    # A dense model's is unchanged: max_len × KV/token.
    d = plan(Scenario(gpu="h100-sxm", model="llama-3.1-8b", parallel={"tp": 1}))
    assert d.memory.contiguous_reservation_bytes == 131072 * d.memory.kv_bytes_per_token
