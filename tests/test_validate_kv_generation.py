"""A row whose notes quantize the KV cache on one chip generation only (TensorRT-LLM's perf
tables: ``kv_cache_config: dtype: fp8  # Hopper: use auto``) runs 16-bit KV on another."""

from __future__ import annotations

from planner.spec.catalog import load_catalog
from planner.spec.fitted import FITTED_EFFICIENCY
from planner.validate.names import row_kv_dtype
from planner.validate.predict import efficiency_for, setup_row
from planner.validate.rows import MeasurementRow

NOTES = "llm options: attention DP, CUTLASS MoE (TRITON on Hopper), FP8 KV on Blackwell."


def _row(gpu: str, **kw: object) -> MeasurementRow:
    base: dict[str, object] = dict(id="r", engine="TensorRT-LLM", model="gpt-oss-120b", precision="fp8", gpu=gpu,
                                   n_gpus=1, tp=1, isl=1024, osl=1024, metric="output_tok_s_per_gpu", value=1.0,
                                   notes=NOTES)
    base.update(kw)
    return MeasurementRow.model_validate(base)


def test_every_catalog_gpu_states_its_generation() -> None:
    gpus = load_catalog().gpus
    assert gpus and all(g.architecture for g in gpus.values())
    assert gpus["h200-sxm"].architecture == "hopper" and gpus["b200"].architecture == "blackwell"


def test_the_rule() -> None:
    assert row_kv_dtype(stated=None, notes=NOTES, architecture="hopper", label="fp8")[0] == "bf16"
    assert row_kv_dtype(stated=None, notes=NOTES, architecture="blackwell", label="fp8") == ("fp8", None)
    assert row_kv_dtype(stated=None, notes=NOTES, architecture="", label="fp8") == ("fp8", None)  # unknown chip
    assert row_kv_dtype(stated=None, notes="FP8 weights", architecture="hopper", label="fp8") == ("fp8", None)
    assert row_kv_dtype(stated="fp8", notes=NOTES, architecture="hopper", label="fp8") == ("fp8", None)
    assert row_kv_dtype(stated=None, notes=NOTES, architecture="hopper", label="bf16") == ("bf16", None)


def test_validate_predicts_the_hopper_row_with_16_bit_kv_and_says_so() -> None:
    eff = efficiency_for("trtllm", {k: dict(v) for k, v in FITTED_EFFICIENCY.items()})
    hopper, blackwell = setup_row(_row("h200_sxm"), eff), setup_row(_row("b200"), eff)
    assert not isinstance(hopper, str) and not isinstance(blackwell, str)
    assert hopper.scenario.kv_dtype == "bf16" and blackwell.scenario.kv_dtype == "fp8"
    assert any("on blackwell only" in n and "hopper" in n for n in hopper.notes)
    stated = setup_row(_row("h200_sxm", kv_dtype="fp8"), eff)
    assert not isinstance(stated, str) and stated.scenario.kv_dtype == "fp8"
    # the 16-bit cache holds half the sequences: the KV-bound batch halves (within the rounding)
    fp8_batch = stated.max_batch
    assert 0.45 * fp8_batch <= hopper.max_batch <= 0.55 * fp8_batch
