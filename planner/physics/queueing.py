"""The load model: offered load and one replica's service times in, batch,
queueing delay and latency percentiles out.  ``plan``, ``sweep``, ``validate``
and the probe's prediction all call it, so one question gets one answer.

This module holds the queueing delay and the TTFT (c, n, R and P(n) below are the
replica's, see ``queueing_decode``: its service times, the colocated decode and its ITL,
closed loops; ``queueing_takein``: the wait before a scheduler takes a request in);
every name of the load model stays importable from here.

TTFT: the prefill servers form a pool when a router spreads requests over them
(M/G/c).  On a colocated replica the server is the iteration's prompt room: a
prompt occupies it for c·n/R + P(n) (its share of the iteration plus its own chunk
work), so several short prompts ride one iteration, and its own latency is
⌈n/R⌉·c + P(n).  Mean wait by Allen–Cunneen: W = C(c, a) / (cμ − λ) × (1 + c_s²)/2,
with C the Erlang-C probability of waiting, a = λ/μ, c_s² the squared coefficient
of variation of the service time (c = 1: Pollaczek–Khinchine).  Given that a
request waits, the wait is taken as exponential with mean W / C, so the TTFT
distribution is P(T ≤ t) = Σ_j w_j [(1 − C) + C (1 − e^(−(t − s_j)C/W))] over
t ≥ s_j, s_j each request's own service; its q-quantile has a closed form per
interval between sorted services (``sojourn_quantile``).
A prefill replica of PP stages pipelines successive prompts: it is one server of
service S/PP (throughput PP/S), and a prompt's own latency over its m chunks
(microbatches) is (S/PP) / (1 − bubble), bubble = (PP − 1)/(m + PP − 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from numpy.typing import ArrayLike

from planner.physics.queueing_decode import (
    ColocatedDecode,
    ServiceTimes,
    batch_at_rate,
    colocated_decode,
    prefill_room_tokens,
    rate_at_concurrency,
    stall_quantile,
)
from planner.physics.queueing_numerics import BISECTION_STEPS, ROUNDING_MARGIN, Arr, _f
from planner.physics.queueing_takein import (
    balance_busy,
    balance_wait_cycles,
    balance_wait_points,
    recv_wait_cycles,
    recv_wait_points,
)
from planner.physics.techniques import pipeline_bubble

__all__ = [
    "BISECTION_STEPS",
    "ROUNDING_MARGIN",
    "TTFT_PERCENTILE",
    "QueueWait",
    "ColocatedDecode",
    "ServiceTimes",
    "TtftPool",
    "batch_at_rate",
    "colocated_decode",
    "erlang_c",
    "mgc_wait",
    "pipelined_prefill",
    "prefill_room_tokens",
    "rate_at_concurrency",
    "balance_busy",
    "balance_wait_cycles",
    "balance_wait_points",
    "recv_wait_cycles",
    "recv_wait_points",
    "sojourn_quantile",
    "sojourn_quantile_bisect",
    "stall_quantile",
    "ttft_pool",
]

# TTFT targets are checked at this percentile (the SLO reads "p90 TTFT").
TTFT_PERCENTILE = 0.9

# Pools up to this size get the exact Erlang recursion (O(c)); larger ones the
# Halfin–Whitt approximation, whose error is below 1e-3 in C(c, a) at c ≥ 1,000
# (Halfin & Whitt 1981, "Heavy-traffic limits for queues with many exponential servers").
ERLANG_EXACT_MAX_SERVERS = 1024
_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_f(x: Arr) -> Arr:
    return np.asarray(_erf(x), dtype=float)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _erlang_c_exact(c: Arr, a: Arr, limit: float, out: Arr) -> None:  # pragma: no cover - compiled
    """C(c, a) into ``out`` where c is an integer from 1 to ``limit``: B_k = a·B_(k−1) / (k + a·B_(k−1))
    from B_0 = 1, then C = B / (1 − (a/c)(1 − B)) (1 where a ≥ c)."""
    for i in range(c.size):
        ci = c[i]
        if ci < 1.0 or ci > limit or ci != math.floor(ci):
            continue
        ai = a[i]
        b = 1.0
        n = int(ci)
        for k in range(1, n + 1):
            b = ai * b / (k + ai * b)
        rho = ai / n
        out[i] = b / (1.0 - rho * (1.0 - b)) if rho < 1 else 1.0


def erlang_c(servers: ArrayLike, offered: ArrayLike) -> Arr:
    """Probability an arrival waits in M/M/c: C(c, a), a = λ/μ (1 where a ≥ c).

    Up to ERLANG_EXACT_MAX_SERVERS servers, Erlang B by its recursion
    B_k = a·B_{k−1} / (k + a·B_{k−1}), then C = B / (1 − (a/c)(1 − B)); above it
    (the recursion is O(c), and a hostile rate asks for millions of servers) the
    Halfin–Whitt limit C ≈ 1 / (1 + β Φ(β) / φ(β)), β = (c − a) / √a."""
    c, a = np.broadcast_arrays(_f(servers), _f(offered))
    out = np.ones_like(a)
    small = c <= ERLANG_EXACT_MAX_SERVERS
    # Erlang B's recursion per pool, compiled (the same IEEE operations, in the same order,
    # as the recursion over the whole array up to the largest pool: the same bits).
    flat = out.ravel().copy()
    _erlang_c_exact(c.ravel().astype(float), a.ravel().astype(float), float(ERLANG_EXACT_MAX_SERVERS), flat)
    out = flat.reshape(out.shape)
    large = ~small
    if np.any(large):
        cl, al = c[large], np.maximum(a[large], 1e-300)
        beta = (cl - al) / np.sqrt(al)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            phi = np.exp(-0.5 * beta * beta) / math.sqrt(2.0 * math.pi)
            cdf = 0.5 * (1.0 + _erf_f(beta / math.sqrt(2.0)))
            hw = np.where(phi > 0, 1.0 / (1.0 + beta * cdf / phi), 0.0)
        out[large] = np.where(beta > 0, hw, 1.0)
    return out


@dataclass(frozen=True)
class QueueWait:
    """Waiting in a pool of identical servers (arrays broadcast over candidates)."""

    mean_s: Arr  # mean wait W (inf when saturated)
    p_wait: Arr  # probability of waiting at all (Erlang C)
    utilization: Arr  # ρ = λ E[S] / c


def mgc_wait(*, arrival_per_s: ArrayLike, servers: ArrayLike, mean_s: ArrayLike,
             second_moment_s2: ArrayLike) -> QueueWait:
    """M/G/c by Allen–Cunneen: W = C(c, λE[S]) × E[S] / (c − λE[S]) × (1 + c_s²)/2."""
    lam, c = _f(arrival_per_s), _f(servers)
    es, es2 = _f(mean_s), _f(second_moment_s2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a load past 1e308 is saturated: inf
        a = lam * es
        rho = a / c
        cs2 = np.where(es > 0, es2 / (es * es) - 1.0, 0.0)
        p_wait = np.where(rho < 1, erlang_c(c, np.minimum(a, c * (1 - ROUNDING_MARGIN))), 1.0)
        w = np.where(rho < 1, p_wait * es / (c - a) * (1.0 + cs2) / 2.0, np.inf)
    return QueueWait(mean_s=np.where(lam > 0, w, 0.0), p_wait=np.where(lam > 0, p_wait, 0.0), utilization=rho)


def _sojourn_parts(wait: QueueWait) -> tuple[Arr, Arr, Arr]:
    """(C, W/C with 0 for none or saturated, saturated) of a pool's wait."""
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.where(wait.p_wait > 0, wait.mean_s / wait.p_wait, 0.0)
    return _f(wait.p_wait), np.where(np.isfinite(tail), tail, 0.0), ~np.isfinite(wait.mean_s)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _sojourn_closed_form(q: float, ss: Arr, ws: Arr, pw: Arr, tail: Arr,
                         out: Arr) -> None:  # pragma: no cover - compiled
    """Per row of sorted services ``ss`` (weights ``ws``): the first s_k with F(s_k) ≥ q, or
    s_k + θ·ln(C·E_k / (A_k − q)) inside [s_k, s_(k+1)) (see :func:`sojourn_quantile`)."""
    rows, n = ss.shape
    for r in range(rows):
        theta = tail[r]
        has_tail = theta > 0.0
        c = pw[r]
        a_k = 0.0
        e_k = 0.0
        best = np.inf
        for k in range(n):
            sk = ss[r, k]
            if has_tail:
                if k:
                    e_k = e_k * math.exp(-(sk - ss[r, k - 1]) / theta)
                e_k = e_k + ws[r, k]
            a_k = a_k + ws[r, k]
            if a_k - c * e_k >= q:
                best = sk
                break
            if has_tail and a_k > q:
                t = sk + theta * math.log(c * e_k / (a_k - q))
                nxt = ss[r, k + 1] if k + 1 < n else np.inf
                if t < nxt:
                    best = t
                    break
        out[r] = best


