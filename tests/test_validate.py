"""The measurement loader, name resolution, and the efficiency fit recovering known values."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import ScenarioError
from planner.validate import (
    EfficiencySet,
    MeasurementRow,
    engine_family,
    fit_efficiency,
    load_measurements,
    parse_measurements,
    precision_dtypes,
    predict_row,
    resolve_gpu_name,
    resolve_model_name,
    setup_row,
)

GOOD = {"id": "a", "engine": "vLLM", "model": "Llama-3.1-8B", "precision": "bf16", "gpu": "h100_sxm", "n_gpus": 1,
        "tp": 1, "isl": 128, "osl": 128, "concurrency": 4, "request_rate": None, "metric": "itl_ms", "value": 10.0}


@pytest.mark.parametrize(
    ("change", "field"),
    [({"n_gpus": 0}, "n_gpus"), ({"value": "fast"}, "value"), ({"isl": -5}, "isl"), ({"metric": None}, "metric")],
)
def test_loader_names_row_and_field(change: dict[str, object], field: str) -> None:
    bad = {**GOOD, "id": "broken-row", **change}
    with pytest.raises(ScenarioError) as exc:
        parse_measurements({"measurements": [GOOD, bad]})
    msg = str(exc.value)
    assert "row 1 (id 'broken-row')" in msg and f"{field}:" in msg
    assert "\n" not in msg


def test_loader_missing_field_and_index_without_id(tmp_path: Path) -> None:
    row = {k: v for k, v in GOOD.items() if k not in {"id", "gpu"}}
    with pytest.raises(ScenarioError, match=r"row 0: id: missing"):
        parse_measurements([row])
    with pytest.raises(ScenarioError, match=r"row 1 \(id 'a'\): id: duplicate"):
        parse_measurements([GOOD, GOOD])
    p = tmp_path / "m.json"
    p.write_text("{not json")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load_measurements(p)
    with pytest.raises(ScenarioError, match="measurements: expected a list"):
        parse_measurements({"rows": []})


@pytest.mark.parametrize(
    ("name", "expected"),
    [("Llama-3.1-70B-Instruct", "llama-3.1-70b"), ("Llama-2-70B", "llama-2-70b"), ("llama-2-7b-chat-hf", "llama-2-7b"),
     ("Llama-3.3-70B", "llama-3.3-70b"), ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
     ("Mixtral-8x7B", "mixtral-8x7b"), ("Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"), ("DeepSeek-V3", "deepseek-v3")],
)
def test_model_names(name: str, expected: str) -> None:
    assert resolve_model_name(name) == (expected, None)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("h100_sxm", "h100-sxm"), ("h200_sxm", "h200-sxm"), ("a100_80gb_sxm", "a100-sxm-80gb"), ("B200", "b200")],
)
def test_gpu_names(name: str, expected: str) -> None:
    assert resolve_gpu_name(name) == (expected, None)


def test_unknown_names_have_reasons() -> None:
    gid, why = resolve_gpu_name("h100_unspecified")
    assert gid is None and "variant not stated" in (why or "")
    gid, why = resolve_gpu_name("tpu_v5e")
    assert gid is None and "unknown gpu 'tpu_v5e'" in (why or "")
    mid, why = resolve_model_name("Mistral-7B")
    assert mid is None and "unknown model 'Mistral-7B'" in (why or "")


@pytest.mark.parametrize(
    ("precision", "family", "expected"),
    [("fp8", "trtllm", ("fp8", "fp8")), ("fp8", "vllm", ("fp8", "bf16")), ("bf16", "vllm", ("bf16", "bf16")),
     ("fp16", "trtllm", ("fp16", "fp16")), ("int4", "vllm", ("int4", "bf16")), ("FP4", "trtllm", ("nvfp4", "fp8")),
     ("nvfp4", "trtllm", ("nvfp4", "fp8"))],
)
def test_precision(precision: str, family: str, expected: tuple[str, str]) -> None:
    assert precision_dtypes(precision, family=family) == (expected, None)


def test_families() -> None:
    assert [engine_family(e) for e in ("TensorRT-LLM (PyTorch backend)", "NVIDIA NIM", "vLLM", "SGLang", "LMDeploy")] == [
        "trtllm", "trtllm", "vllm", "vllm", "vllm"]


def test_row_setup_skips_with_reasons() -> None:
    eff = EfficiencySet(bandwidth=0.8, compute=0.5, step_overhead_s=1e-3)
    row = MeasurementRow(**{**GOOD, "isl": None})
    assert "isl/osl" in str(setup_row(row, eff))
    row = MeasurementRow(**{**GOOD, "concurrency": None, "metric": "ttft_ms"})
    assert "queue depth" in str(setup_row(row, eff))
    row = MeasurementRow(**{**GOOD, "n_gpus": 3, "tp": 2})
    assert "not a multiple" in str(setup_row(row, eff))
    # 405B in bf16 (810 GB) cannot sit on one 80 GB GPU.
    row = MeasurementRow(**{**GOOD, "model": "Llama-3.1-405B"})
    assert "does not fit" in str(setup_row(row, eff))


def _synthetic_setups(truth: EfficiencySet) -> list:
    """Rows whose values are the planner's own predictions at ``truth``: a mix of
    memory-bound decode, compute-bound prefill and overhead-bound small batches."""
    rows = []
    i = 0
    for model, gpu, prec, tp in (("Llama-3.1-8B", "h100_sxm", "bf16", 1), ("Llama-3.1-70B", "h200_sxm", "fp8", 4)):
        for isl, osl in ((128, 128), (2048, 128), (1000, 1000), (5000, 500)):
            for conc, rate, metric in ((None, None, "output_tok_s_total"), (1, None, "ttft_ms"), (1, None, "itl_ms"),
                                       (64, None, "itl_ms"), (None, 2.0, "ttft_ms")):
                i += 1
                rows.append(MeasurementRow(id=f"s{i}", engine="TensorRT-LLM", model=model, precision=prec, gpu=gpu,
                                           n_gpus=tp, tp=tp, isl=isl, osl=osl, concurrency=conc, request_rate=rate,
                                           metric=metric, value=1.0))
    setups = [setup_row(r, truth) for r in rows]
    out = []
    for s in setups:
        assert not isinstance(s, str), s
        value, _ = predict_row(s, truth)
        out.append(type(s)(**{**s.__dict__, "row": s.row.model_copy(update={"value": value})}))
    return out


# Every fitted physics term stated off in the synthetic truth: a term left None would take its
# shipped default (collective_call_s is 26.36 µs), which the fit, holding unfitted terms at 0,
# cannot see, so the efficiencies would absorb it.
_OFF = {"collective_hop_s": 0.0, "sequence_overhead_s": 0.0, "gemm_half_width": 0.0, "graph_layer_overhead_s": 0.0,
        "collective_call_s": 0.0, "moe_layer_overhead_s": 0.0, "moe_token_overhead_s": 0.0,
        "mtp_acceptance": 0.0, "moe_prefill_layer_overhead_s": 0.0, "moe_prefill_token_overhead_s": 0.0,
        "all_to_all_call_s": 0.0, "mtp_acceptance_trtllm": 0.0, "moe_prefill_slot_passes": 0.0,
        "moe_step_overhead_share": 1.0,  # off: a MoE iteration pays the whole step overhead
        "disagg_handoff_s": 0.0, "moe_prefill_host_layer_s": 0.0, "disagg_handoff_iterations": 0.0}


def test_synthetic_truth_states_every_term() -> None:
    from planner.physics.terms import TERM_NAMES

    assert set(_OFF) == set(TERM_NAMES)


def test_fit_recovers_known_efficiencies() -> None:
    truth = EfficiencySet(bandwidth=0.62, compute=0.41, step_overhead_s=0.0, layer_overhead_s=40e-6, **_OFF)
    fitted = fit_efficiency(_synthetic_setups(truth), terms=())
    assert fitted.bandwidth == pytest.approx(0.62, rel=0.02)
    assert fitted.compute == pytest.approx(0.41, rel=0.02)
    assert fitted.layer_overhead_s == pytest.approx(40e-6, rel=0.05)


def test_fit_recovers_the_gemm_shard_term() -> None:
    """Rows at TP 1 and TP 4 made with n½ = 1,000: the fit finds it beside the efficiencies."""
    truth = EfficiencySet(bandwidth=0.62, compute=0.8, step_overhead_s=0.0, layer_overhead_s=40e-6,
                          **{**_OFF, "gemm_half_width": 1000.0})
    fitted = fit_efficiency(_synthetic_setups(truth), terms=("gemm_half_width",))
    assert fitted.gemm_half_width == pytest.approx(1000.0, rel=0.1)
    assert fitted.compute == pytest.approx(0.8, rel=0.05)


def test_fit_recovers_the_collective_call_term() -> None:
    """Rows at TP 1 and TP 4 made with 30 µs per TP all-reduce call (a term the shipped fit
    includes): the fit finds it beside the efficiencies."""
    from planner.validate.fit import FIT_TERMS

    assert "collective_call_s" in FIT_TERMS
    truth = EfficiencySet(bandwidth=0.62, compute=0.41, step_overhead_s=0.0, layer_overhead_s=40e-6,
                          **{**_OFF, "collective_call_s": 30e-6})
    fitted = fit_efficiency(_synthetic_setups(truth), terms=("collective_call_s",))
    assert fitted.collective_call_s == pytest.approx(30e-6, rel=0.05)
    assert fitted.bandwidth == pytest.approx(0.62, rel=0.02)


def test_fixed_file_parses() -> None:
    rows = load_measurements(Path(__file__).parent / "data" / "validate_small.json")
    # The fixture's seven rows, in order, as written in the file.
    assert [r.id for r in rows] == ["nim_70b_c1_ttft", "triton_8b_qps2_out", "replicas_8b_qps8_out", "unknown_model",
                                    "unknown_gpu", "no_lengths", "odd_metric"]
    nim = rows[0]
    assert (nim.engine, nim.model, nim.precision, nim.gpu, nim.n_gpus, nim.tp, nim.pp) == (
        "NVIDIA NIM", "Llama-3.3-70B-Instruct", "fp8", "h100_sxm", 2, 2, None)
    assert (nim.isl, nim.osl, nim.concurrency, nim.request_rate, nim.metric, nim.value, nim.trust) == (
        5000, 500, 1, None, "ttft_ms", 406.77, "high")
    triton = rows[1]
    assert (triton.concurrency, triton.request_rate, triton.metric, triton.value) == (None, 2.0, "output_tok_s_total", 504)
    assert rows[5].isl is None and rows[5].osl is None and rows[5].request_rate == 100
    assert [r.trust for r in rows] == ["high", "high", "low", "low", "low", "high", "low"]
    assert rows[3].notes is None and rows[1].notes == "TensorRT-LLM 0.14 Triton backend table"
