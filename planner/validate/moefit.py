"""Fit the MoE physics terms on MoE measurements, the dense efficiencies held.

The efficiencies (bandwidth, compute, overheads) are fitted on the dense published
rows (``planner.spec.fitted``); the MoE terms (``moe_layer_overhead_s``,
``moe_token_overhead_s``: planner.physics.kernels.moe_overhead_s) touch only MoE
models, so they are fitted on MoE rows alone with every family's efficiencies as
shipped: least squares on log(predicted / measured), the same robust loss as the
efficiency fit.  ``cross_validate_terms`` scores each row with terms fitted without
its fold (leave one GPU / engine / publication out), the test of whether a term
generalises: a term is kept only where its cross-validated error is lower than
without it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
from scipy.optimize import least_squares

from planner.spec.fitted import FITTED_EFFICIENCY
from planner.validate.fit import LOSS, LOSS_SCALE, MOE_TERM_NAMES, TERM_SEARCH, CvScheme, fold_assignment
from planner.validate.names import engine_family
from planner.validate.predict import EfficiencySet, RowSetup, efficiency_for, predict_row, setup_rows, shared_runs
from planner.validate.report import RowResult, row_result
from planner.validate.rows import MeasurementRow, run_key

__all__ = ["FIT_EXCLUDED_METRICS", "MOE_TERMS", "fitted_on", "cross_validate_terms", "fit_terms", "sample_runs"]

MOE_TERMS: tuple[str, ...] = MOE_TERM_NAMES
# The metrics the MoE terms are fitted on: the step's (TPOT, ITL, throughput).  TTFT rows are
# scored, not fitted on: a measured TTFT carries costs the model has no term for (a fixed part
# per request, 40-150 ms at one client on InferenceX, that differs between clusters running one
# recipe), and fitting the step terms to them would slow every decode step to pay for it.  The
# prefill's own MoE cost (kernels.moe_prefill_slot_s) is fitted on the step metrics too: the
# prompts' passes interrupt the colocated decode and bound a disaggregated prefill pool.
FIT_EXCLUDED_METRICS: frozenset[str] = frozenset({"ttft_ms", "e2e_s"})


def fitted_on(setup: RowSetup) -> bool:
    """Whether a row enters the MoE term fit (every row is scored)."""
    return setup.row.metric not in FIT_EXCLUDED_METRICS


_TOL = 1e-4


def _with_terms(eff: EfficiencySet, values: dict[str, float]) -> EfficiencySet:
    return eff.model_copy(update=values)


def _effs(setups: Sequence[RowSetup], table: dict[str, dict[str, float]]) -> list[EfficiencySet]:
    return [efficiency_for(engine_family(s.row.engine), table) for s in setups]


def fit_terms(setups: Sequence[RowSetup], terms: Sequence[str] = MOE_TERMS,
              table: dict[str, dict[str, float]] | None = None) -> dict[str, float]:
    """argmin over ``terms`` of Σ ρ(log(predicted / measured)), efficiencies from ``table``."""
    setups = [s for s in setups if fitted_on(s)]
    if not terms or not setups:
        return {k: 0.0 for k in terms}
    base = _effs(setups, table or FITTED_EFFICIENCY)
    space = [TERM_SEARCH[k] for k in terms]

    def values(x: np.ndarray) -> dict[str, float]:
        return {k: float(v) * sp[0] for k, v, sp in zip(terms, x, space, strict=True)}

    def residuals(x: np.ndarray) -> np.ndarray:
        v = values(x)
        with shared_runs():
            return np.array([np.log(predict_row(s, _with_terms(e, v))[0] / s.row.value)
                             for s, e in zip(setups, base, strict=True)])

    lower = np.array([sp[1] for sp in space])
    upper = np.array([sp[2] for sp in space])
    x0 = np.clip(np.array([sp[3] for sp in space]), lower, upper)
    sol = least_squares(residuals, x0, bounds=(lower, upper), x_scale=np.array([sp[4] for sp in space]),
                        diff_step=1e-2, ftol=_TOL, xtol=_TOL, loss=LOSS, f_scale=LOSS_SCALE)
    return values(sol.x)


def sample_runs(rows: Sequence[MeasurementRow], max_runs: int, seed: int = 0) -> list[MeasurementRow]:
    """A seeded sample of whole runs (every metric of a run kept together)."""
    runs = sorted({run_key(r) for r in rows}, key=repr)
    if max_runs <= 0 or max_runs >= len(runs):
        return list(rows)
    keep = set(random.Random(seed).sample(runs, max_runs))
    return [r for r in rows if run_key(r) in keep]


def cross_validate_terms(rows: Sequence[MeasurementRow], scheme: CvScheme, terms: Sequence[str] = MOE_TERMS,
                         *, table: dict[str, dict[str, float]] | None = None, fit_runs: int = 0,
                         seed: int = 0) -> tuple[list[RowResult], dict[str, dict[str, float]]]:
    """(each row predicted with the terms fitted on the other folds, the terms per fold).
    ``fit_runs`` > 0 fits each fold on a seeded sample of that many of its training runs."""
    rows = list(rows)
    tab = table or FITTED_EFFICIENCY
    assignment = fold_assignment(rows, scheme)
    setup_of = dict(zip((r.id for r in rows), setup_rows(rows, efficiency_for("generic", tab), rows), strict=True))
    out: dict[str, RowResult] = {}
    fitted: dict[str, dict[str, float]] = {}
    for fold in sorted(set(assignment.values())):
        train = sample_runs([r for r in rows if assignment[r.id] != fold], fit_runs, seed)
        fit_setups = [s for r in train if not isinstance(s := setup_of[r.id], str)]
        v = fit_terms(fit_setups, terms, tab)
        fitted[fold] = v
        with shared_runs():
            for r in rows:
                if assignment[r.id] == fold:
                    eff = _with_terms(efficiency_for(engine_family(r.engine), tab), v)
                    out[r.id] = row_result(r, setup_of[r.id], eff)
    return [out[r.id] for r in rows], fitted
