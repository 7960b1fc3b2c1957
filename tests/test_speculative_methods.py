"""Speculative methods (planner.physics.speculative): draft_model | eagle | mtp, acceptance per
position with sourced defaults, each drafter's forwards timed by the step model, golden MTP
rows by hand at batch 1 and 128, and the simulator drawing the same acceptance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import Scenario, plan
from planner.errors import ScenarioError
from planner.physics.speculative import (
    EAGLE3_DEPTH,
    EAGLE3_TAU,
    EAGLE_ACCEPTANCE,
    MTP_ACCEPTANCE,
    acceptance_from_tau,
    acceptance_positions,
    drafter_for,
    mtp_module_params,
    tokens_per_verify,
)
from planner.physics.step import decode_cycle, decode_step
from planner.physics.terms import physics_terms
from planner.simulate import sim_options, simulate
from planner.simulate.speculation import spec_draws
from planner.spec.catalog import get_model
from planner.spec.context import resolve
from planner.spec.scenario import scenario_from_dict

DSV3 = {"model": "deepseek-v3", "gpu": "h200-sxm", "weights_dtype": "fp8", "kv_dtype": "bf16", "parallel": {"tp": 8}}
MTP1 = {"draft_tokens": 1, "method": "mtp"}

# DeepSeek-V3's shapes (config.json): h = 7168, 256 routed experts of 3·h·2048, top-8, 1 shared,
# MLA q_lora 1536, kv_lora 512, rope 64, nope 128, v 128, 128 heads, vocab 129,280, 61 layers (3 dense).
H, V = 7168, 129_280
EXPERT = 3 * H * 2048  # 44,040,192 parameters per routed expert
ATTN = (H * 1536 + 1536 + 1536 * 128 * 192  # q_a (+ its norm) and q_b
        + H * 576 + 512 + 512 * 128 * 256  # kv_a (+ its norm) and kv_b
        + 128 * 128 * H)  # o
BLOCK_NON_EXPERT = ATTN + 2 * H + EXPERT + H * 256  # + 2 norms, the shared expert, the router
MTP_PARAMS = BLOCK_NON_EXPERT + 256 * EXPERT + 2 * H * H + 2 * H  # + the 2h → h projection and its 2 norms


def test_method_defaults_keep_old_scenarios_meaning() -> None:
    assert Scenario().speculative.method == "eagle"
    assert Scenario(speculative={"draft_tokens": 2, "draft_model": "llama-3.1-8b"}).speculative.method == "draft_model"
    old = Scenario(speculative={"draft_tokens": 4, "acceptance": 0.7, "draft_cost": 0.05})
    r = resolve(old)
    dr = drafter_for(old.speculative, r.model)
    assert dr is not None and dr.method == "eagle" and dr.acceptance == (0.7,) * 4 and dr.acceptance_origin == "scenario"
    # an old scenario's fixed draft cost keeps its meaning: cycle = verify + k × draft_cost × step
    cyc = decode_cycle(batch_size=8, context_tokens=1000, draft_tokens=4, drafter=dr, **r.step_kwargs())
    verify = decode_step(batch_size=8, context_tokens=1000, tokens_per_sequence=5, **r.step_kwargs())
    assert float(cyc.cycle_s) == pytest.approx(float(verify.step_s) + 4 * 0.05 * float(cyc.step.step_s), rel=1e-12)


@pytest.mark.parametrize(("spec", "model", "pattern"), [
    ({"draft_tokens": 2, "method": "mtp"}, "llama-3.1-8b", r"speculative.method 'mtp'.*no multi-token-prediction"),
    ({"draft_tokens": 2, "method": "draft_model"}, "llama-3.1-70b", r"speculative.method 'draft_model' needs "
                                                                     r"speculative.draft_model"),
    ({"draft_tokens": 2, "method": "eagle", "draft_model": "llama-3.1-8b"}, "llama-3.1-70b",
     r"speculative.method 'eagle' drafts without a separate model"),
    ({"draft_tokens": 2, "method": "medusa"}, "llama-3.1-8b", r"speculative.method"),
])
def test_a_method_the_model_cannot_run_names_the_field(spec: dict[str, object], model: str, pattern: str) -> None:
    with pytest.raises(ScenarioError, match=pattern):
        scenario_from_dict({"model": model, "speculative": spec})


def test_mtp_only_where_the_checkpoint_has_the_module() -> None:
    assert get_model("deepseek-v3").mtp_layers == 1  # config.json num_nextn_predict_layers
    assert get_model("llama-3.1-70b").mtp_layers == 0
    Scenario(**DSV3, speculative=MTP1)  # accepted
    Scenario(model="llama-3.1-8b", speculative={"draft_tokens": 0, "method": "mtp"})  # off: nothing to run


def test_tokens_per_verify_by_hand() -> None:
    assert tokens_per_verify((0.85,), 1) == pytest.approx(1.85)
    assert tokens_per_verify((0.85,), 3) == pytest.approx(1 + 0.85 + 0.85**2 + 0.85**3)  # the tuple repeats
    assert tokens_per_verify((0.9, 0.8, 0.5), 3) == pytest.approx(1 + 0.9 + 0.9 * 0.8 + 0.9 * 0.8 * 0.5)  # 2.98
    assert tokens_per_verify((0.9, 0.8, 0.5), 2) == pytest.approx(2.62)  # cut at k
    assert acceptance_positions((0.9, 0.5), 4) == (0.9, 0.5, 0.5, 0.5)
    assert tokens_per_verify(0.7, 4) == pytest.approx((1 - 0.7**5) / (1 - 0.7))  # one α: the seeds' series


def test_sourced_defaults() -> None:
    assert MTP_ACCEPTANCE.per_position == (0.85,) and MTP_ACCEPTANCE.origin == "paper"
    assert "2412.19437" in MTP_ACCEPTANCE.source and "5.4.3" in MTP_ACCEPTANCE.source
    # EAGLE-3's τ = 6.5 at 7 draft tokens: (1 − α⁸) / (1 − α) = 6.5 → α ≈ 0.94
    a = acceptance_from_tau(EAGLE3_TAU, EAGLE3_DEPTH)
    assert (1 - a**8) / (1 - a) == pytest.approx(6.5, rel=1e-9)
    assert EAGLE_ACCEPTANCE.per_position == (round(a, 3),) == (0.94,) and "2503.01840" in EAGLE_ACCEPTANCE.source
    sc = Scenario(model="llama-3.1-70b", speculative={"draft_tokens": 3, "draft_model": "llama-3.1-8b"})
    dr = drafter_for(sc.speculative, resolve(sc).model)
    assert dr is not None and dr.acceptance == (0.7,) * 3 and dr.acceptance_origin == "assumed"


def test_mtp_module_memory_by_hand() -> None:
    # 11,610,060,800 parameters: one MoE block (attention 187.1M + 2 norms + 256 experts + shared + router)
    # + the projection 2h² + 2 norms; embedding and head are the target's (the checkpoint's 14B counts copies).
    assert MTP_PARAMS == 11_610_060_800
    assert mtp_module_params(get_model("deepseek-v3")) == MTP_PARAMS
    m = plan(Scenario(**DSV3, speculative=MTP1)).memory
    assert "MTP module" in m.draft_name
    assert m.draft_weight_bytes == MTP_PARAMS * 1.0  # fp8: one byte per weight
    assert m.draft_weight_bytes_per_gpu == MTP_PARAMS / 8  # sharded over TP 8
    assert m.draft_kv_bytes_per_token == (512 + 64) * 2  # one more MLA layer of latent KV, bf16
    assert m.draft_kv_bytes_per_token_per_gpu == (512 + 64) * 2  # MLA: every rank holds the whole latent


def _mtp_at(batch: int) -> tuple[object, object]:
    sc = Scenario(**DSV3, speculative=MTP1, serving={"batch_size": batch, "context_tokens": 2048})
    return sc, plan(sc)


@pytest.mark.parametrize("batch", [1, 128])
def test_mtp_golden_by_hand(batch: int) -> None:
    with physics_terms(mtp_acceptance=0.0):  # the paper's acceptance (the fitted default is tested below)
        _mtp_golden_by_hand(batch)


def test_mtp_default_is_the_fitted_acceptance_and_says_so() -> None:
    """MTP's default acceptance is the fitted term (calibrated on measured MTP runs), the paper's
    0.85 where the term is off; a scenario's own acceptance wins over both."""
    from planner.spec.fitted import FITTED_TERMS

    a = FITTED_TERMS["mtp_acceptance"]
    assert 0.0 < a < 0.85  # measured MTP runs accept less than the report's second-token 85-90%
    sc = Scenario(**DSV3, speculative=MTP1)
    dr = drafter_for(sc.speculative, resolve(sc).model)
    assert dr is not None and dr.acceptance == (round(a, 3),) and dr.acceptance_origin == "calibrated"
    assert plan(sc).decode.speculative_tokens_per_pass == pytest.approx(1 + round(a, 3))
    with physics_terms(mtp_acceptance=0.0):
        dr0 = drafter_for(sc.speculative, resolve(sc).model)
        assert dr0 is not None and dr0.acceptance == (0.85,) and dr0.acceptance_origin == "paper"
    own = Scenario(**DSV3, speculative={**MTP1, "acceptance": 0.9})
    dr1 = drafter_for(own.speculative, resolve(own).model)
    assert dr1 is not None and dr1.acceptance == (0.9,) and dr1.acceptance_origin == "scenario"


