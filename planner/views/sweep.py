"""The design-space sweep: every GPU × dtype × TP × PP × EP × chunk size × mode,
each with its operating point (batch 1..max on a grid), fleet and cost,
infeasible candidates kept with their reason, and the Pareto frontiers marked.

EP candidates are the degrees that divide a mixture-of-experts model's experts
(1 for a dense model); the chunk size (vLLM ``max_num_batched_tokens``) trades
TTFT against the ITL percentile's chunk stalls, so it is searched too.

The sweep calls :func:`planner.sizing.operating.operating_arrays` and
:func:`planner.sizing.fleet.fleet_arrays` on arrays of layouts: the same functions
``plan`` calls with one layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from planner.errors import ScenarioError, validation_message
from planner.physics.roofline import compute_dtype
from planner.sizing.fleet import FleetArrays, fleet_arrays
from planner.sizing.operating import OperatingArrays, operating_arrays, workload_stats
from planner.spec.catalog import load_catalog
from planner.spec.context import resolve
from planner.spec.scenario import MAX_EP, MAX_PP, MAX_SEQUENCE_TOKENS, MAX_TP, Scenario
from planner.views.referee import REFEREE_MAX_SIMULATED, RefereePick, Simulate, referee_pick, slo_status

__all__ = ["DEFAULT_CHUNKS", "DEFAULT_DTYPES", "DEFAULT_EP", "DEFAULT_PP", "DEFAULT_TP", "MAX_SWEEP_CANDIDATES",
           "MOE_MULTI_NODE_TP", "tp_ep_pairs",
           "SweepResult", "SweepRow", "pareto_front", "sweep", "sweep_result"]

DEFAULT_DTYPES: tuple[str, ...] = ("bf16", "fp8", "int8", "int4", "nvfp4")
DEFAULT_TP: tuple[int, ...] = (1, 2, 4, 8)
DEFAULT_PP: tuple[int, ...] = (1, 2)
# Expert-parallel degrees tried for MoE models (those dividing TP and the expert count:
# EP lays the experts over the TP GPUs a stage has), each with data-parallel attention
# off and on.
DEFAULT_EP: tuple[int, ...] = (1, 2, 4, 8)
# Multi-node groups tried for MoE models (TP16/EP16 over two 8-GPU nodes, EP32 over
# four: how DeepSeek-class models are served over RDMA), EP = TP only.
MOE_MULTI_NODE_TP: tuple[int, ...] = (16, 32)
# Chunk sizes tried (vLLM's max_num_batched_tokens: 512 is the Sarathi-Serve
# example, 2048 the planner's default, 8192 vLLM V1's default on large GPUs).
DEFAULT_CHUNKS: tuple[int, ...] = (512, 2048, 8192)
MODES: tuple[str, ...] = ("colocated", "disaggregated")
# Most candidates one sweep evaluates (GPUs × dtypes × TP × PP × EP × chunks × modes, after
# de-duplication).  The default sweep is 720; 20,000 take about 1 s and 50 MB
# on a 2-core machine (92,160 took 3.5 s and 210 MB), and are more rows than
# anyone reads.
MAX_SWEEP_CANDIDATES = 20_000

T = TypeVar("T")


def _unique(values: Sequence[T]) -> list[T]:
    """``values`` without repeats, in first-seen order."""
    return list(dict.fromkeys(values))


def _check_axes(gpu_ids: list[str], dts: list[str], tps: list[int], pps: list[int], modes: list[str], *,
                eps: list[int], chunks: list[int], dps: list[bool], pairs: int) -> None:
    for flag, axis, top in (("--tp", tps, MAX_TP), ("--pp", pps, MAX_PP), ("--ep", eps, MAX_EP),
                            ("--chunks", chunks, MAX_SEQUENCE_TOKENS)):
        if not axis:
            raise ScenarioError(f"{flag}: give at least one value")
        for v in axis:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
                raise ScenarioError(f"{flag}: every value must be an integer from 1 to {top}, got {v!r}")
    for flag, names in (("--gpus", gpu_ids), ("--dtypes", dts), ("--modes", modes)):
        if not names:
            raise ScenarioError(f"{flag}: give at least one value")
    if not pairs:
        raise ScenarioError("--ep: no value divides any --tp value (parallel.ep lays the experts over the TP GPUs)")
    n = len(gpu_ids) * len(dts) * pairs * len(pps) * len(dps) * len(chunks) * len(modes)
    if n > MAX_SWEEP_CANDIDATES:
        raise ScenarioError(
            f"sweep: {len(gpu_ids)} GPUs × {len(dts)} dtypes × {pairs} TP·EP pairs × {len(pps)} PP × "
            f"{len(dps)} DP attention × {len(chunks)} chunks × {len(modes)} modes = {n:,} candidates, over the "
            f"limit of {MAX_SWEEP_CANDIDATES:,}; narrow --gpus, --dtypes, --tp, --pp, --ep, --chunks or --modes")


def tp_ep_pairs(tps: Sequence[int], eps: Sequence[int] | None, *, moe: bool, base_ep: int = 1
                ) -> list[tuple[int, int]]:
    """The (TP, EP) pairs a sweep tries: ``eps`` dividing each TP; by default, for a
    mixture-of-experts model, the DEFAULT_EP degrees dividing TP within a node's worth
    (TP ≤ 8) and EP = TP for the multi-node groups; a dense model keeps ``base_ep``."""
    if eps:
        return [(t, e) for t in tps for e in _unique(list(eps)) if t % e == 0]
    if not moe:
        return [(t, base_ep) for t in tps if t % base_ep == 0]
    top = max(DEFAULT_EP)
    return [(t, e) for t in tps for e in (DEFAULT_EP if t <= top else (t,)) if t % e == 0]


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


Layout = tuple[int, int, int, bool]  # (tp, pp, ep, dp_attention)


def _layouts(model_heads: int, experts: int, pairs: Sequence[tuple[int, int]], pps: Sequence[int],
             dps: Sequence[bool], layers: int) -> tuple[list[Layout], list[tuple[int, int, int, bool, str]]]:
    """The candidate layouts of (TP, EP) pairs (EP dividing TP): EP > 1 only for MoE
    models, dividing the experts (else not a candidate); TP dividing the heads unless
    attention is data-parallel."""
    ok: list[Layout] = []
    bad: list[tuple[int, int, int, bool, str]] = []
    for tp, ep in pairs:
        for pp in pps:
            for dp in dps:
                if ep > 1 and (not experts or experts % ep):
                    continue
                if model_heads % (1 if dp else tp):
                    bad.append((tp, pp, ep, dp, f"parallel.tp ({tp}) does not divide {model_heads} heads"))
                elif pp > layers:
                    bad.append((tp, pp, ep, dp, "parallel.pp exceeds the layers"))
                else:
                    ok.append((tp, pp, ep, dp))
    return ok, bad


@dataclass(frozen=True)
class SweepRow:
    """One candidate of the sweep (SI units; None where there is no number: an
    infeasible candidate's fleet, or a layout ruled out before any physics).

    :meth:`to_dict` is the row the CLI's JSON/CSV and the pages read: its keys
    are a public contract (field order = column order)."""

    gpu: str
    weights_dtype: str
    kv_dtype: str
    tp: int
    pp: int
    ep: int
    dp_attention: bool
    chunk_tokens: int
    mode: str
    feasible: bool
    reason: str
    compute_dtype: str  # the tensor-core rate used (FP4 weights on Hopper: fp8)
    batch_size: int | None = None
    itl_s: float | None = None  # mean ITL at the batch (= mean TPOT)
    itl_percentile_s: float | None = None  # per-request TPOT at slo.itl_percentile, chunk stalls averaged in
    ttft_s: float | None = None  # mean, queueing included
    ttft_p90_s: float | None = None
    goodput_req_s_per_replica: float | None = None
    goodput_req_s_per_gpu: float | None = None
    gpus_per_replica: int = 1
    replicas: float | None = None
    gpus_total: float | None = None
    usd_per_hour: float | None = None
    usd_per_mtok_output: float | None = None
    usd_per_mtok_blended: float | None = None
    usd_per_mtok_output_full_load: float | None = None
    pareto_cost_itl: bool = False
    pareto_goodput_ttft: bool = False
    cheapest: bool = False  # the refereed pick: the cheapest candidate whose simulation meets slo.attainment
    itl_gap_p99_s: float | None = None  # p99 of all token gaps (the chunk stall)
    slo_attainment: float | None = None  # analytic share of requests meeting both targets
    simulated_attainment: float | None = None  # simulated share (None: not simulated)
    slo_status: str = ""  # "meets (simulated 93% ≥ 90%)", "meets (analytic, not simulated)", …

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class SweepResult:
    """Every candidate, and the cheapest feasible one ($/Mtok output) if any."""

    rows: tuple[SweepRow, ...]
    cheapest_index: int | None
    referee: RefereePick | None = None

    @property
    def cheapest(self) -> SweepRow | None:
        return self.rows[self.cheapest_index] if self.cheapest_index is not None else None

    def to_dict(self) -> dict[str, Any]:
        """``{"rows": [row dicts], "cheapest": row dict | None, "simulated": [...], "referee": {...}}``:
        what :func:`sweep` returns (``simulated``: the candidates simulated, cheapest first, with
        their row index, ``simulated_attainment`` and whether it passed)."""
        rows = [row.to_dict() for row in self.rows]
        ref = self.referee
        return {"rows": rows, "cheapest": rows[self.cheapest_index] if self.cheapest_index is not None else None,
                "simulated": [{"row": s.index, "simulated_attainment": s.attainment, "passed": s.passed}
                              for s in (ref.simulated if ref else ())],
                "referee": None if ref is None else {"target": ref.target, "max_simulated": ref.cap,
                                                     "refereed": ref.refereed, "note": ref.note()}}


def sweep(
    base: Scenario, *, gpus: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
    tps: Sequence[int] | None = None, pps: Sequence[int] = DEFAULT_PP, eps: Sequence[int] | None = None,
    chunks: Sequence[int] | None = None, modes: Sequence[str] = MODES, referee: Simulate | None = None,
    referee_cap: int = REFEREE_MAX_SIMULATED, dp_attentions: Sequence[bool] | None = None,
) -> dict[str, Any]:
    """Evaluate every candidate; returns {"rows": [...], "cheapest": row | None, ...}
    (:meth:`SweepResult.to_dict` of :func:`sweep_result`)."""
    return sweep_result(base, gpus=gpus, dtypes=dtypes, tps=tps, pps=pps, eps=eps, chunks=chunks,
                        modes=modes, referee=referee, referee_cap=referee_cap, dp_attentions=dp_attentions).to_dict()


def sweep_result(
    base: Scenario, *, gpus: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
    tps: Sequence[int] | None = None, pps: Sequence[int] = DEFAULT_PP, eps: Sequence[int] | None = None,
    chunks: Sequence[int] | None = None, modes: Sequence[str] = MODES, referee: Simulate | None = None,
    referee_cap: int = REFEREE_MAX_SIMULATED, dp_attentions: Sequence[bool] | None = None,
) -> SweepResult:
    """Evaluate every candidate: typed rows, Pareto fronts and the cheapest marked.

    ``cheapest`` is :func:`planner.views.referee.referee_pick` over the feasible rows:
    with ``referee`` (``planner.simulate.referee.simulated_attainment``) the cheapest
    whose short simulation meets ``slo.attainment``, the simulated rows carrying
    ``simulated_attainment``; without it the analytic cheapest, labelled so.

    ``tps`` default: DEFAULT_TP, and for a mixture-of-experts model the multi-node
    MOE_MULTI_NODE_TP (with EP = TP); ``eps`` default: DEFAULT_EP (and the multi-node
    TPs) for a mixture-of-experts model, else the scenario's own; ``dp_attentions``
    default: off and on for a mixture-of-experts model, else the scenario's own;
    ``chunks`` default: DEFAULT_CHUNKS and the scenario's own.
    :func:`planner.views.review.sweep_row_scenario` turns a row back into the
    scenario ``plan`` gives the same feasibility, GPUs and $/Mtok for."""
    cat = load_catalog()
    gpu_ids = _unique(list(gpus)) if gpus else sorted(cat.gpus)
    dts = _unique(list(dtypes)) if dtypes else list(DEFAULT_DTYPES)
    pps, modes = _unique(list(pps)), _unique(list(modes))
    for g in gpu_ids:
        if g not in cat.gpus:
            raise ScenarioError(f"--gpus: unknown gpu '{g}'")
    for m in modes:
        if m not in MODES:
            raise ScenarioError(f"--modes: unknown mode '{m}' (colocated, disaggregated)")
    model = resolve(base).model
    moe = model.is_moe
    tps = _unique(list(tps)) if tps else list(DEFAULT_TP) + (list(MOE_MULTI_NODE_TP) if moe else [])
    pairs = tp_ep_pairs(tps, eps, moe=moe, base_ep=base.parallel.ep)
    ep_list = _unique(list(eps)) if eps else _unique([e for _, e in pairs]) or [base.parallel.ep]
    dp_list = (_unique([bool(x) for x in dp_attentions]) if dp_attentions
               else ([False, True] if moe else [base.parallel.dp_attention]))
    chunk_list = sorted(set(chunks) if chunks else {*DEFAULT_CHUNKS, base.serving.chunk_tokens})
    _check_axes(gpu_ids, dts, tps, pps, modes, eps=ep_list, chunks=chunk_list, dps=dp_list, pairs=len(pairs))
    rows: list[SweepRow] = []
    for gid in gpu_ids:
        for dt in dts:
            for chunk in chunk_list:
                try:
                    sc = base.model_copy(update={
                        "gpu": gid, "weights_dtype": dt,
                        "parallel": base.parallel.model_copy(update={"tp": 1, "pp": 1, "ep": 1,
                                                                     "dp_attention": False,
                                                                     "redundant_experts": 0}),
                        "serving": base.serving.model_copy(update={"chunk_tokens": chunk})})
                    sc = Scenario.model_validate(sc.model_dump())
                except ValidationError as exc:
                    raise ScenarioError(f"--dtypes: {dt}: {validation_message(exc)}") from None
                r = resolve(sc)
                cdt = compute_dtype(r.gpu, dt)  # the tensor-core rate used (FP4 weights on Hopper: fp8)
                stats = workload_stats(r)
                # The scenario's redundant experts apply to its own layouts; candidates run without.
                ok, bad = _layouts(r.model.heads, r.model.experts, pairs, pps, dp_list, r.model.layers)
                for mode in modes:
                    key = _Key(gpu=gid, weights_dtype=dt, kv_dtype=sc.kv_dtype, chunk_tokens=chunk, mode=mode,
                               compute_dtype=cdt)
                    rows.extend(_unplanned_row(key, tp=tp, pp=pp, ep=ep, dp=dp, reason=why)
                                for tp, pp, ep, dp, why in bad)
                    if not ok:
                        continue
                    op = operating_arrays(r, tp=[x[0] for x in ok], pp=[x[1] for x in ok], ep=[x[2] for x in ok],
                                          dp_attention=[x[3] for x in ok], mode=mode, stats=stats)
                    fl = fleet_arrays(r, op, stats)
                    rows.extend(_planned_row(key, op, fl, i, layout) for i, layout in enumerate(ok))
    return _referee(base, _mark_fronts(rows), referee=referee, cap=referee_cap)


def _referee(base: Scenario, result: SweepResult, *, referee: Simulate | None, cap: int) -> SweepResult:
    """The cheapest mark moved to the refereed pick; simulated rows carry their attainment."""
    from planner.views.review import sweep_row_scenario  # review imports this module

    target = base.slo.attainment
    rows = result.rows
    costs = [row.usd_per_mtok_output if row.feasible and row.usd_per_mtok_output is not None else math.inf
             for row in rows]
    pick = referee_pick(lambda i: sweep_row_scenario(base, rows[i]), costs, target=target, simulate=referee,
                        cap=cap)
    marked = tuple(replace(row, cheapest=i == pick.pick, simulated_attainment=pick.attainment_of(i),
                           slo_status=slo_status(feasible=row.feasible, attainment=pick.attainment_of(i),
                                                 target=target))
                   for i, row in enumerate(rows))
    return SweepResult(rows=marked, cheapest_index=pick.pick, referee=pick)


def _mark_fronts(rows: list[SweepRow]) -> SweepResult:
    """The rows with their Pareto fronts and the analytic cheapest feasible row marked."""
    feas = np.array([row.feasible for row in rows], dtype=bool)

    def col(values: list[float | None], sign: float = 1.0) -> NDArray[np.float64]:
        return np.array([sign * v if f and v is not None else np.nan for v, f in zip(values, feas, strict=True)],
                        float)

    cost = col([row.usd_per_mtok_output for row in rows])
    itl = col([row.itl_s for row in rows])
    ttft = col([row.ttft_p90_s for row in rows])
    gpg = col([row.goodput_req_s_per_gpu for row in rows], -1.0)
    f1, f2 = pareto_front(cost, itl), pareto_front(gpg, ttft)
    cheapest = int(np.nanargmin(np.where(feas, cost, np.nan))) if feas.any() else None
    marked = tuple(replace(row, pareto_cost_itl=bool(f1[i]), pareto_goodput_ttft=bool(f2[i]), cheapest=i == cheapest)
                   for i, row in enumerate(rows))
    return SweepResult(rows=marked, cheapest_index=cheapest)


@dataclass(frozen=True)
class _Key:
    """What one (GPU, dtype, chunk, mode) group of candidates shares."""

    gpu: str
    weights_dtype: str
    kv_dtype: str
    chunk_tokens: int
    mode: str
    compute_dtype: str


def _finite(a: NDArray[np.float64], i: int) -> float | None:
    x = float(a[i])
    return x if math.isfinite(x) else None  # NaN/inf: not a number a reader can use


def _unplanned_row(key: _Key, *, tp: int, pp: int, ep: int, dp: bool, reason: str) -> SweepRow:
    """A layout the scenario rules out before any physics (TP not dividing the heads, PP past the layers)."""
    return SweepRow(gpu=key.gpu, weights_dtype=key.weights_dtype, kv_dtype=key.kv_dtype, tp=tp, pp=pp, ep=ep,
                    dp_attention=dp, chunk_tokens=key.chunk_tokens, mode=key.mode, feasible=False, reason=reason,
                    compute_dtype=key.compute_dtype, gpus_per_replica=tp * pp)


def _planned_row(key: _Key, op: OperatingArrays, fl: FleetArrays, i: int, layout: Layout) -> SweepRow:
    """Candidate ``i`` of one ``operating_arrays``/``fleet_arrays`` evaluation."""
    tp, pp, ep, dp = layout
    return SweepRow(
        gpu=key.gpu, weights_dtype=key.weights_dtype, kv_dtype=key.kv_dtype, tp=tp, pp=pp, ep=ep, dp_attention=dp,
        chunk_tokens=key.chunk_tokens, mode=key.mode, feasible=bool(op.feasible[i]), reason=str(op.reason[i]),
        compute_dtype=key.compute_dtype, batch_size=int(op.batch_size[i]),
        itl_s=_finite(op.itl_s, i), itl_percentile_s=_finite(op.itl_percentile_s, i), ttft_s=_finite(op.ttft_s, i),
        itl_gap_p99_s=_finite(op.itl_gap_p99_s, i), slo_attainment=_finite(op.slo_attainment, i),
        ttft_p90_s=_finite(op.ttft_p90_s, i), goodput_req_s_per_replica=_finite(op.goodput_req_s_per_replica, i),
        goodput_req_s_per_gpu=_finite(fl.goodput_req_s_per_gpu, i), gpus_per_replica=tp * pp,
        replicas=_finite(fl.replicas, i), gpus_total=_finite(fl.gpus_total, i),
        usd_per_hour=_finite(fl.usd_per_hour, i), usd_per_mtok_output=_finite(fl.usd_per_mtok_output, i),
        usd_per_mtok_blended=_finite(fl.usd_per_mtok_blended, i),
        usd_per_mtok_output_full_load=_finite(fl.usd_per_mtok_output_full_load, i),
    )