def sojourn_quantile(q: float, wait: QueueWait, service_s: ArrayLike, weights: ArrayLike) -> Arr:
    """q-quantile of wait + own service: the wait is 0 with probability 1 − C and
    exponential with mean W/C otherwise; ``service_s`` holds each request class's
    own service on its last axis (weights summing to 1).

    Closed form (exact; :func:`sojourn_quantile_bisect` is the bisection it replaces):
    with the services sorted s_1 ≤ … ≤ s_S, on [s_k, s_(k+1)) the CDF is
    F(t) = A_k − C·E_k·e^(−(t − s_k)/θ), θ = W/C, A_k = Σ_(j≤k) w_j and
    E_k = Σ_(j≤k) w_j e^(−(s_k − s_j)/θ) = E_(k−1)·e^(−(s_k − s_(k−1))/θ) + w_k; so the
    quantile is s_k where F(s_k) ≥ q, else s_k + θ·ln(C·E_k / (A_k − q)) where that lies
    before s_(k+1), the first such over k."""
    pw, tail, saturated = _sojourn_parts(wait)
    s, w = np.broadcast_arrays(_f(service_s), _f(weights))
    lead = np.broadcast_shapes(pw.shape, s.shape[:-1])
    s = np.broadcast_to(s, lead + s.shape[-1:])
    w = np.broadcast_to(w, s.shape)
    order = np.argsort(s, axis=-1, kind="stable")
    ss = np.take_along_axis(s, order, axis=-1)
    ws = np.take_along_axis(w, order, axis=-1)
    pw = np.broadcast_to(pw, lead)
    tail = np.broadcast_to(tail, lead)
    n = ss.shape[-1]
    flat = np.empty(int(np.prod(lead, dtype=np.int64)))
    _sojourn_closed_form(float(q), np.ascontiguousarray(ss, dtype=float).reshape(-1, n),
                         np.ascontiguousarray(ws, dtype=float).reshape(-1, n),
                         np.ascontiguousarray(pw, dtype=float).ravel(), np.ascontiguousarray(tail, dtype=float).ravel(),
                         flat)
    return np.where(saturated, np.inf, flat.reshape(lead))


