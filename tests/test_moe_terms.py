"""The MoE layer terms (planner.physics.kernels.moe_overhead_s): what a MoE layer costs
beyond its GEMMs, per layer and per routed token slot in decode; fitted on MoE rows with
the dense efficiencies held (planner.validate.moefit)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.physics.step import decode_step, prefill_step
from planner.physics.terms import physics_terms
from planner.spec.catalog import get_gpu, get_model
from planner.spec.context import resolve
from planner.spec.defaults import DEFAULT_STEP_OVERHEAD_S
from planner.spec.fitted import FITTED_EFFICIENCY, FITTED_TERMS
from planner.spec.params import param_counts
from planner.spec.scenario import scenario_from_dict
from planner.validate import efficiency_for, fit_terms, parse_measurements, predictable_setups, validate_rows

DSV3 = get_model("deepseek-v3")
H200 = get_gpu("h200-sxm")


def _step(model: str, batch: float, ep: int = 1, dp_attention: bool = False) -> float:
    return float(decode_step(model=get_model(model), gpu=H200, weights_dtype="fp8", kv_dtype="fp8", batch_size=batch,
                             context_tokens=2048, tp=8, ep=ep, dp_attention=dp_attention).step_s)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 512), alpha=st.floats(0, 1e-4), beta=st.floats(0, 1e-6), dp=st.booleans())
def test_decode_pays_every_moe_layer_and_routed_slot(batch: int, alpha: float, beta: float, dp: bool) -> None:
    with physics_terms(moe_layer_overhead_s=0.0, moe_token_overhead_s=0.0):
        base = _step("deepseek-v3", batch, ep=8, dp_attention=dp)
    with physics_terms(moe_layer_overhead_s=alpha, moe_token_overhead_s=beta):
        more = _step("deepseek-v3", batch, ep=8, dp_attention=dp)
    layers = param_counts(DSV3).moe_layers  # 58: 61 layers less the first 3 dense
    assert layers == 58
    # L_moe × (α + β × B × k / EP_slots), k = 8 experts per token; EP_slots = EP 8 with DP attention
    # (the dispatch hands a rank its experts' slots), 1 without (every rank runs all B × k slots)
    assert more - base == pytest.approx(layers * (alpha + beta * batch * 8 / (8 if dp else 1)), rel=1e-6, abs=1e-12)


@settings(max_examples=10, deadline=None)
@given(alpha=st.floats(0, 1e-4), beta=st.floats(0, 1e-6))
def test_a_dense_model_never_pays_them(alpha: float, beta: float) -> None:
    base = _step("llama-3.1-70b", 64)
    with physics_terms(moe_layer_overhead_s=alpha, moe_token_overhead_s=beta):
        assert _step("llama-3.1-70b", 64) == base


_PREFILL_OFF = {"moe_layer_overhead_s": 0.0, "moe_token_overhead_s": 0.0, "moe_prefill_layer_overhead_s": 0.0,
                "moe_prefill_token_overhead_s": 0.0, "moe_prefill_slot_passes": 0.0}


@settings(max_examples=15, deadline=None)
@given(tokens=st.integers(1, 32768), ep=st.sampled_from([1, 8]), gamma=st.floats(0, 2e-3), delta=st.floats(0, 1e-7))
def test_a_prefill_pays_its_own_moe_terms_not_the_decode_slot_term(tokens: int, ep: int, gamma: float,
                                                                     delta: float) -> None:
    def t() -> float:
        return float(prefill_step(model=DSV3, gpu=H200, weights_dtype="fp8", kv_dtype="fp8", tokens=tokens, tp=8,
                                  ep=ep, dp_attention=True).time_s)
    with physics_terms(**_PREFILL_OFF):
        base = t()
    with physics_terms(**{**_PREFILL_OFF, "moe_layer_overhead_s": 50e-6, "moe_token_overhead_s": 1e-6,
                          "moe_prefill_layer_overhead_s": gamma, "moe_prefill_token_overhead_s": delta}):
        # L_moe × (α + γ + δ × T × k / EP) with DP attention; the decode slot term β never enters a prefill
        assert t() - base == pytest.approx(58 * (50e-6 + gamma + delta * tokens * 8 / ep), rel=1e-6, abs=1e-12)


def test_a_dense_prefill_never_pays_them() -> None:
    def t() -> float:
        return float(prefill_step(model=get_model("llama-3.1-70b"), gpu=H200, weights_dtype="fp8", kv_dtype="fp8",
                                  tokens=4096, tp=8).time_s)
    base = t()
    with physics_terms(moe_prefill_layer_overhead_s=1e-3, moe_prefill_token_overhead_s=1e-7,
                       moe_prefill_slot_passes=50.0):
        assert t() == base


def _prefill(model: str, *, tokens: float, ep: int, bandwidth_efficiency: float = 1.0, tp: int = 8,
             dp_attention: bool = False) -> float:
    return float(prefill_step(model=get_model(model), gpu=H200, weights_dtype="fp8", kv_dtype="fp8", tokens=tokens,
                              tp=tp, ep=ep, dp_attention=dp_attention,
                              bandwidth_efficiency=bandwidth_efficiency).time_s)


def test_slot_passes_golden_deepseek_v3_2000_tokens_ep8_on_h200() -> None:
    """moe_prefill_slot_passes N: each routed slot's hidden vector crosses HBM N times in the
    prefill's memory-bound MoE kernels.  DeepSeek-V3 (h = 7,168, k = 8, 58 MoE layers), 2,000
    prompt tokens over EP 8 with DP attention, N = 10, H200 at its datasheet 4.8 TB/s (η_b = 1):
        per slot   10 × 7,168 × 2 B / 4.8e12 B/s      = 2.986667e-8 s
        slots      2,000 × 8 / 8                      = 2,000 per GPU per layer (the dispatch
                                                        hands each rank its experts' slots)
        58 layers × 2,000 × 2.986667e-8 s             = 3.464533e-3 s
    TP8·EP8 without DP attention: every rank holds all 2,000 tokens and its EP MoE kernels run
    over all 16,000 slots (the other ranks' experts masked): 8 × that, 2.771627e-2 s."""
    for dp, expect in ((True, 3.464533e-3), (False, 2.771627e-2)):
        with physics_terms(**_PREFILL_OFF):
            base = _prefill("deepseek-v3", tokens=2000, ep=8, dp_attention=dp)
        with physics_terms(**{**_PREFILL_OFF, "moe_prefill_slot_passes": 10.0}):
            assert _prefill("deepseek-v3", tokens=2000, ep=8, dp_attention=dp) - base == pytest.approx(expect, rel=1e-6)


@settings(max_examples=15, deadline=None)
@given(tokens=st.integers(1, 16384), ep=st.sampled_from([1, 2, 8]), passes=st.floats(0.5, 100.0),
       eta=st.floats(0.3, 1.0), dp=st.booleans())
def test_slot_passes_move_hidden_vectors_at_the_sustained_bandwidth(tokens: int, ep: int, passes: float,
                                                                     eta: float, dp: bool) -> None:
    """The slot term is L_moe × N × h × 2 B / (η_b × BW) × T × k / EP_slots: linear in the tokens
    and the passes, divided by the sustained bandwidth and, with DP attention, by EP (without it
    every rank runs every slot); a decode step never pays it."""
    def extra(e: float) -> float:
        with physics_terms(**_PREFILL_OFF):
            base = _prefill("deepseek-v3", tokens=tokens, ep=ep, bandwidth_efficiency=e, dp_attention=dp)
        with physics_terms(**{**_PREFILL_OFF, "moe_prefill_slot_passes": passes}):
            return _prefill("deepseek-v3", tokens=tokens, ep=ep, bandwidth_efficiency=e, dp_attention=dp) - base
    expect = 58 * passes * 7168 * 2 / (eta * H200.hbm_bytes_per_s) * tokens * 8 / (ep if dp else 1)
    assert extra(eta) == pytest.approx(expect, rel=1e-6, abs=1e-12)
    with physics_terms(**_PREFILL_OFF):
        step = _step("deepseek-v3", 64, ep=8)
    with physics_terms(**{**_PREFILL_OFF, "moe_prefill_slot_passes": passes}):
        assert _step("deepseek-v3", 64, ep=8) == step


def test_slot_passes_scale_with_the_hidden_width() -> None:
    """A slot moves its hidden vector: Qwen3-30B-A3B's (h = 2,048, 48 MoE layers, k = 8) costs
    2,048 / 7,168 of DeepSeek-V3's (h = 7,168, 58 MoE layers, k = 8) per slot per layer."""
    def per_slot(model: str) -> float:
        m = get_model(model)
        with physics_terms(**_PREFILL_OFF):
            base = _prefill(model, tokens=1000, ep=1, tp=1)
        with physics_terms(**{**_PREFILL_OFF, "moe_prefill_slot_passes": 20.0}):
            extra = _prefill(model, tokens=1000, ep=1, tp=1) - base
        return extra / (param_counts(m).moe_layers * 1000 * m.experts_per_token)
    assert per_slot("qwen3-30b-a3b") / per_slot("deepseek-v3") == pytest.approx(2048 / 7168, rel=1e-6)


def test_the_fit_recovers_terms_it_generated() -> None:
    # rows predicted at known terms (decode TPOT at several batches) are fitted back
    truth = {"moe_layer_overhead_s": 40e-6, "moe_token_overhead_s": 2e-7}
    raw = [{"id": f"r{c}", "engine": "SGLang", "model": "deepseek-r1", "precision": "fp8", "gpu": "h200_sxm",
            "n_gpus": 8, "tp": 8, "ep": 8, "isl": 1024, "osl": 1024, "concurrency": c, "metric": "tpot_ms",
            "value": 1.0} for c in (1, 8, 32, 128)]
    rows = parse_measurements(raw)
    from planner.spec.fitted import FITTED_EFFICIENCY
    table = {k: {**v, **truth} for k, v in FITTED_EFFICIENCY.items()}
    measured = {r.id: r.predicted for r in validate_rows(rows, efficiency=table)}
    rows = parse_measurements([{**x, "value": measured[x["id"]]} for x in raw])
    got = fit_terms(predictable_setups(rows), terms=("moe_layer_overhead_s", "moe_token_overhead_s"))
    assert got["moe_layer_overhead_s"] == pytest.approx(truth["moe_layer_overhead_s"], rel=0.05)
    assert got["moe_token_overhead_s"] == pytest.approx(truth["moe_token_overhead_s"], rel=0.05)


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(8, 512), lam=st.floats(0, 2e-4))
def test_each_all_to_all_call_pays_its_own_latency(batch: int, lam: float) -> None:
    """all_to_all_call_s: a dispatch and a combine per MoE layer, each paying it once: a DP-attention
    step over EP 8 pays 2 × 58 × λ more; a layout without all-to-alls (TP8·EP8 without DP attention
    reduces the experts' outputs with all-reduces instead) and a dense model never pay it."""
    def step(model: str, dp: bool) -> float:
        return float(decode_step(model=get_model(model), gpu=H200, weights_dtype="fp8", kv_dtype="fp8",
                                 batch_size=batch, context_tokens=2048, tp=8, ep=8 if model != "llama-3.1-70b" else 1,
                                 dp_attention=dp).step_s)
    with physics_terms(all_to_all_call_s=0.0):
        base = {(m, dp): step(m, dp) for m in ("deepseek-v3", "llama-3.1-70b") for dp in (True, False)}
    with physics_terms(all_to_all_call_s=lam):
        assert step("deepseek-v3", True) - base["deepseek-v3", True] == pytest.approx(2 * 58 * lam, rel=1e-6,
                                                                                      abs=1e-12)
        assert step("deepseek-v3", False) == base["deepseek-v3", False]
        assert step("llama-3.1-70b", True) == base["llama-3.1-70b", True]
        assert step("llama-3.1-70b", False) == base["llama-3.1-70b", False]


def test_the_fit_recovers_slot_passes_from_step_metrics() -> None:
    """The slot passes are fitted on the step metrics (TTFT rows are not fitted on): long prompts'
    prefills interrupt a colocated decode, so TPOT and throughput at 8k prompts carry them."""
    truth = {**_PREFILL_OFF, "moe_prefill_slot_passes": 25.0}
    raw = [{"id": f"r{c}{m}", "engine": "SGLang", "model": "deepseek-r1", "precision": "fp8", "gpu": "h200_sxm",
            "n_gpus": 8, "tp": 8, "ep": 8, "isl": 8192, "osl": 1024, "concurrency": c, "metric": m, "value": 1.0}
           for c in (4, 32, 128) for m in ("tpot_ms", "output_tok_s_per_gpu")]
    rows = parse_measurements(raw)
    from planner.spec.fitted import FITTED_EFFICIENCY
    table = {k: {**v, **truth} for k, v in FITTED_EFFICIENCY.items()}
    measured = {r.id: r.predicted for r in validate_rows(rows, efficiency=table)}
    rows = parse_measurements([{**x, "value": measured[x["id"]]} for x in raw])
    with physics_terms(**_PREFILL_OFF):
        got = fit_terms(predictable_setups(rows), terms=("moe_prefill_slot_passes",))
    assert got["moe_prefill_slot_passes"] == pytest.approx(25.0, rel=0.05)


_RISE_ROW = {"engine": "SGLang", "model": "deepseek-r1", "precision": "fp8", "gpu": "h200_sxm", "n_gpus": 8, "tp": 8,
             "ep": 8, "osl": 1024, "metric": "ttft_ms", "value": 1.0}


def test_rise_pairs_join_one_layout_and_light_load_at_two_prompt_lengths() -> None:
    """A pair is the shortest and the longest prompt of one colocated layout at one closed-loop load
    of at most RISE_MAX_CONCURRENCY users, the longer's TTFT the higher; anything else forms none."""
    from planner.validate import RISE_MAX_CONCURRENCY, rise_pairs

    def row(i: str, isl: int, c: int, value: float, **kw: object) -> dict[str, object]:
        return {**_RISE_ROW, "id": i, "isl": isl, "concurrency": c, "value": value, **kw}
    heavy = RISE_MAX_CONCURRENCY * 2
    rows = parse_measurements([
        row("a1", 1024, 4, 150.0), row("a2", 4096, 4, 200.0), row("a8", 8192, 4, 330.0),  # one pair: a1-a8
        row("b1", 1024, 8, 150.0), row("b8", 8192, 8, 140.0),  # the longer prompt not slower: none
        row("c1", 1024, heavy, 150.0), row("c8", 8192, heavy, 900.0),  # queueing load: none
        row("d1", 1024, 4, 150.0, ep=1), row("d8", 8192, 4, 300.0, ep=4),  # two layouts: none
        row("e1", 1024, 4, 150.0, metric="tpot_ms"), row("e8", 8192, 4, 300.0, metric="tpot_ms"),  # not TTFT
    ])
    pairs = rise_pairs(predictable_setups(rows))
    assert [(a.row.id, b.row.id) for a, b in pairs] == [("a1", "a8")]


def test_the_fit_recovers_slot_passes_from_the_ttft_rise_whatever_the_fixed_part() -> None:
    """TTFT rows enter the fit through their rise with the prompt: rows generated at 20 slot passes,
    each TTFT with a fixed 80 ms the model has no term for (a client's or front end's), give back 20;
    the step rows alone (one user at 1k prompts: no prompt interrupts its decode) carry no passes."""
    truth = {**_PREFILL_OFF, "moe_prefill_slot_passes": 20.0}
    raw = [{**_RISE_ROW, "id": f"t{n}c{c}", "isl": n, "concurrency": c} for n in (1024, 8192) for c in (1, 4)]
    raw.append({**_RISE_ROW, "id": "step", "isl": 1024, "concurrency": 1, "metric": "tpot_ms"})
    from planner.spec.fitted import FITTED_EFFICIENCY
    table = {k: {**v, **truth} for k, v in FITTED_EFFICIENCY.items()}
    measured = {r.id: r.predicted for r in validate_rows(parse_measurements(raw), efficiency=table)}
    fixed = {x["id"]: 80.0 if x["metric"] == "ttft_ms" else 0.0 for x in raw}
    rows = parse_measurements([{**x, "value": measured[x["id"]] + fixed[x["id"]]} for x in raw])
    with physics_terms(**_PREFILL_OFF):
        got = fit_terms(predictable_setups(rows), terms=("moe_prefill_slot_passes",))
        alone = fit_terms(predictable_setups([r for r in rows if r.metric == "tpot_ms"]),
                          terms=("moe_prefill_slot_passes",))
    assert got["moe_prefill_slot_passes"] == pytest.approx(20.0, rel=0.05)
    assert alone["moe_prefill_slot_passes"] != pytest.approx(20.0, rel=0.05)


def test_a_moe_iteration_pays_its_share_of_the_default_step_overhead() -> None:
    """moe_step_overhead_share scales the fitted per-iteration overhead a MoE scenario runs at
    where it states none (planner.spec.context.moe_step_overhead_share); a dense model pays it
    whole, a stated (probe-calibrated) overhead is the whole overhead, and validate's scenarios
    carry the family's overhead × the share the fit is trying."""
    share = FITTED_TERMS["moe_step_overhead_share"]
    assert 0.0 < share < 1.0
    moe = {"gpu": "h200-sxm", "model": "deepseek-v3", "weights_dtype": "fp8", "kv_dtype": "fp8",
           "parallel": {"tp": 8, "ep": 8}}
    assert resolve(scenario_from_dict({"model": "llama-3.1-8b"})).step_overhead_s == DEFAULT_STEP_OVERHEAD_S
    assert resolve(scenario_from_dict(moe)).step_overhead_s == pytest.approx(DEFAULT_STEP_OVERHEAD_S * share)
    with physics_terms(moe_step_overhead_share=1.0):
        assert resolve(scenario_from_dict(moe)).step_overhead_s == pytest.approx(DEFAULT_STEP_OVERHEAD_S)
    stated = resolve(scenario_from_dict({**moe, "efficiency": {"step_overhead_s": 0.003}}))
    assert stated.step_overhead_s == 0.003

    # the decode step at batch 1 moves by exactly the overhead it no longer pays
    full = resolve(scenario_from_dict({**moe, "efficiency": {"step_overhead_s": DEFAULT_STEP_OVERHEAD_S}}))
    part = resolve(scenario_from_dict(moe))
    t_full = float(decode_step(batch_size=1, context_tokens=2048, **full.step_kwargs()).step_s)
    t_part = float(decode_step(batch_size=1, context_tokens=2048, **part.step_kwargs()).step_s)
    assert t_full - t_part == pytest.approx(DEFAULT_STEP_OVERHEAD_S * (1 - share), rel=1e-9)

    rows = parse_measurements([{"id": "m", "engine": "SGLang", "model": "DeepSeek-R1", "precision": "fp8",
                                "gpu": "h200_sxm", "n_gpus": 8, "tp": 8, "ep": 8, "isl": 1024, "osl": 1024,
                                "concurrency": 4, "metric": "tpot_ms", "value": 10.0}])
    (setup,) = predictable_setups(rows)
    eff = efficiency_for("generic", {k: dict(v) for k, v in FITTED_EFFICIENCY.items()})
    assert setup.with_efficiency(eff).efficiency.step_overhead_s == pytest.approx(eff.step_overhead_s * share)
    tried = eff.model_copy(update={"moe_step_overhead_share": 0.5})
    assert setup.with_efficiency(tried).efficiency.step_overhead_s == pytest.approx(eff.step_overhead_s * 0.5)