def test_mtp_default_is_the_engines_own_where_it_has_one() -> None:
    """On serving.engine trtllm, MTP's default acceptance is TensorRT-LLM's own fitted term (its
    runs accept more per position than SGLang's on the same rows); every other engine keeps
    mtp_acceptance; with the engine's term off, the engine falls back to mtp_acceptance.  The
    plan and the simulator's drafter read the same value."""
    from planner.spec.fitted import FITTED_TERMS

    a, a_trt = FITTED_TERMS["mtp_acceptance"], FITTED_TERMS["mtp_acceptance_trtllm"]
    assert 0.0 < a < a_trt < 0.85
    trt = Scenario(**DSV3, speculative=MTP1, serving={"engine": "trtllm"})
    sg = Scenario(**DSV3, speculative=MTP1, serving={"engine": "sglang"})
    for sc, want in ((trt, a_trt), (sg, a)):
        r = resolve(sc)
        dr = drafter_for(sc.speculative, r.model, sc.serving.engine)
        assert dr is not None and dr.acceptance == (round(want, 3),) and dr.acceptance_origin == "calibrated"
        assert plan(sc).decode.speculative_tokens_per_pass == pytest.approx(1 + round(want, 3))
    dr_trt = drafter_for(trt.speculative, resolve(trt).model, "trtllm")
    assert dr_trt is not None and "TensorRT-LLM" in dr_trt.acceptance_source
    with physics_terms(mtp_acceptance_trtllm=0.0):
        off = drafter_for(trt.speculative, resolve(trt).model, "trtllm")
        assert off is not None and off.acceptance == (round(a, 3),)
    # A faster acceptance means fewer verify passes: the TensorRT-LLM plan's ITL is the lower one.
    assert plan(trt).decode.itl_s < plan(trt.model_copy(update={"speculative": trt.speculative.model_copy(
        update={"acceptance": a}), "serving": trt.serving})).decode.itl_s


