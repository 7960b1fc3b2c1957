"""Issue 25: measurement rows say what was run (EP, attention DP, speculative decoding,
multi-node, disaggregated pools) and every field a row carries is used or the row is
skipped with that reason; the InferenceX DeepSeek-R1 file loads; leave-one-GPU-out and
leave-one-engine-out folds hold out exactly one GPU / engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planner.errors import ScenarioError
from planner.physics.step import prefill_step
from planner.spec.scenario import Parallel, Scenario
from planner.validate import fold_assignment, fold_split, load_measurements, parse_measurements, validate_rows

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

BASE = {"id": "r", "engine": "SGLang", "model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100_sxm",
        "n_gpus": 1, "tp": 1, "isl": 1000, "osl": 1000, "concurrency": 8, "metric": "tpot_ms", "value": 10.0}


def test_inferencex_file_loads_every_row_with_its_setup() -> None:
    rows = load_measurements(SHARED / "inferencex_dsr1.json")
    assert len(rows) == 2300
    disagg = [r for r in rows if r.disaggregated is not None]
    assert disagg and all(r.disaggregated.prefill_gpus + r.disaggregated.decode_gpus == r.n_gpus
                          for r in disagg if r.disaggregated)
    assert {r.speculative for r in rows} == {"none", "mtp"}
    assert {r.metric for r in rows} == {"output_tok_s_per_gpu", "output_tok_s_per_user", "tpot_ms", "ttft_ms"}
    assert any(r.dp_attention for r in rows) and any(r.multi_node for r in rows)


def test_new_metrics_are_predicted_from_the_same_operating_point() -> None:
    rows = parse_measurements([
        {**BASE, "id": "tpot", "metric": "tpot_ms"},
        {**BASE, "id": "user", "metric": "output_tok_s_per_user"},
        {**BASE, "id": "out", "metric": "output_tok_s_total"},
        {**BASE, "id": "in", "metric": "input_tok_s_total", "isl": 4000},
    ])
    res = {r.id: r for r in validate_rows(rows)}
    assert all(r.predicted is not None for r in res.values()), [r.skipped_reason for r in res.values()]
    # tokens/s per user is 1 / TPOT (the same run's ITL)
    assert res["user"].predicted == pytest.approx(1e3 / res["tpot"].predicted, rel=1e-9)
    # input tokens/s = output tokens/s × ISL / OSL, at the input row's own run (isl 4000)
    op = res["in"].operating_point
    assert op is not None
    assert res["in"].predicted == pytest.approx(op.output_tok_s_per_replica * 4000 / 1000, rel=1e-9)


@pytest.mark.parametrize(("field", "value"), [
    ("speculative", "sometimes"), ("dp_attention", "maybe"), ("ep", 0),
    ("disaggregated", {"prefill_gpus": 1}),
])
def test_a_malformed_setup_field_names_the_row_and_field(field: str, value: object) -> None:
    with pytest.raises(ScenarioError, match=f"row 0 \\(id 'r'\\): {field}"):
        parse_measurements([{**BASE, field: value}])


def test_a_field_the_row_carries_is_never_silently_dropped() -> None:
    # each row states something; it is either honoured (the scenario shows it) or the row
    # is skipped naming the field.
    rows = parse_measurements([
        {**BASE, "id": "sp", "speculative": "eagle", "speculative_draft_tokens": 3},
        {**BASE, "id": "dp", "model": "deepseek-v3", "precision": "fp8", "gpu": "h200_sxm", "n_gpus": 8, "tp": 8,
         "ep": 8, "dp_attention": True},
    ])
    for r in validate_rows(rows):
        if r.predicted is None:
            assert r.skipped_reason and any(k in r.skipped_reason for k in ("speculative", "ep", "dp_attention"))
        else:
            assert r.scenario is not None
            text = repr(r.scenario)
            # eagle is the method's default, so the scenario shows its draft tokens
            assert ("'draft_tokens': 3" in text) if r.id == "sp" else ("dp_attention" in text and "'ep': 8" in text)


@pytest.mark.parametrize("scheme", ["gpu", "engine"])
def test_leave_one_out_folds_hold_out_one_gpu_or_engine(scheme: str) -> None:
    rows = load_measurements(SHARED / "inferencex_dsr1.json")
    assignment = fold_assignment(rows, scheme)
    folds = set(assignment.values())
    assert len(folds) == (7 if scheme == "gpu" else 6)
    for fold in folds:
        train, test = fold_split(rows, assignment, fold)
        held = {(r.gpu if scheme == "engine" else assignment[r.id]) for r in test}
        if scheme == "gpu":
            assert held == {fold} and all(assignment[r.id] != fold for r in train)
        else:
            assert {r.engine for r in test} == {fold} and fold not in {r.engine for r in train}
        assert len(train) + len(test) == len(rows)


DISAGG = {**BASE, "model": "llama-3.1-70b", "precision": "fp8", "n_gpus": 12, "tp": 8, "isl": 8192, "osl": 1024,
          "disaggregated": {"prefill_gpus": 4, "decode_gpus": 8, "prefill_tp": 4, "prefill_workers": 1,
                            "decode_tp": 8, "decode_workers": 1}}


@pytest.mark.parametrize("users", [1, 4, 64])
def test_a_disaggregated_run_is_a_closed_loop_over_both_pools(users: int) -> None:
    rows = parse_measurements([{**DISAGG, "id": m, "metric": m, "concurrency": users}
                               for m in ("tpot_ms", "ttft_ms", "output_tok_s_per_gpu", "input_tok_s_per_gpu")])
    res = {r.id: r for r in validate_rows(rows)}
    assert all(r.predicted is not None for r in res.values()), [r.skipped_reason for r in res.values()]
    op = res["tpot_ms"].operating_point
    assert op is not None and op.replicas == 1
    # Little's law over the deployment: N users = X (req/s) × E2E, E2E = TTFT + (o − 1) × ITL
    x = op.output_tok_s_per_replica / 1024
    assert x * op.e2e_s == pytest.approx(users, rel=1e-3)
    assert op.e2e_s == pytest.approx(op.ttft_s + 1023 * op.itl_s, rel=1e-9)
    # TTFT is never below the prompt's own prefill on its pool (plus the exposed KV transfer)
    assert op.ttft_s >= op.prefill_s * (1 - 1e-9)
    # per-GPU rates are per pool: output over the 8 decode GPUs, input over the 4 prefill GPUs
    assert res["output_tok_s_per_gpu"].predicted == pytest.approx(op.output_tok_s_per_replica / 8, rel=1e-9)
    assert res["input_tok_s_per_gpu"].predicted == pytest.approx(x * 8192 / 4, rel=1e-9)
    assert res["tpot_ms"].scenario is not None and res["tpot_ms"].scenario["parallel"]["tp"] == 8


@pytest.mark.parametrize(("pools", "reason"), [
    ({"prefill_workers": 0}, "prefill_workers is 0"),
    ({"prefill_gpus": 6, "decode_gpus": 6}, "prefill_gpus (6) is not a whole number"),
    ({"decode_tp": 4}, "a decode worker has 8 GPUs"),
])
def test_pools_that_do_not_add_up_skip_the_row_naming_the_field(pools: dict[str, int], reason: str) -> None:
    d = {**DISAGG["disaggregated"], **pools}
    if "prefill_gpus" in pools:
        d["prefill_workers"] = 4
    rows = parse_measurements([{**DISAGG, "concurrency": 4, "disaggregated": d}])
    (r,) = validate_rows(rows)
    assert r.predicted is None and r.skipped_reason is not None and reason in r.skipped_reason


def test_attention_dp_ranks_each_keep_the_engines_batch_cap() -> None:
    """With DP attention every rank runs its own scheduler: the running-batch cap is the
    engine's per rank × ranks, and the row says so."""
    d = {**DISAGG["disaggregated"], "decode_tp": 8, "decode_ep": 8, "decode_dp_attention": True}
    rows = parse_measurements([{**DISAGG, "model": "DeepSeek-R1", "gpu": "h200_sxm", "disaggregated": d, "ep": 8,
                                "dp_attention": True, "id": "dpa", "metric": "tpot_ms", "concurrency": 512}])
    res = validate_rows(rows)[0]
    assert res.predicted is not None, res.skipped_reason
    assert any("per attention-DP rank × 8 ranks" in n for n in res.notes), res.notes
    assert res.operating_point is not None and res.operating_point.max_batch > 256


