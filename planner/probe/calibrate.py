"""Measured beside predicted, and the fit that makes them agree.

Prediction of one load level comes from the planner's one load model
(:func:`planner.sizing.load.replica_load`, the model ``plan``, ``sweep`` and
``validate`` use) with the scenario's resolved specs and efficiencies:

- Closed loop at concurrency c: streams start together after warm-up and stay
  in step (fixed lengths), the load model's synchronized case: TTFT = prefill of
  c prompts as one batch (c·P tokens), TPOT = decode step at batch c and the
  mean live context P + O/2, E2E = TTFT + (O − 1)·TPOT, output tok/s = c·O / E2E.
- Open loop at rate λ: the running batch solves Little's law on the batch grid;
  TTFT = M/G/1 wait + the prompt's chunked prefill; TPOT = the median gap.

MBU and MFU from the measurement: MBU = bytes one decode step streams at the
measured batch / measured TPOT / peak bandwidth; MFU = measured output tok/s ×
2 × active params / (peak FLOP/s × GPUs).

Calibration: least squares (``scipy.optimize.least_squares``) over the levels'
log-ratios log(predicted/measured) of the decode step (p50 inter-token
latency, else p50 TPOT) against the predicted TPOT, and of p50 TTFT, fitting
``efficiency.bandwidth``, ``efficiency.compute`` (both in (0, 1]) and
``efficiency.step_overhead_s`` (multi-start: the roofline's max() has kinks).

A fit says nothing when a fitted value sits at its bound (the physics could not
reach the measurements inside the physical range: the scenario's GPU, model or
layout is likely not what the endpoint runs) or when a level is still off by
more than :data:`CALIBRATION_MAX_REL_ERROR`: :attr:`Calibration.warnings` names
each such case, and the page and the CLI show them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.optimize import least_squares

from planner.errors import ProbeError
from planner.physics.roofline import peak_flops_per_s
from planner.physics.step import decode_step
from planner.physics.techniques import mbu, mfu
from planner.probe.prediction import LevelPrediction, PredictedLevel
from planner.probe.summary import LevelSummary, ProbeRun
from planner.sizing.load import replica_load
from planner.sizing.replica import memory_section
from planner.spec.context import Resolved, resolve
from planner.spec.scenario import Scenario, scenario_from_dict

__all__ = [
    "Calibration",
    "CALIBRATION_BOUND_TOLERANCE",
    "CALIBRATION_MAX_REL_ERROR",
    "CalibrationResidual",
    "calibrate",
    "calibrated_scenario",
    "KV_FULL_USAGE",
    "KvCapacityCheck",
    "kv_capacity_check",
    "measured_vs_predicted",
    "level_is_kv_full",
    "predict_level",
    "with_prediction",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
# An open-loop level whose Little's-law batch passes this is saturated (no engine
# runs a larger batch: 4 × the planner's DEFAULT_MAX_BATCH, so a probe against an
# engine configured beyond the default is still predicted unsaturated).
OPEN_LOOP_MAX_BATCH = 4096
# Calibration multi-start grid: max(compute, memory) has kinks, so least squares
# starts from the scenario's values and from every combination of these.
CALIBRATION_START_BANDWIDTH = (0.1, 0.3, 0.8)
CALIBRATION_START_COMPUTE = (0.1, 0.3, 0.8)
CALIBRATION_START_OVERHEAD_S = (0.0, 5e-3)
# A calibration whose worst level is off by more than this (|predicted/measured − 1|)
# does not describe the endpoint: it is reported with a warning (25%: the spread
# of a well-fitted sweep on the real engine stays within about 10%, tests/test_probe_llama.py).
CALIBRATION_MAX_REL_ERROR = 0.25
# A fitted value this close to its bound counts as at the bound: 0.001 of an efficiency,
# 1 µs of step overhead (per fitted value, in _FITTED's order).
CALIBRATION_BOUND_TOLERANCE = (1e-3, 1e-3, 1e-6)


def predict_level(
    resolved: Resolved,
    *,
    prompt_tokens: float,
    output_tokens: float,
    concurrency: int | None = None,
    rate_req_s: float | None = None,
) -> LevelPrediction:
    """Predicted TTFT, TPOT, E2E and output tok/s of one closed- or open-loop
    level, from the load model (``planner.sizing.load.replica_load``)."""
    if concurrency is not None:
        pt = replica_load(resolved, load="synchronized", prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          max_batch=OPEN_LOOP_MAX_BATCH, level=float(concurrency))
    elif rate_req_s is not None:
        pt = replica_load(resolved, load="request_rate", prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          max_batch=OPEN_LOOP_MAX_BATCH, level=rate_req_s)
    else:
        raise ProbeError("level: needs concurrency or rate_req_s")
    # TPOT here is the decode step a stream sees between tokens: the median gap.
    return LevelPrediction(batch_size=pt.batch_size, prompt_tokens=prompt_tokens, ttft_s=pt.ttft_s,
                           tpot_s=pt.itl_p50_s, e2e_s=pt.e2e_s, output_tok_s=pt.output_tok_s_per_replica,
                           saturated=pt.saturated)


def _level_prompt(run: ProbeRun, lv: LevelSummary) -> float:
    return float(lv.prompt_tokens_mean if lv.prompt_tokens_mean is not None else run.prompt_tokens)


def _level_output(run: ProbeRun, lv: LevelSummary) -> float:
    ok = lv.requests - lv.failures
    return lv.output_tokens_total / ok if ok > 0 and lv.output_tokens_total else float(run.output_tokens)


def _measured_mbu_mfu(r: Resolved, run: ProbeRun, lv: LevelSummary) -> tuple[float | None, float | None]:
    # a stream whose tokens all arrived in one chunk has TPOT 0: no decode step was observed
    if not lv.tpot_s.p50 or lv.tpot_s.p50 <= 0 or lv.e2e_s.mean is None:
        return None, None
    batch = lv.concurrency if lv.concurrency is not None else max(1.0, lv.req_s * lv.e2e_s.mean)
    context = _level_prompt(run, lv) + _level_output(run, lv) / 2.0
    kw = r.step_kwargs()
    step = decode_step(batch_size=batch, context_tokens=context, **kw)
    m_bu = float(mbu(bytes_per_s=float(step.bytes_per_gpu) / lv.tpot_s.p50, hbm_bytes_per_s=r.gpu.hbm_bytes_per_s))
    peak = peak_flops_per_s(r.gpu, r.scenario.weights_dtype) * r.gpus_per_replica
    m_fu = float(mfu(tokens_per_s=lv.output_tok_s, params=r.params.active, peak_flops_per_s=peak))
    return m_bu, m_fu


def with_prediction(run: ProbeRun, scenario: Scenario) -> ProbeRun:
    """The run with ``predicted`` (and measured MBU/MFU) per level for ``scenario``."""
    r = resolve(scenario)
    out: list[PredictedLevel] = []
    for lv in run.levels:
        pred = predict_level(r, prompt_tokens=_level_prompt(run, lv), output_tokens=_level_output(run, lv),
                             concurrency=lv.concurrency, rate_req_s=lv.rate_req_s)
        m_bu, m_fu = _measured_mbu_mfu(r, run, lv)
        out.append(PredictedLevel(predicted=pred, mbu=m_bu, mfu=m_fu))
    return run.model_copy(update={"predicted": tuple(out)})


class CalibrationResidual(BaseModel):
    model_config = _FROZEN
    concurrency: int | None
    rate_req_s: float | None
    metric: str  # "itl_p50_s" (or "tpot_s") against predicted TPOT, or "ttft_s"
    measured: float
    predicted: float
    rel_error: float  # predicted / measured − 1


class Calibration(BaseModel):
    """Fitted efficiencies, their residuals, and the run they came from."""

    model_config = _FROZEN
    run_id: str
    bandwidth_efficiency: float
    compute_efficiency: float
    step_overhead_s: float
    residuals: tuple[CalibrationResidual, ...]
    rms_log_error: float
    success: bool
    message: str
    warnings: tuple[str, ...] = ()  # why the fit may say nothing: a value at its bound, an error over the limit


_LOW = np.array([1e-3, 1e-3, 0.0])
_HIGH = np.array([1.0, 1.0, 1.0])
_FITTED = ("efficiency.bandwidth", "efficiency.compute", "efficiency.step_overhead_s")


def _fit_warnings(x: np.ndarray, residuals: tuple[CalibrationResidual, ...]) -> tuple[str, ...]:
    """Each fitted value at a bound, and the worst level's error when it passes the limit."""
    out = []
    tol = CALIBRATION_BOUND_TOLERANCE
    for name, v, lo, hi, t in zip(_FITTED, x, _LOW, _HIGH, tol, strict=True):
        side = "upper" if v >= hi - t else "lower" if v <= lo + t else None
        if side is not None:
            bound = hi if side == "upper" else lo
            out.append(f"{name} = {v:.3g} sits at its {side} bound {bound:g}: the physics cannot reach the "
                       "measurements inside the physical range, so this value says nothing (is the scenario's "
                       "GPU, model and layout what the endpoint runs?)")
    worst = max(residuals, key=lambda r: abs(r.rel_error), default=None)
    if worst is not None and abs(worst.rel_error) > CALIBRATION_MAX_REL_ERROR:
        at = f"concurrency {worst.concurrency}" if worst.concurrency is not None else f"rate {worst.rate_req_s} req/s"
        out.append(f"fit error up to {abs(worst.rel_error):.0%} ({worst.metric} at {at}), over "
                   f"{CALIBRATION_MAX_REL_ERROR:.0%}: the calibrated scenario does not describe this endpoint")
    return tuple(out)