def _mtp_golden_by_hand(batch: int) -> None:
    """DeepSeek-V3 fp8, TP8 on H200, MTP with k = 1 at context 2,048.

    tokens per verify = 1 + 0.85 = 1.85 (DeepSeek-V3 report §5.4.3);
    experts a MoE layer touches with n tokens: 256 × (1 − (1 − 8/256)^n):
      batch 1:   step n = 1 → 8;       verify n = 2 → 256 × (1 − 0.96875²) = 15.75
      batch 128: step n = 128 → 256 × (1 − 0.96875^128) = 251.6;  verify n = 256 → 255.92
    so the verify pass streams 58 × (15.75 − 8) × 44,040,192 / 8 more expert bytes per GPU at batch 1
    (+2.5 GB: it almost doubles the expert stream), and 58 × 4.32 × 44.0M / 8 (+1.4 GB) at 128;
    the draft forward (the MTP block over the 2 settled positions) streams its non-expert
    1,159,683,072 + the experts 2 positions per sequence touch, over 8 GPUs;
    speedup = 1.85 × step / (verify + draft)."""
    sc, p = _mtp_at(batch)
    r = resolve(sc)
    kw = r.step_kwargs()
    q = 1 - 8 / 256
    touched = {n: 256 * (1 - q**n) for n in (1, 2, 128, 256)}
    assert touched[1] == 8.0 and touched[2] == pytest.approx(15.75)
    if batch == 128:
        assert touched[128] == pytest.approx(251.60, abs=0.01) and touched[256] == pytest.approx(255.92, abs=0.01)
    step = decode_step(batch_size=batch, context_tokens=2048, **kw)
    verify = decode_step(batch_size=batch, context_tokens=2048, tokens_per_sequence=2, **kw)
    extra = 58 * (touched[2 * batch] - touched[batch]) * EXPERT / 8  # fp8: bytes = parameters
    assert float(verify.bytes_per_gpu) - float(step.bytes_per_gpu) == pytest.approx(extra, rel=1e-9)
    dr = drafter_for(sc.speculative, r.model)
    assert dr is not None
    draft = decode_step(model=dr.timing_model, gpu=r.gpu, weights_dtype="fp8", kv_dtype="bf16", batch_size=batch,
                        context_tokens=2048, tokens_per_sequence=2, tp=8, pp=1, ep=1,
                        bandwidth_efficiency=kw["bandwidth_efficiency"], compute_efficiency=kw["compute_efficiency"],
                        step_overhead_s=0.0, layer_overhead_s=kw["layer_overhead_s"],
                        collective_latency_s=kw["collective_latency_s"])
    draft_bytes = (V * H + H + BLOCK_NON_EXPERT + touched[2 * batch] * EXPERT) / 8 + batch * 2048 * 576 * 2
    assert float(draft.bytes_per_gpu) == pytest.approx(draft_bytes, rel=1e-9)
    d = p.derivations
    assert p.decode.speculative_tokens_per_pass == pytest.approx(1.85)
    hand = 1.85 * float(step.step_s) / (float(verify.step_s) + float(draft.step_s))
    assert p.decode.speculative_speedup == pytest.approx(hand, rel=1e-9)
    assert d["decode.speculative_speedup"].value == pytest.approx(hand, rel=1e-9)
    assert 1.0 < p.decode.speculative_speedup < 1.85


