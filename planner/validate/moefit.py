"""Fit the MoE physics terms on MoE measurements, the dense efficiencies held.

The efficiencies (bandwidth, compute, overheads) are fitted on the dense published
rows (``planner.spec.fitted``); the MoE terms (``moe_layer_overhead_s``,
``moe_token_overhead_s``: planner.physics.kernels.moe_overhead_s) touch only MoE
models, so they are fitted on MoE rows alone with every family's efficiencies as
shipped: least squares on log(predicted / measured), the same robust loss as the
efficiency fit, over the step metrics and the TTFT's rise with the prompt
(:func:`rise_pairs`: log(predicted rise / measured rise)).  ``cross_validate_terms``
scores each row with terms fitted without its fold (leave one GPU / engine /
publication out), the test of whether a term generalises: a term is kept only where
its cross-validated error is lower than without it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Sequence

import numpy as np
from scipy.optimize import least_squares

from planner.physics.terms import physics_terms
from planner.spec.fitted import FITTED_EFFICIENCY
from planner.validate.fit import LOSS, LOSS_SCALE, MOE_TERM_NAMES, TERM_SEARCH, CvScheme, fold_assignment
from planner.validate.names import engine_family
from planner.validate.predict import EfficiencySet, RowSetup, efficiency_for, predict_row, setup_rows, shared_runs
from planner.validate.report import RowResult, row_result
from planner.validate.rows import MeasurementRow, run_key

__all__ = ["FIT_EXCLUDED_METRICS", "HANDOFF_ITERATIONS_TERM", "HANDOFF_TERM", "HOST_MOVED_REL", "HOST_TERM",
           "MOE_TERMS", "RISE_MAX_CONCURRENCY", "cross_validate_terms", "fit_handoff", "fit_handoff_iterations",
           "fit_host_floor", "fit_terms", "fitted_on", "handoff_rows", "host_rows", "named_terms", "rise_pairs", "sample_runs"]

MOE_TERMS: tuple[str, ...] = MOE_TERM_NAMES


def named_terms(spec: str) -> list[str]:
    """The terms a comma-separated list names, "moe" standing for MOE_TERMS beside any named after it
    (an off term: "moe,disagg_handoff_iterations"), each once, in order."""
    names = [t.strip() for t in spec.split(",") if t.strip()]
    return list(dict.fromkeys(t for name in names for t in (MOE_TERMS if name == "moe" else (name,))))
# The metrics the MoE terms are fitted on: the step's (TPOT, ITL, throughput).  TTFT values are
# scored, not fitted on: a measured TTFT carries costs the model has no term for (a fixed part
# per request, 40-150 ms at one client on InferenceX, that differs between clusters running one
# recipe), and fitting the step terms to them would slow every decode step to pay for it.  The
# prefill's own MoE cost (kernels.moe_prefill_slot_s) is fitted on the step metrics too (the
# prompts' passes interrupt the colocated decode and bound a disaggregated prefill pool) and on
# the TTFT's rise with the prompt, where the fixed part cancels (RISE_MAX_CONCURRENCY below).
FIT_EXCLUDED_METRICS: frozenset[str] = frozenset({"ttft_ms", "e2e_s"})
# What TTFT rows do enter the fit: their rise with the prompt.  Two runs of one colocated layout
# at one concurrency that differ only in the prompt length share the fixed part, so the TTFT's
# rise from the shorter prompt to the longer is the prefill's own per-token cost, the part the
# step metrics leave loose (the prompts' share of a decode step trades against the decode's own
# costs: on InferenceX the step metrics' loss is the same to 0.01% at 16 and at 31 slot passes).
# Only light loads, where a prompt seldom queues behind another, so the rise is the prefill's.
RISE_MAX_CONCURRENCY = 16


# The one term fitted on TTFT values: a disaggregated request's fixed hand-off between its
# pools (planner.spec.context.kv_transfer_setup_s), which no step metric sees.  It is fitted
# after the step terms, on the TTFT rows of the disaggregated runs alone (:func:`fit_handoff`).
HANDOFF_TERM = "disagg_handoff_s"
_HANDOFF_MAX_S, _HANDOFF_STEP_S = 2.0, 0.005


def handoff_rows(setups: Sequence[RowSetup]) -> list[RowSetup]:
    """The rows the hand-off is fitted on: TTFT of disaggregated runs."""
    return [s for s in setups if s.row.metric == "ttft_ms" and s.pools is not None]


def fit_handoff(setups: Sequence[RowSetup], values: dict[str, float],
                table: dict[str, dict[str, float]] | None = None) -> float:
    """The hand-off h (s) with the least median |TTFT₀ + h − measured| / measured over
    :func:`handoff_rows`, TTFT₀ each row's prediction with the other terms at ``values`` and no
    hand-off, searched on a 5 ms grid from 0 to 2 s.  The hand-off adds to a request's TTFT one
    for one (a closed loop's throughput moves by h / E2E, under 1% of a run's decode), so the
    rows are predicted once.  It is fitted on the statistic it is judged by: a least-squares
    fit on the log errors (the step terms' loss) is pulled to twice the value by the runs whose
    TTFT is seconds above any prefill (queues the model has no term for), and raises the
    median error it is meant to lower."""
    return _best_handoff(handoff_rows(setups), values, table)[0]


def _best_handoff(rows: Sequence[RowSetup], values: dict[str, float],
                  table: dict[str, dict[str, float]] | None) -> tuple[float, float]:
    """(h, its median |error|) over ``rows`` (:func:`fit_handoff`)."""
    if not rows:
        return 0.0, math.inf
    v0 = {**values, HANDOFF_TERM: 0.0}
    with shared_runs():
        pred = np.array([predict_row(s, _with_terms(e, v0))[0]
                         for s, e in zip(rows, _effs(rows, table or FITTED_EFFICIENCY), strict=True)])
    meas = np.array([s.row.value for s in rows], float)
    ok = np.isfinite(pred) & (pred > 0) & (meas > 0)
    if not ok.any():
        return 0.0, math.inf
    grid = np.arange(0.0, _HANDOFF_MAX_S + _HANDOFF_STEP_S / 2, _HANDOFF_STEP_S)
    err = np.median(np.abs((pred[ok][None, :] + grid[:, None] * 1e3) / meas[ok][None, :] - 1.0), axis=1)
    i = int(np.argmin(err))
    return float(grid[i]), float(err[i])


# Fitted with the hand-off: the decode iterations a disaggregated request waits on its decode
# worker after its KV arrives (planner.physics.handoff.decode_admission_s), the part of the
# hand-off that grows with the decode batch.  Unlike h it is not additive (the wait is k decode
# iterations at each run's batch, and the closed loop answers), so the rows are predicted at each
# k tried: 0 to 24 in steps of 2, then the neighbours of the best; h is searched at each.
HANDOFF_ITERATIONS_TERM = "disagg_handoff_iterations"
_ITER_MAX, _ITER_COARSE = 24.0, 2.0


def fit_handoff_iterations(setups: Sequence[RowSetup], values: dict[str, float],
                           table: dict[str, dict[str, float]] | None = None) -> tuple[float, float]:
    """(h, k): the hand-off and the decode iterations with the least median |error| over
    :func:`handoff_rows` (h searched as in :func:`fit_handoff` at each k)."""
    rows = handoff_rows(setups)
    if not rows:
        return 0.0, 0.0
    seen: dict[float, tuple[float, float]] = {}

    def at(k: float) -> tuple[float, float]:
        if k not in seen:
            seen[k] = _best_handoff(rows, {**values, HANDOFF_ITERATIONS_TERM: k}, table)
        return seen[k]

    best = min(np.arange(0.0, _ITER_MAX + _ITER_COARSE / 2, _ITER_COARSE), key=lambda k: (at(float(k))[1], k))
    k = min((float(x) for x in (best - 1.0, best, best + 1.0) if 0.0 <= x <= _ITER_MAX), key=lambda x: (at(x)[1], x))
    return at(k)[0], k


# Fitted after the step terms and before the hand-off: the hosts' floor on a colocated prompt's
# first token (planner.physics.prefill.host_floor_s), which shows in the TTFT of a short prompt at a
# light load and in no step metric.  It is fitted on the TTFT rows of the colocated runs
# (:func:`fit_host_floor`); a disaggregated run's prefill pool does not hold it (its first token
# goes with the hand-off).
HOST_TERM = "moe_prefill_host_layer_s"
_HOST_MAX_S, _HOST_COARSE_S, _HOST_FINE_S = 3e-3, 2.5e-4, 2.5e-5
# A row the floor moves: its TTFT at _HOST_MAX_S differs from its TTFT at 0 by more than this share.
HOST_MOVED_REL = 0.01


def host_rows(setups: Sequence[RowSetup]) -> list[RowSetup]:
    """The rows the hosts' floor is fitted on: TTFT of colocated runs."""
    return [s for s in setups if s.row.metric == "ttft_ms" and s.pools is None]


def fit_host_floor(setups: Sequence[RowSetup], values: dict[str, float],
                   table: dict[str, dict[str, float]] | None = None) -> float:
    """The per-layer host time f (s) that keeps the worst GPU type's error least: the f with the
    least max over the GPU types of each one's median |TTFT(f) − measured| / measured.

    The floor is the hosts' (their CPUs launch the eager iteration's kernels), and each GPU type's
    runs come from one kind of host, so the floor a new cluster's hosts keep is unknown; the fit
    picks the value no host seen is far from (minimax over the GPU types), not the one the GPU
    type measured most would pick (on InferenceX its B200 runs carry a third of the rows, and
    their hosts' floor is among the highest) nor the median of each type's own best (which moved
    by a quarter when one type was left out: 1.54-2.19 ms per layer over the GPU folds).  Each
    type's rows are its :func:`host_rows` that the floor moves (their TTFT at 3 ms per layer differs
    from that at 0 by more than 1%: the long prompts' passes stay above any floor and say nothing
    of it).  Searched
    on a grid from 0 to 3 ms per layer in 0.25 ms steps, then 25 µs steps within a coarse step of
    the best.  The floor is not additive (a long prompt's pass stays above it), so every row is
    predicted at each value tried."""
    rows = host_rows(setups)
    if not rows:
        return 0.0
    effs = _effs(rows, table or FITTED_EFFICIENCY)
    meas = np.array([s.row.value for s in rows], float)
    seen: dict[tuple[float, int], float] = {}

    def predicted(f: float, idx: Sequence[int]) -> np.ndarray:
        f = round(f, 9)
        todo = [i for i in idx if (f, i) not in seen]
        if todo:
            v = {**values, HOST_TERM: f}
            with shared_runs():
                for i in todo:
                    seen[(f, i)] = predict_row(rows[i], _with_terms(effs[i], v))[0]
        return np.array([seen[(f, i)] for i in idx], float)

    def median_error(f: float, idx: Sequence[int]) -> float:
        pred, m = predicted(f, idx), meas[list(idx)]
        ok = np.isfinite(pred) & (pred > 0) & (m > 0)
        return float(np.median(np.abs(pred[ok] / m[ok] - 1.0))) if ok.any() else math.inf

    everyone = range(len(rows))
    low, high = predicted(0.0, everyone), predicted(_HOST_MAX_S, everyone)
    moved = np.isfinite(low) & np.isfinite(high) & (low > 0) & (np.abs(high - low) > HOST_MOVED_REL * low)
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(rows):
        if moved[i]:
            groups.setdefault(s.row.gpu, []).append(i)
    if not groups:
        return 0.0

    def worst(f: float) -> tuple[float, float]:
        return max(median_error(f, idx) for idx in groups.values()), f

    coarse = np.arange(0.0, _HOST_MAX_S + _HOST_COARSE_S / 2, _HOST_COARSE_S)
    best = min(coarse, key=lambda f: worst(float(f)))
    fine = np.arange(max(best - _HOST_COARSE_S, 0.0), min(best + _HOST_COARSE_S, _HOST_MAX_S) + _HOST_FINE_S / 2,
                     _HOST_FINE_S)
    return float(min(fine, key=lambda f: worst(float(f))))


def fitted_on(setup: RowSetup) -> bool:
    """Whether a row enters the MoE term fit (every row is scored)."""
    return setup.row.metric not in FIT_EXCLUDED_METRICS


def _rise_key(row: MeasurementRow) -> tuple[object, ...]:
    # run_key without the prompt length, the publication and the engine build (InferenceX runs
    # each length as its own job, often on another build of the same recipe)
    return (row.engine, row.model, row.precision, row.gpu, row.n_gpus, row.tp, row.pp, row.ep, row.dp_attention,
            row.speculative, row.speculative_draft_tokens, row.multi_node, row.disaggregated, row.osl,
            row.length_range_ratio, row.concurrency, row.request_rate)


def rise_pairs(setups: Sequence[RowSetup]) -> list[tuple[RowSetup, RowSetup]]:
    """(shortest prompt, longest prompt) TTFT rows of each colocated layout and closed-loop load
    of at most RISE_MAX_CONCURRENCY users measured at two or more prompt lengths, the longer's
    TTFT above the shorter's: the pairs whose rise the fit matches (module comment)."""
    groups: dict[tuple[object, ...], list[RowSetup]] = {}
    for s in setups:
        r = s.row
        if (r.metric == "ttft_ms" and s.pools is None and s.load == "concurrency" and r.concurrency is not None
                and r.concurrency <= RISE_MAX_CONCURRENCY):
            groups.setdefault(_rise_key(r), []).append(s)
    pairs = []
    for g in groups.values():
        short = min(g, key=lambda s: (s.prompt_tokens, s.row.id))
        long = max(g, key=lambda s: (s.prompt_tokens, s.row.id))
        if long.prompt_tokens > short.prompt_tokens and long.row.value > short.row.value:
            pairs.append((short, long))
    return pairs


_TOL = 1e-4
_MIN_RISE_MS = 1e-3  # a predicted rise at or below zero counts as this (a finite, large residual)


def _with_terms(eff: EfficiencySet, values: dict[str, float]) -> EfficiencySet:
    return eff.model_copy(update=values)


def _effs(setups: Sequence[RowSetup], table: dict[str, dict[str, float]]) -> list[EfficiencySet]:
    return [efficiency_for(engine_family(s.row.engine), table) for s in setups]


def fit_terms(setups: Sequence[RowSetup], terms: Sequence[str] = MOE_TERMS,
              table: dict[str, dict[str, float]] | None = None,
              rise_from: Sequence[RowSetup] | None = None) -> dict[str, float]:
    """argmin over ``terms`` of Σ ρ(log(predicted / measured)) over the step metrics of
    ``setups`` and the TTFT rises (:func:`rise_pairs`) of ``rise_from`` (default: ``setups``;
    a sampled fit passes every training row, a pair's two runs seldom both in the sample),
    efficiencies from ``table``."""
    every = list(setups if rise_from is None else rise_from)
    late = [t for t in (HOST_TERM, HANDOFF_TERM, HANDOFF_ITERATIONS_TERM) if t in terms]
    if late:  # fitted last, on TTFT values, the step terms' values held (and off while those are fitted:
        # a fit is reproducible, whatever values the file ships)
        with physics_terms(**dict.fromkeys(late, 0.0)):
            step = fit_terms(setups, [t for t in terms if t not in late], table, rise_from)
        if HOST_TERM in terms:
            step = {**step, HOST_TERM: fit_host_floor(setups, {**step, HOST_TERM: 0.0}, table)}
        if HANDOFF_ITERATIONS_TERM in terms:  # with the hand-off (held where it is not named)
            h, k = fit_handoff_iterations(every, step, table)
            step = {**step, HANDOFF_ITERATIONS_TERM: k, **({HANDOFF_TERM: h} if HANDOFF_TERM in terms else {})}
        elif HANDOFF_TERM in terms:
            step = {**step, HANDOFF_TERM: fit_handoff(every, step, table)}
        return {k: step[k] for k in terms}
    pairs = rise_pairs(every)
    setups = [s for s in setups if fitted_on(s)]
    if not terms or not setups:
        return {k: 0.0 for k in terms}
    tab = table or FITTED_EFFICIENCY
    base = _effs(setups, tab)
    pair_effs = list(zip(_effs([a for a, _ in pairs], tab), _effs([b for _, b in pairs], tab), strict=True))
    space = [TERM_SEARCH[k] for k in terms]

    def values(x: np.ndarray) -> dict[str, float]:
        return {k: float(v) * sp[0] for k, v, sp in zip(terms, x, space, strict=True)}

    def residuals(x: np.ndarray) -> np.ndarray:
        v = values(x)
        with shared_runs():
            rows = [np.log(predict_row(s, _with_terms(e, v))[0] / s.row.value)
                    for s, e in zip(setups, base, strict=True)]
            for (a, b), (ea, eb) in zip(pairs, pair_effs, strict=True):
                rise = predict_row(b, _with_terms(eb, v))[0] - predict_row(a, _with_terms(ea, v))[0]
                rows.append(np.log(max(rise, _MIN_RISE_MS) / (b.row.value - a.row.value)))
            return np.array(rows)

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
                         seed: int = 0, only: Collection[str] | None = None
                         ) -> tuple[list[RowResult], dict[str, dict[str, float]]]:
    """(each row predicted with the terms fitted on the other folds, the terms per fold).
    ``fit_runs`` > 0 fits each fold on a seeded sample of that many of its training runs;
    ``only``: just those folds, and only their rows come back (folds run apart, one per process,
    give what one call gives)."""
    rows = list(rows)
    tab = table or FITTED_EFFICIENCY
    assignment = fold_assignment(rows, scheme)
    setup_of = dict(zip((r.id for r in rows), setup_rows(rows, efficiency_for("generic", tab), rows), strict=True))
    out: dict[str, RowResult] = {}
    fitted: dict[str, dict[str, float]] = {}
    for fold in sorted(set(assignment.values()) if only is None else set(only) & set(assignment.values())):
        train = sample_runs([r for r in rows if assignment[r.id] != fold], fit_runs, seed)
        fit_setups = [s for r in train if not isinstance(s := setup_of[r.id], str)]
        every = [s for r in rows if assignment[r.id] != fold and not isinstance(s := setup_of[r.id], str)]
        v = fit_terms(fit_setups, terms, tab, rise_from=every)
        fitted[fold] = v
        with shared_runs():
            for r in rows:
                if assignment[r.id] == fold:
                    eff = _with_terms(efficiency_for(engine_family(r.engine), tab), v)
                    out[r.id] = row_result(r, setup_of[r.id], eff)
    return [out[r.id] for r in rows if r.id in out], fitted