def _targets(run: ProbeRun, levels: tuple[LevelSummary, ...]) -> list[tuple[LevelSummary, str, float]]:
    out = []
    for lv in levels:
        # the decode step: median inter-token gap (robust to the stalls other requests'
        # prefills cause, which the step physics does not model), else median TPOT
        step = lv.itl_s.p50 or lv.tpot_s.p50
        if step:
            out.append((lv, "itl_p50_s" if lv.itl_s.p50 else "tpot_s", step))
        if lv.ttft_s.p50:
            out.append((lv, "ttft_s", lv.ttft_s.p50))
    return out


def calibrate(run: ProbeRun, scenario: Scenario, *, levels: tuple[int, ...] | None = None) -> Calibration:
    """Fit bandwidth efficiency, compute efficiency and step overhead to the
    run's levels (all, or the level indices given)."""
    chosen = tuple(run.levels if levels is None else (run.levels[i] for i in levels))
    targets = _targets(run, chosen)
    if len(targets) < 3:
        raise ProbeError("calibrate: needs at least two successful load levels (TPOT and TTFT at each)")
    # The fitted step overhead is the whole per-step overhead: the calibrated
    # scenario states it, which turns the per-layer default off (see resolve()).
    r0 = resolve(scenario)
    base = replace(r0, layer_overhead_s=0.0)
    x0 = np.clip([base.bandwidth_efficiency, base.compute_efficiency,
                  r0.step_overhead_s + r0.layer_overhead_s * r0.model.layers], _LOW + 1e-6, _HIGH - 1e-6)

    def predictions(x: np.ndarray) -> list[float]:
        r = replace(base, bandwidth_efficiency=float(x[0]), compute_efficiency=float(x[1]),
                    step_overhead_s=float(x[2]))
        preds = []
        for lv, metric, _ in targets:
            p = predict_level(r, prompt_tokens=_level_prompt(run, lv), output_tokens=_level_output(run, lv),
                              concurrency=lv.concurrency, rate_req_s=lv.rate_req_s)
            preds.append(p.ttft_s if metric == "ttft_s" else p.tpot_s)
        return preds

    measured = np.array([m for _, _, m in targets])

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.asarray(np.log(np.asarray(predictions(x)) / measured), dtype=float)

    # max(compute, memory) has kinks: start from the scenario's values and a small
    # grid, keep the lowest cost.
    starts = [x0] + [np.array([b, c, o]) for b in CALIBRATION_START_BANDWIDTH for c in CALIBRATION_START_COMPUTE
                     for o in CALIBRATION_START_OVERHEAD_S]
    fit = None
    for start in starts:
        cand = least_squares(residuals, start, bounds=(_LOW, _HIGH), x_scale=np.array([0.1, 0.1, 1e-3]),
                             diff_step=1e-4)
        if fit is None or cand.cost < fit.cost:
            fit = cand
    assert fit is not None  # noqa: S101 - starts is never empty
    preds = predictions(fit.x)
    res = tuple(
        CalibrationResidual(concurrency=lv.concurrency, rate_req_s=lv.rate_req_s, metric=metric, measured=m,
                            predicted=p, rel_error=p / m - 1.0)
        for (lv, metric, m), p in zip(targets, preds, strict=True)
    )
    return Calibration(
        run_id=run.run_id, bandwidth_efficiency=float(fit.x[0]), compute_efficiency=float(fit.x[1]),
        step_overhead_s=float(fit.x[2]), residuals=res,
        rms_log_error=float(np.sqrt(np.mean(fit.fun ** 2))), success=bool(fit.success), message=str(fit.message),
        warnings=_fit_warnings(fit.x, res),
    )