def test_the_verify_pass_saves_less_expert_stream_at_small_batch() -> None:
    """At batch 1 the second verified position nearly doubles the experts streamed (8 → 15.75),
    at 128 it adds 1.7% (251.6 → 255.9): the weight-stream cost of verifying is a MoE's at small batch."""
    r = resolve(Scenario(**DSV3))
    kw = r.step_kwargs()
    ratio = {}
    for b in (1, 128):
        s = decode_step(batch_size=b, context_tokens=2048, **kw)
        v = decode_step(batch_size=b, context_tokens=2048, tokens_per_sequence=2, **kw)
        ratio[b] = float(v.bytes_per_gpu) / float(s.bytes_per_gpu)
    assert ratio[1] > 1.3 and ratio[128] < 1.05


def test_derivation_names_method_acceptance_and_origin() -> None:
    with physics_terms(mtp_acceptance=0.0):
        _, p = _mtp_at(1)
    d = p.derivations
    tpp, sp = d["decode.speculative_tokens_per_pass"], d["decode.speculative_speedup"]
    assert "mtp" in tpp.formula and "MTP module" in tpp.formula and "from the paper" in tpp.formula
    assert "DeepSeek-V3 Technical Report" in tpp.formula and tpp.substituted == "1 + 0.85"
    assert tpp.origin == "default"
    assert "verify step over 2 positions" in sp.formula
    fitted = _mtp_at(1)[1].derivations["decode.speculative_tokens_per_pass"]
    assert fitted.origin == "calibrated" and "mtp_acceptance" in fitted.formula and "calibrated" in fitted.formula
    own = plan(Scenario(**DSV3, speculative={**MTP1, "acceptance_per_position": [0.6]},
                        serving={"batch_size": 1, "context_tokens": 2048})).derivations
    assert own["decode.speculative_tokens_per_pass"].origin == "input"
    assert "the scenario's" in own["decode.speculative_tokens_per_pass"].formula


# Speculation on dense and MoE targets, batches 1 … 2,048 (the verify pass's own tokens up to 34k).
_TARGETS = ["llama-3.1-8b", "llama-3.1-70b", "deepseek-v3"]