def test_a_dp_attention_prefill_pass_serves_every_ranks_prompts() -> None:
    """R ranks prefill their own prompts at once: R × the prompts, the pass longer only by the
    group's shared (expert + collective) part R − 1 more times; R = 1 unchanged."""
    from planner.validate import dp_prefill_pass

    assert dp_prefill_pass(0.2, 3.0, ranks=1, expert_share=0.4) == (0.2, 3.0)
    t, k = dp_prefill_pass(0.2, 3.0, ranks=4, expert_share=0.25)
    assert t == pytest.approx(0.2 * 1.75) and k == 12.0
    # per prompt: never more than one rank's, never less than 1/R of it
    for share in (0.0, 0.3, 1.0):
        t, k = dp_prefill_pass(1.0, 1.0, ranks=8, expert_share=share)
        assert 1.0 / 8 - 1e-12 <= t / k <= 1.0 + 1e-12


def test_dp_attention_prefill_worker_on_deepseek() -> None:
    """DeepSeek-R1 fp8 on 8 × H200, TP8·EP8 with DP attention, 1,024-token prompts: k = 8 prompts
    share a rank's pass (each attending only to its own tokens), the 8 ranks fill theirs at once,
    so a prompt's share of the worker lies between 1/8 of the one-rank pass per prompt and it."""
    from planner.physics.step import prefill_step
    from planner.spec.context import resolve
    from planner.validate import prefill_service

    s = Scenario(gpu="h200-sxm", model="deepseek-r1", weights_dtype="fp8", kv_dtype="fp8",
                 parallel=Parallel(tp=8, ep=8, dp_attention=True))
    r = resolve(s)
    k = s.serving.chunk_tokens // 1024
    one = prefill_step(tokens=k * 1024, sequences=k, **r.step_kwargs())
    assert float(one.attention_flops) < float(prefill_step(tokens=k * 1024, **r.step_kwargs()).attention_flops)
    per_prompt, own = prefill_service(r, prompt=1024.0)
    assert float(one.time_s) / (8 * k) < per_prompt < float(one.time_s) / k
    assert own == pytest.approx(per_prompt * 8 * k)


