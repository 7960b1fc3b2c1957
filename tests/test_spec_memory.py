"""Speculative decoding's drafter in the memory ledger (planner.physics.draft): golden rows by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planner.physics.draft import draft_memory, eagle_head_params
from planner.sizing.plan import plan
from planner.spec.catalog import get_model, load_catalog
from planner.spec.scenario import Scenario
from tests.test_derivations import check

CATALOG = load_catalog()
BASE = {"model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8", "kv_dtype": "bf16"}
DRAFT_8B = {"draft_tokens": 4, "draft_model": "llama-3.1-8b", "draft_weights_dtype": "bf16"}

# Llama-3.1-8B (config.json: h 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128, I 14336, V 128256):
#   attention per layer = q 4096² + k,v 2 × 4096 × 1024 + o 4096² + 2 norms 2 × 4096
#                       = 16,777,216 + 8,388,608 + 16,777,216 + 8,192 = 41,951,232
#   MLP per layer       = 3 × 4096 × 14336 = 176,160,768
#   32 layers           = 32 × 218,112,000 = 6,979,584,000
#   embedding + LM head + final norm = 2 × 128256 × 4096 + 4096 = 1,050,677,248
#   parameters = 8,030,261,248;  bf16 weights = 2 × that = 16,060,522,496 bytes (on one GPU at TP1)
#   KV/token = 2 × 32 × 8 × 128 × 2 = 131,072 bytes
# Llama-3.1-70B bf16 KV/token = 2 × 80 × 8 × 128 × 2 = 327,680 bytes.
DRAFT_8B_WEIGHT_BYTES = 16_060_522_496
DRAFT_8B_KV_BYTES_PER_TOKEN = 131_072
TARGET_70B_KV_BYTES_PER_TOKEN = 327_680
# The capacity reduction beside 70B fp8 on an H200 at TP1 (budget B before the draft, from the
# engine accounting: today 0.9 × 150,110,011,392 − 70,553,706,496 − 1.705e9 activations − 1e9
# non-torch = 61.84e9 bytes):
#   max sequences ∝ (B − 16,060,522,496) / (327,680 + 131,072) against B / 327,680
#   = 45.78e9 / 61.84e9 × 327,680 / 458,752 = 0.7403 × 0.7143 = 0.5288: capacity falls by 47.1%.


def test_draft_model_weights_and_kv_by_hand() -> None:
    dm = draft_memory(target=get_model("llama-3.1-70b"), draft=get_model("llama-3.1-8b"), draft_tokens=4,
                      draft_layers=1, weights_dtype="bf16", kv_dtype="bf16", tp=1)
    assert dm.kind == "model"
    assert dm.params == 8_030_261_248
    assert dm.weight_bytes == dm.weight_bytes_per_gpu == DRAFT_8B_WEIGHT_BYTES
    assert dm.kv_bytes_per_token == dm.kv_bytes_per_token_per_gpu == DRAFT_8B_KV_BYTES_PER_TOKEN


def test_draft_beside_70b_fp8_on_h200_cuts_capacity() -> None:
    off = plan(Scenario(**BASE)).memory
    on = plan(Scenario(**BASE, speculative=DRAFT_8B)).memory
    assert off.draft_weight_bytes_per_gpu == 0.0 and off.draft_kv_bytes_per_token_per_gpu == 0.0
    assert on.draft_weight_bytes_per_gpu == DRAFT_8B_WEIGHT_BYTES
    assert on.draft_kv_bytes_per_token_per_gpu == DRAFT_8B_KV_BYTES_PER_TOKEN
    assert on.kv_bytes_per_token_per_gpu == off.kv_bytes_per_token_per_gpu == TARGET_70B_KV_BYTES_PER_TOKEN
    assert on.kv_budget_bytes == pytest.approx(off.kv_budget_bytes - DRAFT_8B_WEIGHT_BYTES, rel=1e-12)
    hand = (off.kv_budget_bytes - DRAFT_8B_WEIGHT_BYTES) / off.kv_budget_bytes * TARGET_70B_KV_BYTES_PER_TOKEN / (
        TARGET_70B_KV_BYTES_PER_TOKEN + DRAFT_8B_KV_BYTES_PER_TOKEN)
    assert on.max_sequences / off.max_sequences == pytest.approx(hand, rel=1e-9)
    assert on.max_sequences < 0.6 * off.max_sequences  # the draft costs this layout over 40% of its batch


def test_draft_rows_have_derivations() -> None:
    p = plan(Scenario(**BASE, speculative=DRAFT_8B))
    d = p.derivations
    for key in ("memory.draft_params", "memory.draft_weight_bytes", "memory.draft_weight_bytes_per_gpu",
                "memory.draft_kv_bytes_per_token", "memory.draft_kv_bytes_per_token_per_gpu",
                "memory.cache_bytes_per_token_per_gpu"):
        assert key in d, key
    assert d["memory.draft_weight_bytes"].value == DRAFT_8B_WEIGHT_BYTES
    assert "draft weights per GPU" in d["memory.kv_budget_bytes"].formula
    assert "target + draft" in d["memory.max_sequences"].formula
    assert "2 × 32 × 8 × 128 × 2" == d["memory.draft_kv_bytes_per_token"].substituted


def test_eagle_head_by_hand() -> None:
    # 70B: embedding + LM head = 2 × 128256 × 8192 = 2,101,346,304; P = 70,553,706,496
    # head = (P − 2,101,346,304) / 80 + 2 × 8192² = 855,654,502.4 + 134,217,728 = 989,872,230.4 parameters
    # head KV/token = 327,680 / 80 = 4,096 bytes (one layer of the target's shape)
    target = get_model("llama-3.1-70b")
    assert eagle_head_params(target, layers=1) == pytest.approx(989_872_230.4, rel=1e-12)
    dm = draft_memory(target=target, draft=None, draft_tokens=3, draft_layers=1, weights_dtype="fp8",
                      kv_dtype="bf16", tp=1)
    assert dm.kind == "head"
    assert dm.weight_bytes == pytest.approx(989_872_230.4, rel=1e-12)
    assert dm.kv_bytes_per_token == 4096
    off = plan(Scenario(**BASE)).memory
    on = plan(Scenario(**BASE, speculative={"draft_tokens": 3})).memory
    assert on.kv_budget_bytes == pytest.approx(off.kv_budget_bytes - dm.weight_bytes, rel=1e-12)
    assert 0.95 * off.max_sequences < on.max_sequences < off.max_sequences  # a head is small


def test_draft_sharded_over_tp() -> None:
    # TP2: each rank holds half the draft's weights and ceil(8 / 2) = 4 of its 8 KV heads.
    dm = draft_memory(target=get_model("llama-3.1-70b"), draft=get_model("llama-3.1-8b"), draft_tokens=4,
                      draft_layers=1, weights_dtype="bf16", kv_dtype="bf16", tp=2)
    assert dm.weight_bytes_per_gpu == DRAFT_8B_WEIGHT_BYTES / 2
    assert dm.kv_bytes_per_token_per_gpu == DRAFT_8B_KV_BYTES_PER_TOKEN / 2
    on = plan(Scenario(**{**BASE, "parallel": {"tp": 2}}, speculative=DRAFT_8B)).memory
    assert on.draft_weight_bytes_per_gpu == DRAFT_8B_WEIGHT_BYTES / 2


def test_speculation_off_charges_nothing() -> None:
    for spec in ({}, {"draft_tokens": 0, "draft_model": "llama-3.1-8b"}):
        m = plan(Scenario(**BASE, speculative=spec)).memory
        assert m.draft_weight_bytes_per_gpu == 0.0 and m.draft_name == ""
        assert math.isclose(m.max_sequences, plan(Scenario(**BASE)).memory.max_sequences)


def test_unknown_draft_model_names_the_field() -> None:
    from planner.errors import ScenarioError
    from planner.spec.scenario import scenario_from_dict

    with pytest.raises(ScenarioError, match="draft_model"):
        scenario_from_dict({**BASE, "speculative": {"draft_tokens": 2, "draft_model": "no-such-model"}})


def test_memory_page_shows_the_draft_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Speculation on (an EAGLE-style head): the Memory page shows the drafter's rows and its
    derivations, and max sequences falls."""
    from tests.apptest_v2 import new_app_test, use_migrated_sqlite

    use_migrated_sqlite(tmp_path, monkeypatch)
    at = new_app_test()
    at.run()
    at.switch_page("pages/memory.py").run()
    assert not at.exception, at.exception
    labels = [m.label for m in at.metric]
    assert "Draft weights per GPU" not in labels
    before = float(next(m.value for m in at.metric if m.label == "Max sequences").replace(",", ""))
    at.number_input(key="draft").set_value(3).run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert "Draft weights per GPU" in metrics and "Draft KV per token" in metrics
    assert float(metrics["Max sequences"].replace(",", "")) < before
    assert any("memory.draft_weight_bytes_per_gpu" in m.value or "Draft weights per GPU" in m.value
               for m in at.markdown)


