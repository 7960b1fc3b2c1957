"""A term cross-validation's folds run apart (``cross_validate_terms(..., only=...)``, what
``bench/moe_accuracy.py --jobs N`` hands each process) give what one call gives."""

from __future__ import annotations

from planner.validate import HANDOFF_TERM, cross_validate_terms, parse_measurements

ROW = {"engine": "Dynamo + SGLang", "model": "llama-3.1-70b", "precision": "fp8", "n_gpus": 12, "tp": 8,
       "isl": 1024, "osl": 1024, "metric": "ttft_ms",
       "disaggregated": {"prefill_gpus": 4, "decode_gpus": 8, "prefill_tp": 4, "prefill_workers": 1,
                         "decode_tp": 8, "decode_workers": 1}}


def test_folds_run_apart_give_what_one_call_gives() -> None:
    rows = parse_measurements([{**ROW, "id": f"{g}_{c}", "gpu": g, "concurrency": c, "value": v}
                               for g, v0 in (("h100_sxm", 300.0), ("h200_sxm", 200.0))
                               for c, v in ((1, v0), (4, v0 * 1.1), (16, v0 * 1.5))])
    whole, fitted = cross_validate_terms(rows, "gpu", [HANDOFF_TERM])
    assert [r.id for r in whole] == [r.id for r in rows] and len(fitted) == 2
    parts = {}
    for fold in fitted:
        got, one = cross_validate_terms(rows, "gpu", [HANDOFF_TERM], only={fold})
        assert one == {fold: fitted[fold]}
        assert len(got) == 3 and len({r.id.split("_")[0] for r in got}) == 1  # one GPU's three runs
        parts.update({r.id: r for r in got})
    assert sorted(parts) == sorted(r.id for r in rows)
    assert all(parts[r.id].predicted == r.predicted and parts[r.id].error_pct == r.error_pct for r in whole)
    # the two folds hold each other's runs out: their fits differ, as the runs do
    assert len({v[HANDOFF_TERM] for v in fitted.values()}) == 2
    assert cross_validate_terms(rows, "gpu", [HANDOFF_TERM], only={"no such fold"}) == ([], {})


def test_moe_names_the_shipped_terms_beside_any_named_after_it() -> None:
    from planner.validate import HANDOFF_ITERATIONS_TERM, MOE_TERMS, named_terms

    assert named_terms("moe") == list(MOE_TERMS)
    assert named_terms(f" moe , {HANDOFF_ITERATIONS_TERM}, moe") == [*MOE_TERMS, HANDOFF_ITERATIONS_TERM]
    assert named_terms("disagg_handoff_s,,") == ["disagg_handoff_s"] and named_terms("") == []
