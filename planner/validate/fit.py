"""Fit the efficiency factors on measurements, and cross-validate the fit.

Least squares on log error, log(predicted / measured), over every row the
planner can predict (scipy.optimize.least_squares, bounded), once per engine
family with at least ``MIN_FAMILY_ROWS`` rows and once over all rows (the
``generic`` default).  Two cross-validation schemes score rows the fit did
not see:

* ``kfold``: rows dealt at random (seeded) into ``FOLDS`` folds; each fold is
  predicted by a table fitted on the other folds.
* ``loso`` (leave one source out): each publication
  (:func:`~planner.validate.rows.publication`) is predicted by a table fitted
  on every other publication, so a paper's shared setup and measurement
  habits cannot leak from its fitted rows into its scored ones.
* ``gpu`` (leave one GPU out): each catalog GPU's rows are predicted by a table
  fitted on the other GPUs' rows: how the planner does on a GPU it was not fitted on.
* ``engine`` (leave one engine out): the same with the row's engine as published
  (SGLang, TensorRT-LLM, Dynamo + SGLang, ...).

``fold_assignment`` and ``fold_split`` are public so a test can check that no
row of a held-out fold is in the rows its table was fitted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from scipy.optimize import least_squares

from planner.physics.terms import TERM_NAMES
from planner.validate.names import engine_family
from planner.validate.predict import EfficiencySet, RowSetup, efficiency_for, predict_row, setup_rows, shared_runs
from planner.validate.report import RowResult, gpu_label, row_result
from planner.validate.rows import MeasurementRow, publication

__all__ = [
    "CV_SCHEMES",
    "FOLDS",
    "MIN_FAMILY_ROWS",
    "LOSS",
    "MAX_BANDWIDTH_EFFICIENCY",
    "LOSS_SCALE",
    "SEED",
    "CvScheme",
    "FIT_TERMS",
    "MOE_TERM_NAMES",
    "TERM_SEARCH",
    "cross_validate",
    "fit_efficiency",
    "fit_table",
    "fold_assignment",
    "fold_split",
    "predictable_setups",
]

CvScheme = Literal["kfold", "loso", "gpu", "engine"]
CV_SCHEMES: tuple[CvScheme, ...] = ("kfold", "loso", "gpu", "engine")
MIN_FAMILY_ROWS = 12  # fewer rows than this: the family uses the generic fit
FOLDS = 5
SEED = 0
_START = EfficiencySet(bandwidth=0.7, compute=0.5, step_overhead_s=1e-3, layer_overhead_s=50e-6)
# No kernel streams HBM at its datasheet rate: STREAM-like copies reach ~90-93% of it
# on H100/H200.  The fit's bandwidth efficiency stays below this (with a per-layer decode
# term it otherwise trades bandwidth for overhead and pins itself at 1.0).
MAX_BANDWIDTH_EFFICIENCY = 0.92
# A fitted parameter: (unit it is searched in, lower, upper, start, typical step).
# Two overheads: a fixed cost per iteration (scheduling, sampling, the captured
# decode graph's launch) and a launch cost per layer that only eager passes pay
# (prefill and hybrid iterations; decode replays a CUDA graph).
_BASE: dict[str, tuple[float, float, float, float, float]] = {
    "bandwidth": (1.0, 0.05, MAX_BANDWIDTH_EFFICIENCY, 0.7, 0.1),
    "compute": (1.0, 0.05, 1.0, 0.5, 0.1),
    "step_overhead_s": (1e-3, 0.0, 50.0, 1.0, 0.5),
    "layer_overhead_s": (1e-6, 0.0, 1000.0, 50.0, 10.0),
}
# The physics terms a fit may add (planner.physics.terms), in the same form.
TERM_SEARCH: dict[str, tuple[float, float, float, float, float]] = {
    "collective_hop_s": (1e-6, 0.0, 50.0, 1.0, 1.0),
    "sequence_overhead_s": (1e-6, 0.0, 500.0, 5.0, 5.0),
    "gemm_half_width": (1.0, 0.0, 8192.0, 256.0, 256.0),
    "graph_layer_overhead_s": (1e-6, 0.0, 500.0, 20.0, 10.0),
    "collective_call_s": (1e-6, 0.0, 100.0, 10.0, 5.0),
    "moe_layer_overhead_s": (1e-6, 0.0, 500.0, 20.0, 10.0),
    "moe_token_overhead_s": (1e-9, 0.0, 10000.0, 100.0, 50.0),
    "mtp_acceptance": (0.01, 5.0, 99.0, 60.0, 10.0),
    "moe_prefill_layer_overhead_s": (1e-6, 0.0, 5000.0, 50.0, 50.0),
    "moe_prefill_token_overhead_s": (1e-9, 0.0, 1000.0, 10.0, 10.0),
    "all_to_all_call_s": (1e-6, 0.0, 1000.0, 20.0, 20.0),
    "mtp_acceptance_trtllm": (0.01, 5.0, 99.0, 60.0, 10.0),
    "moe_prefill_slot_passes": (0.1, 0.0, 1000.0, 40.0, 20.0),
    "moe_step_overhead_share": (0.01, 0.0, 150.0, 100.0, 20.0),
}
# The terms the shipped fit includes: each kept only where it lowered both the
# 5-fold and the leave-one-source-out error (README "How accurate is it?").  collective_call_s
# (latency per TP all-reduce call) is kept on LOSO alone (branch wip-fit2-adopt; 5-fold not run).  Before it, none
# is (issue 24): the per-layer cost of a decode graph (graph_layer_overhead_s) took the
# in-sample ITL error from 13.4% to 4.3% but pinned bandwidth at its bound with a
# 7 ms per-step overhead for an 80-layer model, and its cross-validation did not finish
# on the shared machine; the hop latency, per-sequence overhead and GEMM shard terms
# were rejected in issue 14 (no signal, 5-fold worse, LOSO worse) and not re-run.
FIT_TERMS: tuple[str, ...] = ("collective_call_s",)
# The MoE layer terms (planner.physics.kernels.moe_overhead_s), fitted apart (planner.validate.moefit).
# Of the MoE prefill terms only the slot passes are among them; moe_prefill_layer_overhead_s and
# moe_prefill_token_overhead_s are off, fitted only when named (bench/moe_accuracy.py --terms ...), as is
# disagg_handoff_iterations (the decode worker's take-in: cross-validated, not kept).
MOE_TERM_NAMES: tuple[str, ...] = ("moe_layer_overhead_s", "moe_token_overhead_s", "mtp_acceptance", "all_to_all_call_s",
                                   "mtp_acceptance_trtllm", "moe_prefill_slot_passes",
                                   "moe_step_overhead_share", "moe_prefill_host_layer_s", "disagg_handoff_s")
_TOL = 1e-5  # relative change in cost / parameters at which a fit stops (0.001% of the error)
# Robust loss on the log errors: rows within ~LOSS_SCALE (20%) count as squares, beyond it
# linearly, so a handful of rows the model cannot describe (a TTFT 50× off because the row's
# memory budget is not the one stated) do not pull every efficiency to its bound.
LOSS = "soft_l1"
LOSS_SCALE = 0.2


def _space(terms: Sequence[str]) -> dict[str, tuple[float, float, float, float, float]]:
    return {**_BASE, **{k: TERM_SEARCH[k] for k in terms}}


def _eff(x: np.ndarray, terms: Sequence[str]) -> EfficiencySet:
    values = {name: float(v) * spec[0] for (name, spec), v in zip(_space(terms).items(), x, strict=True)}
    # Terms not fitted are off (0), not the shipped defaults: a fit is reproducible.  The MoE
    # layer terms stay at theirs (fitted on MoE rows with these efficiencies held,
    # planner.validate.moefit): they touch only MoE models, which a calibration may include.
    off = {k: 0.0 for k in TERM_NAMES if k not in MOE_TERM_NAMES}
    return EfficiencySet(**{"step_overhead_s": 0.0, **off, **values})


def predictable_setups(rows: Sequence[MeasurementRow], context: Sequence[MeasurementRow] | None = None
                       ) -> list[RowSetup]:
    """The rows the planner can predict, mapped once (the mapping does not
    depend on the efficiencies); ``context``: the whole file, for the run rule."""
    return [s for s in setup_rows(rows, _START, context) if not isinstance(s, str)]


def fit_efficiency(setups: Sequence[RowSetup], start: EfficiencySet | None = None,
                   terms: Sequence[str] = FIT_TERMS) -> EfficiencySet:
    """argmin Σ log(predicted / measured)² over bandwidth, compute, overhead per
    layer and the physics ``terms``, from ``start`` (a fit on similar rows
    converges in fewer steps)."""
    space = _space(terms)

    def residuals(x: np.ndarray) -> np.ndarray:
        eff = _eff(x, terms)
        with shared_runs():
            return np.array([np.log(predict_row(s, eff)[0] / s.row.value) for s in setups])

    given = start.model_dump() if start else {}
    lower = np.array([v[1] for v in space.values()])
    upper = np.array([v[2] for v in space.values()])
    x0 = np.array([given[k] / v[0] if given.get(k) is not None else v[3] for k, v in space.items()])
    sol = least_squares(residuals, np.clip(x0, lower, upper), bounds=(lower, upper),
                        x_scale=np.array([v[4] for v in space.values()]), diff_step=1e-3, ftol=_TOL, xtol=_TOL,
                        loss=LOSS, f_scale=LOSS_SCALE)
    return _eff(sol.x, terms)


def fit_table(setups: Sequence[RowSetup], start: dict[str, dict[str, float]] | None = None,
              terms: Sequence[str] = FIT_TERMS) -> dict[str, dict[str, float]]:
    """{"generic": ..., family: ...}; a family short of rows copies generic."""
    generic = fit_efficiency(setups, efficiency_for("generic", start) if start else None, terms)
    table = {"generic": generic.model_dump()}
    for family in ("trtllm", "vllm"):
        mine = [s for s in setups if s.family == family]
        table[family] = (fit_efficiency(mine, efficiency_for(family, start) if start else generic, terms).model_dump()
                         if len(mine) >= MIN_FAMILY_ROWS else generic.model_dump())
    return table


def fold_assignment(rows: Sequence[MeasurementRow], scheme: CvScheme, *, folds: int = FOLDS,
                    seed: int = SEED) -> dict[str, str]:
    """Row id → fold label: ``fold 0`` … for ``kfold``, the publication for ``loso``, the
    catalog GPU for ``gpu``, the engine as published for ``engine``."""
    if scheme == "loso":
        return {r.id: publication(r.source) for r in rows}
    if scheme == "gpu":
        return {r.id: gpu_label(r.gpu) for r in rows}
    if scheme == "engine":
        return {r.id: r.engine.strip() for r in rows}
    order = np.random.default_rng(seed).permutation(len(rows))
    return {rows[int(i)].id: f"fold {k % folds}" for k, i in enumerate(order)}


def fold_split(rows: Sequence[MeasurementRow], assignment: dict[str, str], fold: str
               ) -> tuple[list[MeasurementRow], list[MeasurementRow]]:
    """(rows the fold's table is fitted on, rows it predicts)."""
    return [r for r in rows if assignment[r.id] != fold], [r for r in rows if assignment[r.id] == fold]


def cross_validate(rows: Sequence[MeasurementRow], scheme: CvScheme = "kfold", *, folds: int = FOLDS,
                   seed: int = SEED, terms: Sequence[str] = FIT_TERMS,
                   start: dict[str, dict[str, float]] | None = None) -> list[RowResult]:
    """Each row predicted by a table fitted without its fold, in file order."""
    rows = list(rows)
    assignment = fold_assignment(rows, scheme, folds=folds, seed=seed)
    setup_of = dict(zip((r.id for r in rows), setup_rows(rows, _START, rows), strict=True))
    everything = [s for s in setup_of.values() if not isinstance(s, str)]
    start = start or (fit_table(everything, terms=terms) if everything else None)
    out: dict[str, RowResult] = {}
    for fold in sorted(set(assignment.values())):
        train, test = fold_split(rows, assignment, fold)
        fitted = [s for r in train if not isinstance(s := setup_of[r.id], str)]
        table = fit_table(fitted, start, terms) if fitted else None
        for r in test:
            setup = setup_of[r.id]
            if table is None and not isinstance(setup, str):
                setup = f"cross-validation ({scheme}): no predictable row outside '{fold}' to fit on"
            eff = efficiency_for(engine_family(r.engine), table) if table else _START
            with shared_runs():
                out[r.id] = row_result(r, setup, eff)
    return [out[r.id] for r in rows]
