"""Does a plan meet its SLO: the share of requests meeting both targets, as the
simulator scores it (DistServe's goodput), estimated from the load model.

A request meets the SLO when its TTFT ≤ ``slo.ttft_s`` and its TPOT (its own mean
inter-token time, (finish − first token) / (o − 1)) ≤ ``slo.itl_s``; the plan is
feasible when at least ``slo.attainment`` of requests do.  This module is the one
place that decides it; the operating point calls it per candidate × batch.

* TTFT: the prefill pool's distribution (``physics.queueing.ttft_pool``): the wait is
  0 with probability 1 − C and exponential with mean W/C otherwise, after which a
  request of class j needs its own latency s_j:
  P(TTFT ≤ t) = Σ_j w_j [t ≥ s_j] ((1 − C) + C (1 − e^(−(t − s_j) C / W))).
* TPOT (colocated): a request decoding for T = (o − 1)·ITL on a replica offered λ
  requests/s is interrupted by the prompts arriving meanwhile, Poisson(λT), each
  adding its chunks' time P to the request's iterations.  Its TPOT is
  c/τ + S/(o − 1), S compound Poisson with mean λ T E[P] and variance λ T E[P²]
  (c/τ = ITL (1 − λ E[P]), so the mean TPOT is the mean ITL); S is taken as a gamma
  with that mean and variance, per output class o.  Disaggregated decode has no
  chunks: TPOT = c/τ.
* Attainment = P(TTFT ≤ target) × P(TPOT ≤ target): the two are taken as
  independent (a busy replica slows both, so the true share is, if anything, higher).
* The stall: the p99 of all token gaps, (c + X_{p99})/τ over the chunk-time
  distribution (``GAP_PERCENTILE``), checked against ``slo.itl_gap_p99_s`` when set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammainc

from planner.physics.lengths import LengthSamples
from planner.physics.queueing import QueueWait

__all__ = [
    "GAP_PERCENTILE",
    "MAX_OUTPUT_CLASSES",
    "QUANTILE_GRID",
    "QUANTILE_ROUNDS",
    "TpotLoad",
    "attainment",
    "output_classes",
    "tpot_quantile",
    "tpot_within",
    "ttft_within",
]

# The stall statistic shown beside the TPOT: the p99 of every token gap.
GAP_PERCENTILE = 0.99
# Output lengths are grouped into at most this many equal-probability classes.
MAX_OUTPUT_CLASSES = 16
# A displayed TPOT percentile (only at the chosen batch) is found on a grid of the bracket,
# refined: 3 rounds of 65 points leave 1/64³ ≈ 4e-6 of the bracket, far below any displayed digit.
QUANTILE_GRID = 65
QUANTILE_ROUNDS = 3
Arr = NDArray[np.float64]


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


def ttft_within(target_s: float, wait: QueueWait, own_s: ArrayLike, weights: ArrayLike) -> Arr:
    """P(TTFT ≤ ``target_s``): ``wait`` broadcast over candidates (× batches), ``own_s``
    with the request classes on its last axis (weights summing to 1)."""
    own = _f(own_s)
    w = _f(weights)
    pw = np.expand_dims(_f(wait.p_wait), -1)
    mean = np.expand_dims(_f(wait.mean_s), -1)
    d = target_s - own
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        tail = np.where(pw > 0, mean / pw, 0.0)
        waited = np.where(np.isfinite(tail) & (tail > 0), 1.0 - np.exp(-np.maximum(d, 0.0) / np.where(
            tail > 0, tail, 1.0)), np.where(np.isfinite(tail), 1.0, 0.0))
    p = np.where(d >= 0, (1.0 - pw) + pw * waited, 0.0)
    return np.asarray(np.sum(w * p, axis=-1), dtype=float)


def output_classes(samples: LengthSamples, *, max_classes: int = MAX_OUTPUT_CLASSES) -> tuple[Arr, Arr]:
    """(output tokens, weight) of at most ``max_classes`` equal-probability groups."""
    order = np.argsort(samples.output, kind="stable")
    o, w = samples.output[order], samples.weight[order]
    values = np.unique(o)
    if values.size <= max_classes:
        return values.astype(float), np.array([float(w[o == v].sum()) for v in values])
    cum = np.cumsum(w) - 0.5 * w
    group = np.minimum((cum * max_classes).astype(int), max_classes - 1)
    weights = np.bincount(group, weights=w, minlength=max_classes).astype(float)
    means = np.bincount(group, weights=w * o, minlength=max_classes) / np.where(weights > 0, weights, 1.0)
    keep = weights > 0
    return means[keep], weights[keep] / weights[keep].sum()


@dataclass(frozen=True)
class TpotLoad:
    """What a request's TPOT depends on, per candidate (× batch): the mean ITL, the
    replica's request rate, the mean and second moment of one request's prefill work
    riding in the iterations (0 disaggregated), and the output classes."""

    itl_mean_s: Arr
    rate_per_s: Arr
    work_mean_s: Arr
    work_m2_s2: Arr
    outputs: Arr  # (K,)
    output_weights: Arr  # (K,)

    def at(self, rows: NDArray[np.int64], cols: NDArray[np.int64], shape: tuple[int, ...]) -> TpotLoad:
        """The load at (row, column) of arrays broadcast to ``shape``."""

        def pick(a: Arr) -> Arr:
            return np.broadcast_to(a, shape)[rows, cols]

        return TpotLoad(itl_mean_s=pick(self.itl_mean_s), rate_per_s=pick(self.rate_per_s),
                        work_mean_s=pick(self.work_mean_s), work_m2_s2=pick(self.work_m2_s2), outputs=self.outputs,
                        output_weights=self.output_weights)


@dataclass(frozen=True)
class _TpotTerms:
    """The gamma of each output class, computed once for every evaluation of the CDF."""

    base: Arr  # c/τ (…, 1)
    mean: Arr  # mean TPOT (…, 1)
    gaps: Arr  # o − 1 (K,)
    shape: Arr  # gamma shape k (…, K)
    scale: Arr  # gamma scale θ (…, K)
    stochastic: NDArray[np.bool_]  # (…, K)
    finite: NDArray[np.bool_]  # (…, 1)
    weights: Arr  # (K,)


def _terms(ld: TpotLoad) -> _TpotTerms:
    mu = np.expand_dims(_f(ld.itl_mean_s), -1)
    lam = np.expand_dims(_f(ld.rate_per_s), -1)
    e1 = np.expand_dims(_f(ld.work_mean_s), -1)
    e2 = np.expand_dims(_f(ld.work_m2_s2), -1)
    gaps = np.maximum(ld.outputs - 1.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        base = mu * np.clip(1.0 - lam * e1, 0.0, 1.0)
        m = lam * gaps * mu * e1
        v = lam * gaps * mu * e2
        stochastic = (m > 0) & (v > 0) & np.isfinite(m) & np.isfinite(v)
        k = np.where(stochastic, m * m / np.where(stochastic, v, 1.0), 1.0)
        theta = np.where(stochastic, v / np.where(stochastic, m, 1.0), 1.0)
    return _TpotTerms(base=base, mean=mu, gaps=gaps, shape=k, scale=theta, stochastic=stochastic,
                      finite=np.isfinite(mu), weights=_f(ld.output_weights))


def _cdf(x_s: ArrayLike, t: _TpotTerms) -> Arr:
    """P(TPOT ≤ x) per entry of ``x_s`` (broadcast with the load's arrays)."""
    x = np.expand_dims(_f(x_s), -1)
    with np.errstate(invalid="ignore", over="ignore"):
        slack = np.maximum((x - t.base) * t.gaps, 0.0) / t.scale
        p = np.where(t.stochastic, gammainc(t.shape, np.where(t.stochastic, slack, 0.0)),
                     (x >= t.mean * (1.0 - 1e-12)).astype(float))
    p = np.where(t.finite, p, 0.0)
    p = np.where(t.gaps > 0, p, 1.0)  # one output token: no gap, TPOT 0
    return np.asarray(np.sum(t.weights * p, axis=-1), dtype=float)


def _broadcast_terms(t: _TpotTerms) -> _TpotTerms:
    """The terms with a leading axis for a grid of evaluation points."""
    return _TpotTerms(base=t.base[None], mean=t.mean[None], gaps=t.gaps, shape=t.shape[None], scale=t.scale[None],
                      stochastic=t.stochastic[None], finite=t.finite[None], weights=t.weights)


def tpot_within(target_s: float, ld: TpotLoad) -> Arr:
    """P(TPOT ≤ ``target_s``) per candidate (× batch)."""
    return _cdf(np.full(np.shape(ld.itl_mean_s), float(target_s)), _terms(ld))


def tpot_quantile(q: float, ld: TpotLoad) -> Arr:
    """The q-quantile of per-request TPOT (call it on chosen candidates: one CDF evaluation per grid round)."""
    t = _terms(ld)
    mu = _f(ld.itl_mean_s)
    ok = np.isfinite(mu)
    lo = np.zeros(mu.shape)
    # S/(o − 1) ≤ its mean + 12 standard deviations for the shortest output, well past any quantile shown.
    gaps = float(np.min(np.maximum(ld.outputs - 1.0, 1.0)))
    with np.errstate(invalid="ignore"):
        sd = np.sqrt(np.maximum(_f(ld.rate_per_s) * mu * _f(ld.work_m2_s2) / gaps, 0.0))
    hi = np.where(ok, mu + 12.0 * sd + 1e-9, 0.0)
    # Each round evaluates the CDF on QUANTILE_GRID points of the bracket at once and keeps
    # the cell holding the quantile: QUANTILE_ROUNDS rounds narrow it to 1/(QUANTILE_GRID − 1)^rounds.
    steps = np.linspace(0.0, 1.0, QUANTILE_GRID)
    for _ in range(QUANTILE_ROUNDS):
        xs = lo[..., None] + (hi - lo)[..., None] * steps  # (…, G)
        below = _cdf(np.moveaxis(xs, -1, 0), _broadcast_terms(t)) < q  # (G, …)
        n_below = np.sum(below, axis=0)
        i = np.clip(n_below, 1, QUANTILE_GRID - 1)
        width = (hi - lo) / (QUANTILE_GRID - 1)
        lo, hi = lo + (i - 1) * width, lo + i * width
    return np.where(ok, hi, np.inf)


def attainment(*, ttft_share: ArrayLike, tpot_share: ArrayLike) -> Arr:
    """Share of requests meeting both targets (the two taken as independent)."""
    return _f(ttft_share) * _f(tpot_share)
