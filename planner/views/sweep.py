"""The design-space sweep: every GPU × dtype × TP × PP × mode, each with its
operating point (batch 1..max on a grid), fleet and cost, infeasible candidates
kept with their reason, and the Pareto frontiers marked.

The sweep calls :func:`planner.sizing.operating.operating_arrays` and
:func:`planner.sizing.fleet.fleet_arrays` on arrays of layouts: the same functions
``plan`` calls with one layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from planner.errors import ScenarioError
from planner.physics.roofline import compute_dtype
from planner.sizing.fleet import fleet_arrays
from planner.sizing.operating import operating_arrays, workload_stats
from planner.spec.catalog import load_catalog
from planner.spec.context import resolve
from planner.spec.scenario import MAX_PP, MAX_TP, Scenario, validation_message

__all__ = ["DEFAULT_DTYPES", "DEFAULT_PP", "DEFAULT_TP", "MAX_SWEEP_CANDIDATES", "pareto_front", "sweep"]

DEFAULT_DTYPES: tuple[str, ...] = ("bf16", "fp8", "int8", "int4", "nvfp4")
DEFAULT_TP: tuple[int, ...] = (1, 2, 4, 8)
DEFAULT_PP: tuple[int, ...] = (1, 2)
MODES: tuple[str, ...] = ("colocated", "disaggregated")
# Most candidates one sweep evaluates (GPUs × dtypes × TP × PP × modes, after
# de-duplication).  The default sweep is 720; 20,000 take about 1 s and 50 MB
# on a 2-core machine (92,160 took 3.5 s and 210 MB), and are more rows than
# anyone reads.
MAX_SWEEP_CANDIDATES = 20_000

T = TypeVar("T")


def _unique(values: Sequence[T]) -> list[T]:
    """``values`` without repeats, in first-seen order."""
    return list(dict.fromkeys(values))


def _check_axes(gpu_ids: list[str], dts: list[str], tps: list[int], pps: list[int], modes: list[str]) -> None:
    for flag, axis, top in (("--tp", tps, MAX_TP), ("--pp", pps, MAX_PP)):
        if not axis:
            raise ScenarioError(f"{flag}: give at least one value")
        for v in axis:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
                raise ScenarioError(f"{flag}: every value must be an integer from 1 to {top}, got {v!r}")
    for flag, names in (("--gpus", gpu_ids), ("--dtypes", dts), ("--modes", modes)):
        if not names:
            raise ScenarioError(f"{flag}: give at least one value")
    n = len(gpu_ids) * len(dts) * len(tps) * len(pps) * len(modes)
    if n > MAX_SWEEP_CANDIDATES:
        raise ScenarioError(
            f"sweep: {len(gpu_ids)} GPUs × {len(dts)} dtypes × {len(tps)} TP × {len(pps)} PP × {len(modes)} modes "
            f"= {n:,} candidates, over the limit of {MAX_SWEEP_CANDIDATES:,}; narrow --gpus, --dtypes, --tp, --pp "
            "or --modes")


def pareto_front(x: Sequence[float] | NDArray[np.float64], y: Sequence[float] | NDArray[np.float64]) -> NDArray[np.bool_]:
    """Points not dominated when minimizing both x and y (NaN never on the front).

    A point is dominated if another is ≤ in both and < in at least one."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    valid = ~(np.isnan(xa) | np.isnan(ya))
    order = np.lexsort((ya, xa))
    front = np.zeros(len(xa), dtype=bool)
    best_y = np.inf
    last_x, last_y = np.nan, np.nan
    for i in order:
        if not valid[i]:
            continue
        if ya[i] < best_y:
            front[i] = True
            best_y = ya[i]
            last_x, last_y = xa[i], ya[i]
        elif ya[i] == last_y and xa[i] == last_x:
            front[i] = True  # an exact tie with a front point is not dominated
    return front


def _layouts(model_heads: int, experts: int, tps: Sequence[int], pps: Sequence[int], per_node: int,
             layers: int) -> tuple[list[tuple[int, int]], list[tuple[int, int, str]]]:
    ok, bad = [], []
    for tp in tps:
        for pp in pps:
            if tp > per_node:
                bad.append((tp, pp, f"parallel.tp ({tp}) exceeds the {per_node} GPUs in a node"))
            elif model_heads % tp:
                bad.append((tp, pp, f"parallel.tp ({tp}) does not divide {model_heads} heads"))
            elif pp > layers:
                bad.append((tp, pp, "parallel.pp exceeds the layers"))
            else:
                ok.append((tp, pp))
    return ok, bad