def test_moe_terms_are_fitted_on_step_metrics_not_ttft() -> None:
    """TTFT rows are scored, not fitted on as values by the step terms (the model lacks their
    per-request costs; only a colocated layout's rise with the prompt enters the fit,
    moefit.rise_pairs): a fit given only TTFT rows of a disaggregated run leaves every step term
    off.  The one term fitted on TTFT values is the disaggregated hand-off, and only there."""
    from planner.spec.fitted import FITTED_EFFICIENCY
    from planner.validate import (
        FIT_EXCLUDED_METRICS,
        HANDOFF_TERM,
        MOE_TERMS,
        efficiency_for,
        fit_terms,
        handoff_rows,
        setup_rows,
    )

    assert "ttft_ms" in FIT_EXCLUDED_METRICS and "mtp_acceptance" in MOE_TERMS and HANDOFF_TERM in MOE_TERMS
    rows = parse_measurements([{**DISAGG, "id": f"t{c}", "metric": "ttft_ms", "concurrency": c} for c in (1, 4)])
    setups = [s for s in setup_rows(rows, efficiency_for("generic", FITTED_EFFICIENCY)) if not isinstance(s, str)]
    assert len(setups) == 2 and len(handoff_rows(setups)) == 2
    step_terms = [k for k in MOE_TERMS if k != HANDOFF_TERM]
    assert fit_terms(setups, step_terms) == {k: 0.0 for k in step_terms}
    colocated = [s for s in setup_rows(parse_measurements([{**BASE, "id": "c", "metric": "ttft_ms"}]),
                                       efficiency_for("generic", FITTED_EFFICIENCY)) if not isinstance(s, str)]
    assert handoff_rows(colocated) == []