def test_the_sweep_sizes_with_the_draft_charged() -> None:
    """The operating arrays every candidate is sized with (sweep, fleet) hold fewer sequences with
    the draft, by the ledger's own ratio (one computation: replica_memory)."""
    import numpy as np

    from planner.sizing.operating import operating_arrays, replica_memory
    from planner.spec.context import resolve

    def arrays(spec: dict[str, object]) -> tuple[float, float, float]:
        r = resolve(Scenario(**BASE, speculative=spec))
        op = operating_arrays(r, tp=np.array([1.0, 2.0]), pp=np.array([1.0, 1.0]), ep=np.array([1.0, 1.0]),
                              mode="colocated")
        mem = replica_memory(r, tp=np.array([1.0]), pp=np.array([1.0]), ep=np.array([1.0]))
        return float(op.max_sequences[0]), float(op.max_sequences[1]), float(np.asarray(mem.kv_budget_bytes)[0])

    off1, off2, b_off = arrays({})
    on1, on2, b_on = arrays(DRAFT_8B)
    assert b_on == pytest.approx(b_off - DRAFT_8B_WEIGHT_BYTES, rel=1e-12)
    assert on1 < 0.6 * off1  # TP1: the 8B draft takes over 40% of the batch
    assert off2 > on2 > on1  # TP2 shards the draft too, and gains back capacity


