"""Properties of the physics that must hold for any input."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner import (
    Scenario,
    decode_step,
    get_gpu,
    get_model,
    kv_bytes_per_token_per_gpu,
    max_sequences,
    param_counts,
    peak_flops_per_s,
    plan,
    weight_bytes_per_gpu,
)
from tests.strategies import batches, contexts, efficiencies, gpu_ids, kv_dtypes, model_ids, tps, weights_dtypes

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(gpu_ids, model_ids, weights_dtypes, kv_dtypes, batches, contexts, tps, efficiencies, efficiencies)
def test_decode_never_beats_the_roofline(gid, mid, wd, kd, b, s, tp, eb, ec) -> None:
    gpu, model = get_gpu(gid), get_model(mid)
    st_ = decode_step(model=model, gpu=gpu, weights_dtype=wd, kv_dtype=kd, batch_size=b, context_tokens=s, tp=tp,
                      bandwidth_efficiency=eb, compute_efficiency=ec)
    tok_s = b / st_.step_s
    # Compute roof: tokens/s × 2 × P_active ≤ GPUs × peak.
    assert tok_s * 2 * param_counts(model).active <= tp * peak_flops_per_s(gpu, wd) * (1 + 1e-9)
    # Memory roof: each GPU must stream its weights+KV share each step.
    assert st_.step_s * gpu.hbm_bytes_per_s >= st_.bytes_per_gpu * (1 - 1e-9)


@FAST
@given(model_ids, kv_dtypes, tps, contexts, st.integers(min_value=1, max_value=100_000))
def test_more_context_never_raises_max_sequences(mid, kd, tp, s, extra) -> None:
    kg = kv_bytes_per_token_per_gpu(model=get_model(mid), kv_dtype=kd, tp=tp)
    a = max_sequences(kv_budget_bytes=50e9, kv_bytes_per_token_per_gpu=kg, context_tokens=s)
    b = max_sequences(kv_budget_bytes=50e9, kv_bytes_per_token_per_gpu=kg, context_tokens=s + extra)
    assert b <= a


@FAST
@given(gpu_ids, model_ids, weights_dtypes, batches, st.integers(min_value=1, max_value=512), contexts, tps)
def test_bigger_batch_more_replica_throughput_less_per_sequence(gid, mid, wd, b, db, s, tp) -> None:
    kw = dict(model=get_model(mid), gpu=get_gpu(gid), weights_dtype=wd, kv_dtype="bf16", context_tokens=s, tp=tp,
              bandwidth_efficiency=0.8, compute_efficiency=0.5, step_overhead_s=1e-3)
    small = decode_step(batch_size=b, **kw)
    big = decode_step(batch_size=b + db, **kw)
    assert (b + db) / big.step_s >= b / small.step_s * (1 - 1e-9)
    assert 1 / big.step_s <= 1 / small.step_s * (1 + 1e-9)


@FAST
@given(model_ids, weights_dtypes, st.sampled_from([1, 2, 4]))
def test_tp_splits_weight_bytes_per_gpu(mid, wd, tp) -> None:
    m = get_model(mid)
    one = weight_bytes_per_gpu(model=m, weights_dtype=wd, tp=tp)
    two = weight_bytes_per_gpu(model=m, weights_dtype=wd, tp=2 * tp)
    assert two * 2 == pytest.approx(one, rel=1e-12)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu_ids, model_ids, weights_dtypes, kv_dtypes, st.sampled_from([1, 2, 4, 8]))
def test_every_fitting_combination_is_finite(gid, mid, wd, kd, tp) -> None:
    assume(get_model(mid).heads % tp == 0)
    p = plan(Scenario(gpu=gid, model=mid, weights_dtype=wd, kv_dtype=kd, parallel={"tp": tp}))
    assume(p.memory.fits)
    values = [p.decode.step_s, p.decode.tok_s_per_replica, p.decode.mbu, p.decode.mfu, p.prefill.time_s, p.ttft_s,
              p.memory.max_sequences, p.roofline.decode_intensity_flop_per_byte]
    assert all(math.isfinite(v) and v > 0 for v in values)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu_ids, st.sampled_from(["llama-3.1-405b", "deepseek-v3", "qwen2.5-72b", "llama-3.1-70b"]),
       st.sampled_from(["bf16", "fp16"]), kv_dtypes)
def test_a_combination_that_does_not_fit_says_so(gid, mid, wd, kd) -> None:
    # 16-bit weights of a ≥ 70B model on one GPU: ≥ 141 GB against at most 192 GB of HBM, less the KV room.
    p = plan(Scenario(gpu=gid, model=mid, weights_dtype=wd, kv_dtype=kd, parallel={"tp": 1}))
    assume(not p.memory.fits)
    assert p.memory.kv_budget_bytes <= 0 or p.memory.max_sequences < 1
    assert any("does not fit" in w for w in p.warnings)