@pytest.mark.parametrize("handoff_s", [0.0, 0.12, 0.3])
def test_the_disaggregated_hand_off_is_fitted_to_what_the_ttft_rows_leave(handoff_s: float) -> None:
    """Rows measured at the model's TTFT with no hand-off plus h give back h (to the 5 ms grid),
    the other terms held; the fitted value then adds to a disaggregated row's TTFT one for one
    and is the scenario's default (fleet.kv_transfer_setup_s unset)."""
    from planner.physics.terms import physics_terms
    from planner.spec.context import kv_transfer_setup_s
    from planner.spec.fitted import FITTED_EFFICIENCY, FITTED_TERMS
    from planner.validate import HANDOFF_TERM, efficiency_for, fit_handoff, setup_rows

    rows = parse_measurements([{**DISAGG, "id": f"t{c}", "metric": "ttft_ms", "concurrency": c} for c in (1, 2, 4)])
    with physics_terms(**{HANDOFF_TERM: 0.0}):
        base = {r.id: r.predicted for r in validate_rows(rows)}
    assert all(v is not None and v > 0 for v in base.values())
    measured = parse_measurements([{**DISAGG, "id": f"t{c}", "metric": "ttft_ms", "concurrency": c,
                                    "value": float(base[f"t{c}"] or 0) + handoff_s * 1e3} for c in (1, 2, 4)])
    setups = [s for s in setup_rows(measured, efficiency_for("generic", FITTED_EFFICIENCY)) if not isinstance(s, str)]
    h = fit_handoff(setups, dict(FITTED_TERMS))
    assert h == pytest.approx(handoff_s, abs=0.006)
    with physics_terms(**{HANDOFF_TERM: h}):
        shifted = {r.id: r.predicted for r in validate_rows(rows)}
        assert kv_transfer_setup_s(Scenario()) == h
    for k, v in base.items():
        assert (shifted[k] or 0) - (v or 0) == pytest.approx(h * 1e3, rel=0.02, abs=0.5)
    assert kv_transfer_setup_s(Scenario(fleet={"kv_transfer_setup_s": 0.02})) == 0.02