def sojourn_quantile_bisect(q: float, wait: QueueWait, service_s: ArrayLike, weights: ArrayLike) -> Arr:
    """The reference for :func:`sojourn_quantile`: the same quantile by bisection
    on the CDF (BISECTION_STEPS evaluations), kept for tests of the closed form."""
    s = _f(service_s)
    w = _f(weights)
    pw = np.expand_dims(wait.p_wait, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.expand_dims(np.where(wait.p_wait > 0, wait.mean_s / wait.p_wait, 0.0), -1)
    saturated = ~np.isfinite(wait.mean_s)
    tail = np.where(np.isfinite(tail), tail, 0.0)

    def cdf(t: Arr) -> Arr:
        d = np.expand_dims(t, -1) - s
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            waited = np.where(tail > 0, 1.0 - np.exp(-np.maximum(d, 0.0) / np.where(tail > 0, tail, 1.0)), 1.0)
        return np.asarray(np.sum(w * np.where(d >= 0, (1.0 - pw) + pw * waited, 0.0), axis=-1), dtype=float)

    lo = np.min(s, axis=-1)
    hi = np.max(s, axis=-1) + np.squeeze(tail, -1) * (np.log(1.0 / max(1.0 - q, ROUNDING_MARGIN)) + 1.0)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return np.where(saturated, np.inf, hi)


@dataclass(frozen=True)
class TtftPool:
    """TTFT of a pool of prefill servers (arrays over candidates)."""

    wait: QueueWait
    service_mean_s: Arr  # a request's own mean prefill latency (+ exposed transfer)
    mean_s: Arr  # mean TTFT
    quantile_s: Arr  # TTFT at TTFT_PERCENTILE


def ttft_pool(*, arrival_per_s: ArrayLike, servers: ArrayLike, server_s: ArrayLike, own_s: ArrayLike,
              weights: ArrayLike, percentile: float = TTFT_PERCENTILE) -> TtftPool:
    """TTFT = wait in M/G/c (service ``server_s`` per request, last axis) + the
    request's own latency ``own_s``."""
    w = _f(weights)
    srv, own = _f(server_s), _f(own_s)
    es = np.sum(w * srv, axis=-1)
    es2 = np.sum(w * srv * srv, axis=-1)
    qw = mgc_wait(arrival_per_s=arrival_per_s, servers=servers, mean_s=es, second_moment_s2=es2)
    own_mean = np.sum(w * own, axis=-1)
    return TtftPool(wait=qw, service_mean_s=own_mean, mean_s=qw.mean_s + own_mean,
                    quantile_s=sojourn_quantile(percentile, qw, own, w))


def pipelined_prefill(*, prefill_s: ArrayLike, stages: ArrayLike, microbatches: ArrayLike) -> tuple[Arr, Arr]:
    """(server time S/PP, own latency (S/PP)/(1 − bubble)) of a PP-stage prefill replica."""
    p = _f(stages)
    per = _f(prefill_s) / p
    bubble = _f(pipeline_bubble(stages=p, microbatches=np.maximum(_f(microbatches), 1.0)))
    return per, per / (1.0 - bubble)