def calibrated_scenario(scenario: Scenario, calibration: Calibration) -> Scenario:
    """``scenario`` with the fitted efficiencies, labelled ``calibrated_from`` the run."""
    data = scenario.model_dump(mode="json")
    data["efficiency"] = {
        **data.get("efficiency", {}),
        "bandwidth": calibration.bandwidth_efficiency,
        "compute": calibration.compute_efficiency,
        "step_overhead_s": calibration.step_overhead_s,
        "calibrated_from": calibration.run_id,
    }
    return scenario_from_dict(data)


# KV usage at which an engine is treated as full (vLLM starts preempting near 100%).
KV_FULL_USAGE = 0.95


class KvCapacityCheck(BaseModel):
    """The concurrency where the engine's KV filled (or preemption began),
    beside the planner's ``memory.max_sequences`` for the same context."""

    model_config = _FROZEN
    context_tokens: int
    planner_max_sequences: float
    observed_full_concurrency: int | None  # None: not reached in this sweep
    highest_concurrency_tried: int | None
    reason: str  # "kv_usage", "preemptions", "not_reached" or "unavailable"


def level_is_kv_full(lv: LevelSummary) -> str | None:
    """Why this level counts as KV-full, or None."""
    if lv.engine.preemptions is not None and lv.engine.preemptions > 0:
        return "preemptions"
    if lv.engine.kv_usage_max is not None and lv.engine.kv_usage_max >= KV_FULL_USAGE:
        return "kv_usage"
    return None