def test_a_light_load_prefill_pass_carries_the_prompts_that_arrived_during_the_last() -> None:
    """A prefill worker batches what arrived while its last pass ran, m = λ/P × t(m): one prompt
    at a trickle (its own pass, not the budget's worth of prompts), the worker's capacity
    k·R = ⌊T/n⌋ × ranks beyond it; the pass never shorter for more prompts."""
    from planner.spec.context import resolve
    from planner.validate import prefill_batch, prefill_capacity, prefill_pass

    s = Scenario(gpu="h200-sxm", model="deepseek-r1", weights_dtype="fp8", kv_dtype="fp8",
                 parallel=Parallel(tp=8, ep=8, dp_attention=True))
    r = resolve(s)
    cap = prefill_capacity(r, prompt=1024.0)
    assert cap == (s.serving.chunk_tokens // 1024) * 8
    grid = np.geomspace(1.0, cap, 24)
    srv, own = prefill_pass(r, prompt=1024.0, prompts=grid)
    assert np.all(np.diff(srv) >= -1e-12) and np.all(own >= srv - 1e-12)
    # one prompt on one rank: the one-rank pass of that prompt alone
    alone = prefill_step(tokens=1024.0, sequences=1.0, **r.step_kwargs())
    assert srv[0] == pytest.approx(float(alone.time_s))
    rates = np.array([0.01, 0.5 / srv[0], 1.5 / srv[0], 1e6])  # per s: below one pass, between, far beyond
    m = prefill_batch(arrival_per_s=rates, workers=1, prompts=grid, pass_s=srv)
    assert m[0] == pytest.approx(1.0) and m[-1] == pytest.approx(cap)
    assert np.all(np.diff(m) >= 0)
    # a fixed point where it is inside the range: m = λ t(m)
    inside = (m > 1.0 + 1e-9) & (m < cap - 1e-9)
    assert inside.any()
    assert np.allclose(m[inside], rates[inside] * np.interp(m[inside], grid, srv), rtol=1e-4)


def test_a_benchmark_that_draws_random_lengths_is_predicted_at_their_means() -> None:
    """benchmark_serving's --random-range-ratio r draws each length uniformly in [r·n, n]: the
    client sent (1 + r)/2 × the stated lengths on average.  A row may state r; an InferenceX row
    (whose workflows set 0.8) is predicted at 0.9 × isl and osl, noted; other rows at their own."""
    from planner.validate import predictable_setups

    ix = {**BASE, "source": "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/1/attempts/1"}
    rows = parse_measurements([{**BASE, "id": "fixed"}, {**BASE, "id": "stated", "length_range_ratio": 0.5},
                               {**ix, "id": "ix"}, {**ix, "id": "ix1", "length_range_ratio": 1.0}])
    setups = {s.row.id: s for s in predictable_setups(rows)}
    assert (setups["fixed"].prompt_tokens, setups["fixed"].output_tokens) == (1000.0, 1000.0)
    assert (setups["stated"].prompt_tokens, setups["stated"].output_tokens) == pytest.approx((750.0, 750.0))
    assert (setups["ix"].prompt_tokens, setups["ix"].output_tokens) == pytest.approx((900.0, 900.0))
    assert any("length_range_ratio not stated: 0.8" in n for n in setups["ix"].notes)
    assert (setups["ix1"].prompt_tokens, setups["ix1"].output_tokens) == (1000.0, 1000.0) and not any("length_range" in n for n in setups["ix1"].notes)
    res = {r.id: r for r in validate_rows(rows)}
    # shorter sequences: a shorter prefill, a decode step over less context
    assert res["ix"].operating_point.prefill_s < res["fixed"].operating_point.prefill_s
    assert res["ix"].operating_point.step_s <= res["fixed"].operating_point.step_s
    with pytest.raises(ScenarioError, match="length_range_ratio"):
        parse_measurements([{**BASE, "length_range_ratio": 0}])


def test_sglang_runs_at_its_own_running_request_cap_not_vllms() -> None:
    """SGLang's default running-request cap is KV-bound (half its pool's tokens), not vLLM's
    max_num_seqs 256: a 512-client SGLang run decodes at batch 512 with nothing queued, the
    same run on vLLM holds 256 and queues the rest (TTFT grows by the queue)."""
    from planner.validate import ENGINE_MAX_BATCH

    assert ENGINE_MAX_BATCH["sglang"] > 512 >= ENGINE_MAX_BATCH["vllm"]
    run = {**BASE, "concurrency": 512, "isl": 300, "osl": 100, "metric": "ttft_ms", "value": 100.0}
    sg, vl = validate_rows(parse_measurements([{**run, "id": "sglang"}, {**run, "id": "vllm", "engine": "vLLM"}]))
    assert sg.operating_point is not None and vl.operating_point is not None
    assert sg.operating_point.max_batch > 512 and not sg.operating_point.saturated
    assert sg.operating_point.batch_size == pytest.approx(512, rel=0.02)
    assert vl.operating_point.max_batch == 256 and vl.operating_point.saturated
    assert vl.operating_point.ttft_s > 5 * sg.operating_point.ttft_s


@pytest.mark.parametrize(("text", "tp", "expected"), [
    ("MoE llm_options enable attention DP and CUDA-graph padding; EP size not given.", 8, True),
    ("extra options: enable_attention_dp: true", 4, True),
    ("llm options: attention DP, CUTLASS MoE", 8, False),  # names the option, does not say it was on
    ("MoE llm_options enable attention DP", 1, False),  # one rank: nothing to run data-parallel
    ("no attention options", 8, False),
])
def test_a_row_whose_notes_say_attention_dp_was_enabled_runs_it(text: str, tp: int, expected: bool) -> None:
    """A row without ``dp_attention`` whose notes say the engine enabled attention DP (TensorRT-LLM's
    perf tables' wording) is predicted with it, and says so; otherwise it is not."""
    row = {**BASE, "engine": "TensorRT-LLM", "model": "Qwen3-30B-A3B", "precision": "fp8", "gpu": "h200_sxm",
           "n_gpus": tp, "tp": tp, "metric": "output_tok_s_total", "notes": text, "value": 1000.0}
    (r,) = validate_rows(parse_measurements([row]))
    assert r.predicted is not None, r.skipped_reason
    assert r.scenario is not None
    assert bool(r.scenario.get("parallel", {}).get("dp_attention", False)) is expected
    assert any("enabled attention DP" in n for n in r.notes) is expected