def test_draft_heads_must_split_over_tp(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drafter runs at the target's TP: a draft whose heads TP does not divide is refused, naming the field."""
    import planner.spec.scenario as scenario_mod
    from planner.errors import ScenarioError

    twelve = get_model("llama-3.1-8b").model_copy(update={"id": "twelve-heads", "heads": 12, "kv_heads": 4})
    real = scenario_mod.get_model
    monkeypatch.setattr(scenario_mod, "get_model", lambda i: twelve if i == "twelve-heads" else real(i))
    data = {"model": "llama-3.1-405b", "gpu": "h200-sxm", "weights_dtype": "fp8", "parallel": {"tp": 8},
            "speculative": {"draft_tokens": 2, "draft_model": "twelve-heads"}}
    with pytest.raises(ScenarioError, match=r"speculative.draft_model.*12 attention heads"):
        scenario_mod.scenario_from_dict(data)
    scenario_mod.scenario_from_dict({**data, "parallel": {"tp": 4}})  # 12 heads split over TP 4


@settings(max_examples=60, deadline=None)
@given(target=st.sampled_from(sorted(CATALOG.models)), draft=st.sampled_from([None, *sorted(CATALOG.models)]),
       tp=st.sampled_from([1, 2, 4, 8]), wd=st.sampled_from(["bf16", "fp8", "int4"]),
       dwd=st.sampled_from([None, "bf16", "fp8"]), kd=st.sampled_from(["bf16", "fp8"]),
       layers=st.integers(1, 3), k=st.integers(1, 8))
def test_draft_derivations_evaluate_to_their_values(target: str, draft: str | None, tp: int, wd: str, dwd: str | None,
                                                   kd: str, layers: int, k: int) -> None:
    """Every draft row's working, substituted, evaluates to its value (any catalog target and draft)."""
    from planner.errors import PlannerError
    from planner.spec.scenario import scenario_from_dict
    try:
        sc = scenario_from_dict({"model": target, "gpu": "h200-sxm", "weights_dtype": wd, "kv_dtype": kd,
                                 "parallel": {"tp": tp},
                                 "speculative": {"draft_tokens": k, "draft_model": draft, "draft_layers": layers,
                                                 "draft_weights_dtype": dwd}})
        p = plan(sc)
    except PlannerError:
        assume(False)
        return
    rows = {n: dv for n, dv in p.derivations.items() if n.startswith("memory.")}
    assert "memory.draft_weight_bytes_per_gpu" in rows
    for name, dv in rows.items():
        check(name, dv.substituted, dv.value)
