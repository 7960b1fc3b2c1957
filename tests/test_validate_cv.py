"""Cross-validation that cannot fool itself, grouping, and the coverage rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.validate import (
    UNSTATED_LOAD_REASON,
    EfficiencySet,
    MeasurementRow,
    RowResult,
    cross_validate,
    fold_assignment,
    fold_split,
    grouped_summary,
    load_measurements,
    predict_row,
    publication,
    setup_row,
    setup_rows,
    validate_rows,
)

# A copy of ../shared/data/published_calibration.json (the published measurements the fit uses), so
# a clean clone checks the folds on the real file whether or not ../shared is beside it.
DATA = Path(__file__).resolve().parent / "data" / "published_calibration.json"
TRUTH = EfficiencySet(bandwidth=0.7, compute=0.55, step_overhead_s=0.0, layer_overhead_s=60e-6)


def _row(i: int, **kw: object) -> MeasurementRow:
    base: dict[str, object] = {"id": f"r{i}", "engine": "TensorRT-LLM", "model": "Llama-3.1-8B", "precision": "bf16",
                               "gpu": "h100_sxm", "n_gpus": 1, "tp": 1, "isl": 512, "osl": 128, "concurrency": 8,
                               "metric": "itl_ms", "value": 10.0, "source": "paper A"}
    return MeasurementRow(**{**base, **kw})


def test_publication_groups_mirrors_and_mlperf_rounds() -> None:
    a = "https://github.com/mlcommons/inference_results_v5.0/blob/main/closed/NVIDIA/results/x/Server/log.txt"
    b = "https://github.com/mlcommons/inference_results_v5.0/blob/main/closed/NVIDIA/results/y/Offline/log.txt (mirror)"
    assert publication(a) == publication(b) == "mlcommons/inference_results_v5.0"
    assert publication("https://blog.example/post#table (summary of X)") == "https://blog.example/post"
    assert publication(None) == "(no source)"
    assert publication("https://a.example/1") != publication("https://a.example/2")


def test_loso_folds_hold_out_whole_publications() -> None:
    rows = load_measurements(DATA)
    assignment = fold_assignment(rows, "loso")
    folds = set(assignment.values())
    assert len(folds) == len({publication(r.source) for r in rows}) >= 5
    seen: list[str] = []
    for fold in folds:
        train, test = fold_split(rows, assignment, fold)
        assert test and len(train) + len(test) == len(rows)
        held_out = {publication(r.source) for r in test}
        assert held_out == {fold}
        assert not held_out & {publication(r.source) for r in train}  # no row of the held-out source is fitted on
        seen += [r.id for r in test]
    assert sorted(seen) == sorted(r.id for r in rows)  # every row predicted exactly once


def test_kfold_folds_are_a_seeded_partition() -> None:
    rows = [_row(i) for i in range(23)]
    a = fold_assignment(rows, "kfold")
    assert a == fold_assignment(rows, "kfold") and a != fold_assignment(rows, "kfold", seed=1)
    sizes = sorted(sum(1 for v in a.values() if v == f) for f in set(a.values()))
    assert sizes == [4, 4, 5, 5, 5]
    for fold in set(a.values()):
        train, test = fold_split(rows, a, fold)
        assert not {r.id for r in train} & {r.id for r in test}


def _truthful(rows: list[MeasurementRow], scale: float) -> list[MeasurementRow]:
    out = []
    for r in rows:
        s = setup_row(r, TRUTH)
        assert not isinstance(s, str), s
        out.append(r.model_copy(update={"value": predict_row(s, TRUTH)[0] * scale}))
    return out


def test_loso_prediction_does_not_see_the_held_out_source() -> None:
    """Source B's values are 3× the physics; fitted without B (on A's 16 rows), B's rows are predicted at
    the physics (−67%): an in-sample fit on all rows would pull towards them."""
    a_rows, b_rows = [], []
    i = 0
    for isl, osl in ((128, 128), (2048, 128), (1000, 1000), (4000, 500)):
        for conc, metric in ((1, "itl_ms"), (32, "itl_ms"), (1, "ttft_ms"), (64, "output_tok_s_total")):
            i += 1
            a_rows.append(_row(i, isl=isl, osl=osl, concurrency=conc, metric=metric))
    for j, metric in enumerate(("itl_ms", "output_tok_s_total")):
        b_rows.append(_row(100 + j, isl=700, osl=300, concurrency=16, metric=metric, source="paper B"))
    rows = _truthful(a_rows, 1.0) + _truthful(b_rows, 3.0)
    res = {r.id: r for r in cross_validate(rows, "loso")}
    for r in b_rows:
        assert res[r.id].error_pct == pytest.approx(-200 / 3, abs=3.0)
        assert res[r.id].source == "paper B"


def _result(i: int, tp: int, gpu: str, metric: str, err: float | None) -> RowResult:
    return RowResult(id=f"x{i}", metric=metric, engine="vLLM", family="vllm", measured=1.0,
                     predicted=None if err is None else 1 + err / 100, error_pct=err, skipped_reason=None if err is not
                     None else "why", scenario=None, operating_point=None, tp=tp, gpu=gpu, source="s")


def test_grouped_summary_by_tp_and_gpu() -> None:
    res = [_result(0, 1, "h100-sxm", "itl_ms", 10.0), _result(1, 1, "h100-sxm", "tpot_ms", -30.0),
           _result(2, 1, "h200-sxm", "itl_ms", 20.0), _result(3, 8, "h200-sxm", "output_tok_s_total", 5.0),
           _result(4, 8, "h200-sxm", "output_tok_s_per_gpu", None), _result(5, 2, "h100-sxm", "ttft_ms", -4.0)]
    tp = grouped_summary(res, "tp")
    assert list(tp) == ["tp1", "tp2", "tp8"]  # numeric order
    itl = tp["tp1"]["itl"]  # ITL and TPOT are one quantity
    assert (itl.count, itl.median_signed_error_pct, itl.median_abs_error_pct) == (3, 10.0, 20.0)
    assert (tp["tp8"]["throughput"].count, tp["tp8"]["throughput"].skipped) == (1, 1)
    gpu = grouped_summary(res, "gpu")
    assert gpu["h100-sxm"]["all"].count == 3 and gpu["h200-sxm"]["all"].median_signed_error_pct == 12.5


def test_unstated_load_skips_every_metric_of_the_run() -> None:
    online = [_row(1, concurrency=None, metric="ttft_ms"), _row(2, concurrency=None, metric="itl_ms"),
              _row(3, concurrency=None, metric="output_tok_s_total")]
    offline = [_row(4, concurrency=None, metric="output_tok_s_total", isl=128)]  # throughput only: max throughput
    setups = setup_rows(online + offline, TRUTH)
    assert setups[:3] == [UNSTATED_LOAD_REASON] * 3
    assert not isinstance(setups[3], str) and setups[3].load == "max_throughput"
    # Predicting part of a file judges the run over the whole file.
    part = validate_rows(online[2:], context=online)
    assert part[0].skipped_reason == UNSTATED_LOAD_REASON and part[0].predicted is None


def test_unstated_gpu_variant_assumes_the_common_one() -> None:
    s = setup_row(_row(1, gpu="a100_unspecified"), TRUTH)
    assert not isinstance(s, str) and s.scenario.gpu == "a100-sxm-80gb"
    assert any("a100_unspecified" in n and "a100-sxm-80gb" in n for n in s.notes)
    assert "unknown gpu 'tpu_v5e'" in str(setup_row(_row(2, gpu="tpu_v5e"), TRUTH))