def kv_capacity_check(run: ProbeRun, scenario: Scenario) -> KvCapacityCheck:
    """Walk the sweep's levels in order of concurrency to the first KV-full one."""
    r = resolve(scenario)
    levels = sorted((lv for lv in run.levels if lv.concurrency is not None), key=lambda lv: lv.concurrency or 0)
    ctx = int(round(max((_level_prompt(run, lv) for lv in levels), default=float(run.prompt_tokens))
                    + max((_level_output(run, lv) for lv in levels), default=float(run.output_tokens))))
    seqs = memory_section(r, {}, context_tokens=ctx).max_sequences
    observed, reason = None, "not_reached"
    if levels and all(lv.engine.kv_usage_max is None and lv.engine.preemptions is None for lv in levels):
        reason = "unavailable"
    for lv in levels:
        why = level_is_kv_full(lv)
        if why:
            observed, reason = lv.concurrency, why
            break
    return KvCapacityCheck(context_tokens=ctx, planner_max_sequences=seqs, observed_full_concurrency=observed,
                           highest_concurrency_tried=levels[-1].concurrency if levels else None, reason=reason)


_COMPARED = (("ttft_s", "ttft_s"), ("tpot_s", "tpot_s"), ("output_tok_s", "output_tok_s"))


def measured_vs_predicted(run: ProbeRun) -> list[dict[str, Any]]:
    """Long-form rows for charts: one per level × metric with measured (p50 for
    latencies, the level's rate for tok/s; None for a level where no request
    succeeded, which measured nothing, not 0 tok/s) and predicted values."""
    if run.predicted is None:
        return []
    rows: list[dict[str, Any]] = []
    for lv, pred in zip(run.levels, run.predicted, strict=True):
        load = lv.concurrency if lv.concurrency is not None else lv.rate_req_s
        for metric, key in _COMPARED:
            measured = lv.output_tok_s if metric == "output_tok_s" else getattr(lv, metric).p50
            if lv.requests == lv.failures:
                measured = None
            rows.append({"load": load, "metric": metric, "measured": measured,
                         "predicted": getattr(pred.predicted, key)})
    return rows