@st.composite
def _spec_cases(draw: st.DrawFn) -> tuple[dict[str, object], int, float]:
    model = draw(st.sampled_from(_TARGETS))
    method = draw(st.sampled_from({"deepseek-v3": ["eagle", "mtp"], "llama-3.1-70b": ["eagle", "draft_model"]}
                                  .get(model, ["eagle"])))
    k = draw(st.integers(min_value=1, max_value=8))
    spec: dict[str, object] = {"draft_tokens": k, "method": method}
    if method == "draft_model":
        spec["draft_model"] = "llama-3.1-8b"
    if draw(st.booleans()):
        spec["acceptance_per_position"] = draw(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=k))
    tp = 8 if model == "deepseek-v3" else draw(st.sampled_from([1, 2, 4, 8]))
    sc = {"model": model, "gpu": draw(st.sampled_from(["h100-sxm", "h200-sxm", "b200"])),
          "weights_dtype": draw(st.sampled_from(["bf16", "fp8"])), "parallel": {"tp": tp}, "speculative": spec}
    return sc, draw(st.integers(min_value=1, max_value=2048)), float(draw(st.integers(min_value=16, max_value=32_000)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_spec_cases())
def test_speedup_never_exceeds_the_tokens_per_verify(case: tuple[dict[str, object], int, float]) -> None:
    """speedup = τ × step / (verify + drafts) ≤ τ: verifying k + 1 positions never costs less than one
    position's step, and the drafts are never free."""
    data, batch, ctx = case
    sc = Scenario(**data)
    r = resolve(sc)
    dr = drafter_for(sc.speculative, r.model)
    cyc = decode_cycle(batch_size=batch, context_tokens=ctx, draft_tokens=sc.speculative.draft_tokens, drafter=dr,
                       **r.step_kwargs())
    speedup = float(cyc.step.step_s) * cyc.tokens_per_pass / float(cyc.cycle_s)
    assert float(cyc.verify_s) >= float(cyc.step.step_s) * (1 - 1e-12)
    assert float(cyc.draft_s) > 0
    assert speedup <= cyc.tokens_per_pass * (1 + 1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_spec_cases())
def test_speedup_non_increasing_in_batch_once_compute_bound(case: tuple[dict[str, object], int, float]) -> None:
    """Past the batch where the verify pass turns compute-bound, each larger batch gains less:
    the verify pass's k + 1 positions cost k + 1 times the FLOPs while the step saves no more bytes."""
    data, _, ctx = case
    sc = Scenario(**data)
    r = resolve(sc)
    dr = drafter_for(sc.speculative, r.model)
    k = sc.speculative.draft_tokens
    grid = np.unique(np.geomspace(1, 8192, 40).round())
    kw = r.step_kwargs()
    verify = decode_step(batch_size=grid, context_tokens=ctx, tokens_per_sequence=k + 1, **kw)
    cyc = decode_cycle(batch_size=grid, context_tokens=ctx, draft_tokens=k, drafter=dr, **kw)
    speedup = np.asarray(cyc.step.step_s) * cyc.tokens_per_pass / np.asarray(cyc.cycle_s)
    bound = ~np.asarray(verify.memory_bound)
    if not bound.any():
        return  # never compute-bound in this range (a MoE at low FLOP/s per byte)
    first = int(np.argmax(bound))
    if not bound[first:].all():
        return  # not settled compute-bound (kernel groups flip back)
    tail = speedup[first:]
    assert np.all(np.diff(tail) <= 1e-9 * tail[:-1]), (grid[first:], tail)


def test_draws_follow_the_acceptance_per_position() -> None:
    """P(tokens ≥ i + 1) = a_1 × … × a_i over 200,000 seeded passes; the mean is the plan's τ."""
    acc = (0.9, 0.5, 0.8)
    d = spec_draws(draft_tokens=3, acceptance=acc, seed=5)
    x = np.array([d.tokens(r, p) for r in range(400) for p in range(500)])
    assert d.mean_tokens == pytest.approx(tokens_per_verify(acc, 3), abs=1e-8)
    for i, p in enumerate((0.9, 0.45, 0.36), start=1):
        assert abs(float(np.mean(x >= i + 1)) - p) <= 4 * math.sqrt(p * (1 - p) / x.size)


def test_the_simulator_runs_the_methods_drafter() -> None:
    """The simulator's verify passes draw the plan's acceptance a_1 … a_K and are timed by the
    plan's cycle: simulated tokens per pass ≈ τ, and alone in a replica TPOT ≈ the plan's ITL."""
    spec = {"draft_tokens": 3, "method": "eagle", "acceptance_per_position": [0.9, 0.6, 0.3]}
    sc = Scenario(workload={"prompt_tokens": 128, "output_tokens": 1500}, speculative=spec)
    run = simulate(sc, sim_options(requests=30, rate_req_s=0.002, lengths="fixed", seed=3))
    tau = tokens_per_verify((0.9, 0.6, 0.3), 3)  # 1 + 0.9 + 0.54 + 0.162 = 2.602
    assert tau == pytest.approx(2.602)
    assert run.verify_tokens / run.verify_passes == pytest.approx(tau, rel=0.02)
    r = resolve(sc)
    cyc = decode_cycle(batch_size=1, context_tokens=128 + 1500 / 2, draft_tokens=3,
                       drafter=drafter_for(sc.speculative, r.model), **r.step_kwargs())
    assert float(run.tpot_s.mean()) == pytest.approx(float(cyc.itl_s), rel=0.03)


def test_the_simulator_runs_mtp_on_deepseek() -> None:
    sc = Scenario(**DSV3, speculative={"draft_tokens": 2, "method": "mtp"},
                  workload={"prompt_tokens": 256, "output_tokens": 400})
    run = simulate(sc, sim_options(requests=12, rate_req_s=0.01, lengths="fixed", seed=1))
    dr = drafter_for(sc.speculative, resolve(sc).model)
    assert dr is not None
    a = dr.acceptance[0]
    assert run.verify_tokens / run.verify_passes == pytest.approx(1 + a + a**2, rel=0.06)
