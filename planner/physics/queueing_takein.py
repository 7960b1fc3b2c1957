"""The wait before a scheduler takes a request in, added to a prompt's own latency by the load
model (``planner.sizing.load``, ``planner.sizing.modes``), in decode passes beyond the one in
progress at its arrival, with its spread for the TTFT percentiles:

* SGLang's ``--scheduler-recv-interval`` k (``serving.scheduler_recv_interval``):
  ``recv_wait_cycles``, ``recv_wait_points``;
* TensorRT-LLM's attention-DP balance (``attention_dp_config``: ``enable_balance``,
  ``timeout_iters`` T; ``serving.attention_dp_balance_iters``): ``balance_wait_cycles``,
  ``balance_wait_points``, and ``balance_busy``, the chance every rank decodes.

The simulator runs the same rules (``planner.simulate.replica``, its compiled twin).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammainc

from planner.physics.queueing_numerics import Arr, _f

__all__ = [
    "balance_busy",
    "balance_wait_cycles",
    "balance_wait_points",
    "recv_wait_cycles",
    "recv_wait_points",
]


def _recv_gaps(interval: ArrayLike, arrivals_per_cycle: ArrayLike) -> tuple[Arr, Arr]:
    """(k, π_1): the interval and the stationary share of short (one-pass) gaps between takes."""
    k = np.maximum(_f(interval), 1.0)
    p = np.maximum(_f(arrivals_per_cycle), 0.0)
    q1, qk = -np.expm1(-p), -np.expm1(-p * k)
    return k, qk / np.maximum(1.0 - q1 + qk, 1e-300)


def recv_wait_cycles(*, interval: ArrayLike, arrivals_per_cycle: ArrayLike) -> Arr:
    """Mean extra wait, in decode passes, of a request for a scheduler that takes in new
    requests every ``interval``-th pass (SGLang's --scheduler-recv-interval), beyond the
    pass in progress at its arrival (the residual the load model already counts).

    A take that finds requests is followed by a pass with prompt tokens, after which the
    scheduler takes again (gap: 1 pass); a take that finds none waits ``interval`` passes
    (gap: k).  With Poisson arrivals at p per pass, a gap of g passes ends in a take that
    finds some with probability q_g = 1 − e^(−p·g): the gap lengths are a two-state Markov
    chain, short with stationary probability π_1 = q_k / (1 − q_1 + q_k).  An arrival lands
    in a gap with probability ∝ its length, and waits on average

        W = E[G²] / (2 E[G]) − 1/2,  E[G] = π_1 + (1 − π_1)·k,  E[G²] = π_1 + (1 − π_1)·k²

    passes: (k − 1)/2 at a trickle, 0 when a request arrives in every pass, 0 for k = 1."""
    k, short = _recv_gaps(interval, arrivals_per_cycle)
    g1 = short + (1.0 - short) * k
    g2 = short + (1.0 - short) * k * k
    w = np.where(k > 1.0, g2 / (2.0 * g1) - 0.5, 0.0)
    return np.maximum(w, 0.0)


RECV_WAIT_POINTS = 16  # equal-probability points of the receive wait in the TTFT distribution


def recv_wait_points(*, interval: ArrayLike, arrivals_per_cycle: ArrayLike, busy: ArrayLike,
                     points: int = RECV_WAIT_POINTS) -> Arr:
    """The receive wait's distribution beyond the residual pass, in passes: the mean wait of
    each of ``points`` equal-probability bins (last axis), their mean :func:`recv_wait_cycles` × ``busy``.

    An arrival finds the replica idle with probability 1 − ``busy`` (taken at once: 0), else
    lands in a short gap (time to the take U(0, 1) passes) or, with probability
    P_k = (1 − π_1)·k / E[G], in a long one (U(0, k)); less the half pass already counted.
    The CDF is piecewise linear between −1/2, 0 (the idle mass), 1/2 and k − 1/2."""
    k, short = _recv_gaps(interval, arrivals_per_cycle)
    b = np.clip(_f(busy), 0.0, 1.0)
    long_share = (1.0 - short) * k / (short + (1.0 - short) * k)  # of busy arrivals, those in a long gap
    a_s, a_l = b * (1.0 - long_share), b * long_share
    xs = [np.full_like(b, -0.5), np.zeros_like(b), np.zeros_like(b), np.full_like(b, 0.5), k - 0.5]
    f0 = 0.5 * a_s + 0.5 * a_l / k
    fs = [np.zeros_like(b), f0, f0 + (1.0 - b), a_s + a_l / k + (1.0 - b), np.ones_like(b)]
    return np.where(np.asarray(k)[..., None] > 1.0, _piecewise_bins(xs, fs, points), 0.0)


def _piecewise_bins(xs: list[Arr], fs: list[Arr], points: int) -> Arr:
    """The mean of each of ``points`` equal-probability bins (last axis) of a distribution whose
    CDF is piecewise linear through (xs[i], fs[i]): the quantile function is linear on each
    piece, so each bin's mean is integrated exactly."""
    edges = np.arange(points + 1) / points
    shape = np.broadcast_shapes(*(np.shape(x) for x in xs), *(np.shape(f) for f in fs))
    out = np.zeros(shape + (points,))
    u0, u1 = edges[:-1], edges[1:]
    for i in range(len(xs) - 1):
        lo, hi = np.broadcast_to(fs[i], shape)[..., None], np.broadcast_to(fs[i + 1], shape)[..., None]
        x0, x1 = np.broadcast_to(xs[i], shape)[..., None], np.broadcast_to(xs[i + 1], shape)[..., None]
        a, z = np.maximum(u0, lo), np.minimum(u1, hi)
        overlap = np.maximum(z - a, 0.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            frac = np.where(hi > lo, ((a + z) / 2.0 - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0)
        mid = x0 + (x1 - x0) * np.clip(np.nan_to_num(frac), 0.0, 1.0)
        out = out + overlap * mid * points
    return out


def _balance_survival(timeout: int, arrivals_per_cycle: ArrayLike, ranks: int) -> tuple[Arr, Arr]:
    """(E[G], P(wait ≥ x) for x = 0 … T − 1 on the last axis) for TensorRT-LLM's attention-DP
    balance with R = ``ranks`` ranks, T = ``timeout`` passes and Poisson arrivals at p per pass
    spread evenly over the ranks (each rank's own Poisson stream at p/R).

    A gap between takes ends at the first pass n by whose end every rank holds an arrival, or
    at n = T: P(G > n) = 1 − F_R(n) for n < T, F_k(n) = (1 − e^(−p·n/R))^k.  A request's wait (whole
    passes after the one it arrives in) is at least x when the gap outlasts pass n = j + x − 1 for
    its pass j; the arrivals are not independent of the gap (a gap ends because of them), and
    for Poisson arrivals E[A_n·1{not all covered}] = p·n·(1 − F_(R−1)(n)) (the extra arrival of the
    size-biased count covers one rank).  Summed over the passes of a gap and divided by its
    p·E[G] arrivals:

        P(wait ≥ x) = Σ_(n=x)^(T−1) (1 − F_(R−1)(n)) / E[G],  E[G] = Σ_(n=0)^(T−1) (1 − F_R(n))"""
    t = max(int(timeout), 1)
    r = max(int(ranks), 1)
    p = np.maximum(_f(arrivals_per_cycle), 0.0)[..., None]
    n = np.arange(t, dtype=float)
    cover = -np.expm1(-p * n / r)  # one rank holds an arrival after n passes
    eg = np.sum(1.0 - cover**r, axis=-1)
    open_rest = 1.0 - cover ** (r - 1)  # the size-biased count's other ranks not all covered
    tail = np.cumsum(open_rest[..., ::-1], axis=-1)[..., ::-1]  # Σ_(n ≥ x)
    surv = np.concatenate([np.ones_like(eg)[..., None], tail[..., 1:] / eg[..., None]], axis=-1)
    return eg, np.minimum(surv, 1.0)


def balance_wait_cycles(*, timeout: int, arrivals_per_cycle: ArrayLike, ranks: int) -> Arr:
    """Mean extra wait, in decode passes, of a request for TensorRT-LLM's attention-DP balance
    (``attention_dp_config: enable_balance``, ``timeout_iters`` T, ``batching_wait_iters`` 0),
    beyond the pass in progress at its arrival (the residual the load model counts).

    The scheduler holds every rank's new prompts until each of the R attention-DP ranks has
    one, or until T passes have gone by since its last take (its counter runs whether or not
    a prompt waits); either way it then takes them all and counts again.  With Poisson
    arrivals at p per pass spread evenly over the ranks (:func:`_balance_survival`):

        W = Σ_(n=1)^(T−1) n·(1 − (1 − e^(−p·n/R))^(R−1)) / Σ_(n=0)^(T−1) (1 − (1 − e^(−p·n/R))^R)

    passes: (T − 1)/2 at a trickle, shrinking as the ranks fill before the timeout; 0 on one
    rank (a request is every rank's) or for T = 1.  The caller weighs it by the chance that
    every rank is decoding (a rank without sequences releases the prompts at once)."""
    if int(ranks) <= 1 or int(timeout) <= 1:
        return np.zeros_like(_f(arrivals_per_cycle))
    _, surv = _balance_survival(timeout, arrivals_per_cycle, ranks)
    return np.asarray(np.sum(surv[..., 1:], axis=-1), dtype=float)


def balance_busy(*, ranks: int, batch: ArrayLike, replicas: ArrayLike = 1.0) -> Arr:
    """The chance that an arrival finds every one of a replica's ``ranks`` attention-DP ranks
    decoding (else a rank has no sequence and the balance releases prompts at once): the
    fleet's sequences in flight are Poisson with mean n·B (open-loop arrivals, any service
    time), and a least-loaded router spreads them evenly over its n ``replicas``, so a
    replica holds N = X/n, X ~ Poisson(n·B): P(N ≥ R) = P(X ≥ n·R) = P(n·R, n·B), the
    regularized lower incomplete gamma.  One replica: P(Poisson(B) ≥ R)."""
    n = np.maximum(_f(replicas), 1.0)
    b = np.maximum(_f(batch), 0.0)
    return np.asarray(gammainc(max(int(ranks), 1) * n, n * b), dtype=float)


def balance_wait_points(*, timeout: int, arrivals_per_cycle: ArrayLike, ranks: int, busy: ArrayLike,
                        points: int = RECV_WAIT_POINTS) -> Arr:
    """The attention-DP balance wait's distribution beyond the residual pass, in passes: the
    mean wait of each of ``points`` equal-probability bins (last axis), their mean
    :func:`balance_wait_cycles` × ``busy``.  An arrival finds a rank idle with probability
    1 − ``busy`` (taken at once: 0), else waits x whole passes with P(wait ≥ x) from
    :func:`_balance_survival`: a step CDF, exact in each bin."""
    b = np.clip(_f(busy), 0.0, 1.0)
    shape = np.broadcast_shapes(np.shape(b), np.shape(_f(arrivals_per_cycle)))
    if int(ranks) <= 1 or int(timeout) <= 1:
        return np.zeros(shape + (points,))
    _, surv = _balance_survival(timeout, arrivals_per_cycle, ranks)
    b = np.broadcast_to(b, shape)
    surv = np.broadcast_to(surv, shape + (surv.shape[-1],))
    xs: list[Arr] = []
    fs: list[Arr] = []
    below = np.zeros(shape)  # P(wait < x)
    for x in range(surv.shape[-1]):
        at = 1.0 - b * surv[..., x + 1] if x + 1 < surv.shape[-1] else np.ones(shape)  # P(wait ≤ x)
        xs += [np.full(shape, float(x)), np.full(shape, float(x))]
        fs += [below, at]
        below = at
    return _piecewise_bins(xs, fs, points)
