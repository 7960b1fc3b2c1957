"""Issue 13's invariants, as hypothesis properties over the catalog."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner import ScenarioError, get_gpu, get_model, param_counts, plan, scenario_from_dict
from planner.physics.queueing import pipelined_prefill
from planner.physics.roofline import attention_peak_flops_per_s, peak_flops_per_s
from planner.physics.step import all_to_all_s, collective_s, decode_step, p2p_s, prefill_step
from tests.strategies import CAT, gpu_ids, kv_dtypes, model_ids

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MOE_IDS = st.sampled_from(sorted(m for m, spec in CAT.models.items() if spec.is_moe))
DTYPES = st.sampled_from(["bf16", "fp8", "int4"])


@st.composite
def plans(draw: st.DrawFn, *, pp: int = 1) -> dict:
    gid, mid = draw(gpu_ids), draw(model_ids)
    model = get_model(mid)
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if model.heads % t == 0]))
    ep = draw(st.sampled_from([e for e in (1, 2, 8) if model.is_moe and model.experts % e == 0] or [1]))
    prompt = draw(st.integers(min_value=64, max_value=60_000))
    return {
        "gpu": gid, "model": mid, "weights_dtype": draw(DTYPES), "kv_dtype": draw(kv_dtypes),
        "parallel": {"tp": tp, "pp": pp, "ep": ep},
        "workload": {"prompt_tokens": prompt, "output_tokens": draw(st.integers(min_value=2, max_value=1000)),
                     "requests_per_s": draw(st.floats(min_value=0.5, max_value=50)),
                     "prefix_tokens": draw(st.integers(min_value=0, max_value=prompt)),
                     "prefix_hit_rate": draw(st.floats(min_value=0, max_value=1))},
        "slo": {"ttft_s": 60.0, "itl_s": 0.5},
        "serving": {"mode": draw(st.sampled_from(["colocated", "disaggregated"])),
                    "chunk_tokens": draw(st.sampled_from([512, 2048, 8192]))},
    }


def _plan(data: dict):  # noqa: ANN202 - a Plan
    try:
        sc = scenario_from_dict(data)
    except ScenarioError:
        assume(False)
        raise
    return plan(sc)


@SETTINGS
@given(plans())
def test_ttft_and_chunked_ttft_never_below_the_dedicated_prefill(data: dict) -> None:
    p = _plan(data)
    assume(p.memory.fits)
    dedicated = p.prefill.time_s
    assert p.prefill.chunked_ttft_s >= dedicated * (1 - 1e-9)
    assert p.ttft_s >= dedicated * (1 - 1e-9)


@SETTINGS
@given(MOE_IDS, gpu_ids, st.sampled_from([1, 2, 4, 8]), st.integers(min_value=1, max_value=512),
       st.integers(min_value=0, max_value=32_000))
def test_no_all_to_all_at_ep1(mid: str, gid: str, tp: int, batch: int, context: int) -> None:
    model, gpu = get_model(mid), get_gpu(gid)
    assume(model.heads % tp == 0)
    st_ = decode_step(model=model, gpu=gpu, weights_dtype="bf16", kv_dtype="bf16", batch_size=batch,
                      context_tokens=context, tp=tp, ep=1)
    tp_only = collective_s(gpu=gpu, group=tp, message_bytes=batch * model.hidden * 2.0, count=2 * model.layers)
    assert st_.comm_s == tp_only
    assert all_to_all_s(gpu=gpu, group=tp, ep=1, bytes_per_gpu=1e9, count=2 * model.layers) == 0.0


@SETTINGS
@given(gpu_ids, model_ids, DTYPES, kv_dtypes, st.integers(min_value=1, max_value=2048),
       st.integers(min_value=1, max_value=200_000), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 8]),
       st.floats(min_value=0.05, max_value=1.0), st.floats(min_value=0.05, max_value=1.0))
def test_decode_tokens_per_s_never_beat_the_roofline(gid, mid, wd, kd, b, s, tp, ep, eb, ec) -> None:
    gpu, model = get_gpu(gid), get_model(mid)
    assume(model.heads % tp == 0)
    if not model.is_moe or model.experts % ep:
        ep = 1
    st_ = decode_step(model=model, gpu=gpu, weights_dtype=wd, kv_dtype=kd, batch_size=b, context_tokens=s, tp=tp,
                      ep=ep, bandwidth_efficiency=eb, compute_efficiency=ec)
    tok_s = b / st_.step_s
    fastest = max(peak_flops_per_s(gpu, wd), attention_peak_flops_per_s(gpu, kd))
    # Compute roof: every token costs at least 2 × P_active FLOPs spread over the replica's GPUs.
    assert tok_s * 2 * param_counts(model).active <= tp * ep * fastest * (1 + 1e-9)
    # Memory roof: each GPU streams its weights and KV share every step.
    assert st_.step_s * gpu.hbm_bytes_per_s >= st_.bytes_per_gpu * (1 - 1e-9)


@SETTINGS
@given(plans(), st.floats(min_value=0, max_value=1), st.floats(min_value=0, max_value=1))
def test_more_prefix_hits_never_lower_max_sequences(data: dict, h1: float, h2: float) -> None:
    lo, hi = sorted((h1, h2))
    assume(data["workload"]["prefix_tokens"] > 0)
    a = _plan({**data, "workload": {**data["workload"], "prefix_hit_rate": lo}})
    b = _plan({**data, "workload": {**data["workload"], "prefix_hit_rate": hi}})
    assert b.memory.max_sequences >= a.memory.max_sequences * (1 - 1e-12)
    assert b.operating_point.max_sequences >= a.operating_point.max_sequences * (1 - 1e-12)


@SETTINGS
@given(gpu_ids, model_ids, DTYPES, st.sampled_from([1, 2, 4, 8]), st.integers(min_value=64, max_value=32_000))
def test_pp2_prefill_replica_outpaces_pp1_with_the_same_gpus_per_stage(gid, mid, wd, tp, prompt) -> None:
    gpu, model = get_gpu(gid), get_model(mid)
    assume(model.heads % tp == 0 and tp <= gpu.gpus_per_node)
    kw = dict(model=model, gpu=gpu, weights_dtype=wd, kv_dtype="bf16", tokens=prompt, tp=tp,
              bandwidth_efficiency=0.9, compute_efficiency=0.5, layer_overhead_s=1e-4)
    one, _ = pipelined_prefill(prefill_s=float(prefill_step(pp=1, **kw).time_s), stages=1, microbatches=1)
    two, _ = pipelined_prefill(prefill_s=float(prefill_step(pp=2, **kw).time_s), stages=2, microbatches=1)
    assert 1 / two > 1 / one
    # The hop is what PP2 pays: one point-to-point send of the prompt's activations.
    hop = p2p_s(gpu=gpu, span=2 * tp, message_bytes=prompt * model.hidden * 2.0, count=1)
    assert float(prefill_step(pp=2, **kw).time_s) == pytest.approx(float(prefill_step(pp=1, **kw).time_s) + hop,
                                                                   rel=1e-12)


@given(model_ids, st.integers(min_value=1, max_value=16), st.integers(min_value=16, max_value=8_192))
@SETTINGS
def test_prompts_sharing_a_pass_attend_only_to_their_own_tokens(mid: str, k: int, n: int) -> None:
    """A pass of k prompts of n tokens: the linear FLOPs of k·n tokens, the attention of k
    separate prompts (k × one prompt's), never more than one k·n-token prompt's."""
    model, gpu = get_model(mid), get_gpu("h100-sxm")
    kw = dict(model=model, gpu=gpu, weights_dtype="bf16", kv_dtype="bf16")
    one = prefill_step(tokens=n, **kw)
    shared = prefill_step(tokens=k * n, sequences=k, **kw)
    long = prefill_step(tokens=k * n, **kw)
    assert float(shared.attention_flops) == pytest.approx(k * float(one.attention_flops), rel=1e-9)
    assert float(shared.flops) - float(shared.attention_flops) == pytest.approx(
        float(long.flops) - float(long.attention_flops), rel=1e-12)
    assert float(shared.attention_flops) <= float(long.attention_flops) * (1 + 1e-12)
    assert float(shared.time_s) <= float(long.time_s) * (1 + 1e-9)
