"""A disaggregated run's decode running-batch cap (planner.validate.recipes): clients
beyond the decode pool's slots wait for one before their first token."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from planner.spec.fitted import FITTED_EFFICIENCY
from planner.validate.predict import efficiency_for, operating_point, setup_row
from planner.validate.recipes import RECIPES_PATH, decode_max_batch, inferencex_recipes
from planner.validate.rows import MeasurementRow, load_measurements
from tests.validate_support import inferencex_row

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

# InferenceX's GB200 FP8 8k/1k point: 1 prefill worker DEP8, 3 decode workers TEP8 at
# max_batch_size 1 (recipes/trtllm/gb200-fp8/8k1k/stp/ctx1_gen3_tep8_batch1_eplb0_mtp0_6.yaml), 6 clients.
TEP = dict(engine="Dynamo + TensorRT-LLM", gpu="gb200", precision="fp8", n_gpus=32, tp=8, ep=8, isl=8192, osl=1024,
           concurrency=6, speculative="none", multi_node=True, value=1.0,
           disaggregated=dict(prefill_gpus=8, decode_gpus=24, prefill_tp=8, prefill_ep=8, prefill_dp_attention=True,
                              prefill_workers=1, decode_tp=8, decode_ep=8, decode_dp_attention=False,
                              decode_workers=3))
# ... and 3 prefill DEP8 workers with 1 decode worker DEP16 at 32 per rank, 615 clients.
DEP = dict(TEP, n_gpus=40, tp=16, ep=16, concurrency=615,
           disaggregated=dict(TEP["disaggregated"], prefill_gpus=24, prefill_workers=3, decode_gpus=16, decode_tp=16,
                              decode_ep=16, decode_dp_attention=True, decode_workers=1))
EFF = {k: dict(v) for k, v in FITTED_EFFICIENCY.items()}


def _setup(row: MeasurementRow):
    setup = setup_row(row, efficiency_for("trtllm", EFF))
    assert not isinstance(setup, str), setup
    return setup


def test_the_shipped_table_validates_and_names_one_batch_per_point() -> None:
    table = inferencex_recipes()
    doc = json.loads(RECIPES_PATH.read_text())
    assert len(table) == sum(len(r["concurrency"]) for r in doc["recipes"]) > 300  # no point listed twice
    for r in table.values():
        assert f"_batch{r.decode_batch_per_rank}_" in r.recipe
        assert r.framework == "dynamo-trt"
    assert "SemiAnalysisAI/InferenceX" in doc["source"]


def test_a_recipe_point_gets_its_batch_per_worker() -> None:
    cap, note = decode_max_batch(inferencex_row(**TEP))
    assert cap == 1 and note is not None and "ctx1_gen3_tep8_batch1" in note and "hold 3 of 6 clients" in note
    cap, note = decode_max_batch(inferencex_row(**DEP))
    assert cap == 32 * 16 and note is not None and "32 per attention-DP rank × 16 ranks" in note


def test_a_stated_cap_wins_and_other_runs_have_none() -> None:
    stated = dict(TEP, disaggregated=dict(TEP["disaggregated"], decode_max_batch=5))
    assert decode_max_batch(inferencex_row(**stated)) == (5, None)
    assert decode_max_batch(inferencex_row(**dict(TEP, concurrency=7))) == (None, None)  # not a recipe's point
    assert decode_max_batch(inferencex_row(**dict(TEP, engine="Dynamo + SGLang"))) == (None, None)
    assert decode_max_batch(inferencex_row(**dict(TEP, source="https://example.com/run"))) == (None, None)
    assert decode_max_batch(inferencex_row(engine="TensorRT-LLM", value=1.0)) == (None, None)  # colocated


@pytest.mark.parametrize("bad", [0, -1, 65537, "many"])
def test_a_bad_stated_cap_names_the_field(bad: object) -> None:
    with pytest.raises(ValidationError, match="decode_max_batch"):
        inferencex_row(**dict(TEP, disaggregated=dict(TEP["disaggregated"], decode_max_batch=bad)))


def test_clients_beyond_the_decode_slots_wait_for_one() -> None:
    """6 clients, 3 slots kept full: a closed loop's other N − S clients are between
    decode slots (their prompt, its hand-off, the queue), so TTFT = (N − S)/X, and
    Little's law N = X × E2E holds."""
    row = inferencex_row(**TEP)
    capped = _setup(row)
    assert capped.max_batch == 1 and any("batch1" in n for n in capped.notes)
    open_ = _setup(inferencex_row(**dict(TEP, disaggregated=dict(TEP["disaggregated"], decode_max_batch=65536))))
    assert open_.max_batch > 6
    a, b = operating_point(capped, efficiency_for("trtllm", EFF)), operating_point(open_, efficiency_for("trtllm", EFF))
    assert a.saturated and not b.saturated and a.batch_size == pytest.approx(1.0)
    o = capped.output_tokens
    x = a.output_tok_s_per_replica / o  # requests/s
    assert 6 == pytest.approx(x * a.e2e_s, rel=1e-6)
    wait = (6 - 3) / x
    assert a.ttft_s == pytest.approx(wait, rel=1e-6)
    assert a.ttft_s > 2 * b.ttft_s  # without the cap all 6 decode at once: their TTFT is the prompt's


def test_a_cap_that_does_not_bind_changes_nothing() -> None:
    few = dict(DEP, concurrency=64)  # 64 clients under 512 slots: not a recipe point, so state the cap
    stated = _setup(inferencex_row(**dict(few, disaggregated=dict(DEP["disaggregated"], decode_max_batch=512))))
    free = _setup(inferencex_row(**few))
    eff = efficiency_for("trtllm", EFF)
    a, b = operating_point(stated, eff), operating_point(free, eff)
    assert stated.max_batch == 512 < free.max_batch
    assert a.ttft_s == pytest.approx(b.ttft_s, rel=1e-9) and a.itl_s == pytest.approx(b.itl_s, rel=1e-9)


def test_the_recipes_cover_most_inferencex_dynamo_trt_runs() -> None:
    rows = [r for r in load_measurements(SHARED / "inferencex_dsr1.json")
            if r.disaggregated is not None and "TensorRT" in r.engine and r.metric == "ttft_ms"]
    found = Counter(decode_max_batch(r)[0] is not None for r in rows)
    assert len(rows) > 100 and found[True] >= 0.8 * len(rows), found