def sweep(
    base: Scenario, *, gpus: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
    tps: Sequence[int] = DEFAULT_TP, pps: Sequence[int] = DEFAULT_PP, modes: Sequence[str] = MODES,
) -> dict[str, Any]:
    """Evaluate every candidate; returns {"rows": [...], "cheapest": row | None}."""
    cat = load_catalog()
    gpu_ids = _unique(list(gpus)) if gpus else sorted(cat.gpus)
    dts = _unique(list(dtypes)) if dtypes else list(DEFAULT_DTYPES)
    tps, pps, modes = _unique(list(tps)), _unique(list(pps)), _unique(list(modes))
    _check_axes(gpu_ids, dts, tps, pps, modes)
    for g in gpu_ids:
        if g not in cat.gpus:
            raise ScenarioError(f"--gpus: unknown gpu '{g}'")
    for m in modes:
        if m not in MODES:
            raise ScenarioError(f"--modes: unknown mode '{m}' (colocated, disaggregated)")
    rows: list[dict[str, Any]] = []
    ep = base.parallel.ep
    for gid in gpu_ids:
        for dt in dts:
            try:
                sc = base.model_copy(update={"gpu": gid, "weights_dtype": dt, "parallel": base.parallel.model_copy(update={"tp": 1, "pp": 1})})
                sc = Scenario.model_validate(sc.model_dump())
            except ValidationError as exc:
                raise ScenarioError(f"--dtypes: {dt}: {validation_message(exc)}") from None
            r = resolve(sc)
            cdt = compute_dtype(r.gpu, dt)  # the tensor-core rate used (FP4 weights on Hopper: fp8)
            stats = workload_stats(r)
            ok, bad = _layouts(r.model.heads, r.model.experts, tps, pps, r.gpu.gpus_per_node, r.model.layers)
            for mode in modes:
                for tp, pp, why in bad:
                    rows.append(_row(gid, dt, sc.kv_dtype, tp, pp, ep, mode, None, None, 0, why, cdt))
                if not ok:
                    continue
                op = operating_arrays(r, tp=[t for t, _ in ok], pp=[p for _, p in ok], ep=[ep] * len(ok), mode=mode,
                                      stats=stats)
                fl = fleet_arrays(r, op, stats)
                for i, (tp, pp) in enumerate(ok):
                    rows.append(_row(gid, dt, sc.kv_dtype, tp, pp, ep, mode, op, fl, i, str(op.reason[i]), cdt))
    feas = np.array([row["feasible"] for row in rows], dtype=bool)
    cost = np.array([row["usd_per_mtok_output"] if f else np.nan for row, f in zip(rows, feas, strict=True)], float)
    itl = np.array([row["itl_s"] if f else np.nan for row, f in zip(rows, feas, strict=True)], float)
    ttft = np.array([row["ttft_p90_s"] if f else np.nan for row, f in zip(rows, feas, strict=True)], float)
    gpg = np.array([-row["goodput_req_s_per_gpu"] if f else np.nan for row, f in zip(rows, feas, strict=True)], float)
    f1, f2 = pareto_front(cost, itl), pareto_front(gpg, ttft)
    cheapest = None
    if feas.any():
        ci = int(np.nanargmin(np.where(feas, cost, np.nan)))
        cheapest = ci
    for i, row in enumerate(rows):
        row["pareto_cost_itl"] = bool(f1[i])
        row["pareto_goodput_ttft"] = bool(f2[i])
        row["cheapest"] = i == cheapest
    return {"rows": rows, "cheapest": rows[cheapest] if cheapest is not None else None}


def _row(gid: str, dt: str, kd: str, tp: int, pp: int, ep: int, mode: str, op: Any, fl: Any, i: int,
         reason: str, compute: str) -> dict[str, Any]:
    def v(a: Any) -> float | None:
        if a is None:
            return None
        x = float(a[i])
        return x if math.isfinite(x) else None  # NaN/inf: not a number a reader can use

    feasible = bool(op.feasible[i]) if op is not None else False
    return {
        "gpu": gid, "weights_dtype": dt, "kv_dtype": kd, "tp": tp, "pp": pp, "ep": ep, "mode": mode,
        "feasible": feasible, "reason": reason, "compute_dtype": compute,
        "batch_size": int(op.batch_size[i]) if op is not None else None,
        "itl_s": v(op.itl_s) if op is not None else None,
        "ttft_s": v(op.ttft_s) if op is not None else None,
        "ttft_p90_s": v(op.ttft_p90_s) if op is not None else None,
        "goodput_req_s_per_replica": v(op.goodput_req_s_per_replica) if op is not None else None,
        "goodput_req_s_per_gpu": v(fl.goodput_req_s_per_gpu) if fl is not None else None,
        "gpus_per_replica": tp * pp * ep,
        "replicas": v(fl.replicas) if fl is not None else None,
        "gpus_total": v(fl.gpus_total) if fl is not None else None,
        "usd_per_hour": v(fl.usd_per_hour) if fl is not None else None,
        "usd_per_mtok_output": v(fl.usd_per_mtok_output) if fl is not None else None,
        "usd_per_mtok_blended": v(fl.usd_per_mtok_blended) if fl is not None else None,
        "usd_per_mtok_output_full_load": v(fl.usd_per_mtok_output_full_load) if fl is not None else None,
    }
