"""The load model: offered load and one replica's service times in, batch,
queueing delay and latency percentiles out.  ``plan``, ``sweep``, ``validate``
and the probe's prediction all call it, so one question gets one answer.

A replica serves with continuous batching.  Its physics (see ``ServiceTimes``) is:

* a decode cycle c(B) at batch B (speculation included) yielding τ tokens per
  sequence per cycle;
* per request, the prefill work P(n): colocated, the sum of its chunk times
  (chunk i attends to i·chunk earlier tokens), each chunk riding one iteration
  beside the decode batch (the seeds' hybrid iteration = decode step + chunk);
  disaggregated, its prefill on a prefill replica, plus the exposed KV transfer.

Decode (colocated), at a per-replica arrival rate λ:

* ρ_p = λ·E[P] is the share of time spent on prefill chunks, so the mean gap
  between iterations is c/(1 − ρ_p) and the mean ITL = c / (τ (1 − ρ_p));
  at a batch B instead of a rate, Little's law B = λ·E[o]·ITL gives
  ITL = c/τ + B·E[P]/E[o] and λ = B / (E[o]·ITL).
* The iteration token budget T (``serving.chunk_tokens``: vLLM
  max_num_batched_tokens, SGLang chunked_prefill_size, TensorRT-LLM max_num_tokens)
  is filled by the B running decodes first (d tokens each: 1, or k + 1 positions of a
  speculative verify pass), then by as many waiting prompts, whole or a chunk of a
  long one, as fit: R(B) = max(T − d·B, 0) prompt tokens per iteration.  A prompt of
  n new tokens uses n/R of one iteration's room and spans ⌈n/R⌉ iterations; an
  iteration carrying prompt tokens runs eagerly and pays the launches ℓ once, so a
  prompt's work is P(n) = its chunks' marginal time + ℓ·a, a = max((1 − e^(−x))/x, n/R)
  (capped at 1) its share of an iteration: x = λ·c prompts arrive per cycle and share
  the next one.
* ITL at a percentile q: a share f = λ·E[n]/R·c/(1 − ρ_p) of iterations' room
  carries prompt tokens whose stall X follows the chunk-time distribution; the gap is
  (c + X)/τ, so the q-quantile is c/τ if 1 − f ≥ q, else (c + X_{(q − 1 + f)/f})/τ.
  Prefill keeps up while f < 1.
* A new prompt first waits out the iteration in progress: on average its
  residual life E[T²] / (2 E[T]) over iteration times T (c, or c + X).

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

Closed loops (a benchmark at fixed concurrency N): throughput X solves
N = X × E2E(X); streams that start together and stay in step (fixed lengths, the
probe's warm-up) instead prefill N prompts as one batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray

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
    "sojourn_quantile",
    "sojourn_quantile_bisect",
    "stall_quantile",
    "ttft_pool",
]

# TTFT targets are checked at this percentile (the SLO reads "p90 TTFT").
TTFT_PERCENTILE = 0.9
# Bisection steps for a latency quantile: 2^-48 of the bracket, far below any
# displayed digit.
BISECTION_STEPS = 48
# Relative margin keeping floating-point round-off from flipping a comparison at
# an exact boundary (offered load at capacity, a quantile level at a step of the
# cumulative weights): far below any physical difference.
ROUNDING_MARGIN = 1e-12

Arr = NDArray[np.float64]


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


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
    a = lam * es
    rho = a / c
    with np.errstate(divide="ignore", invalid="ignore"):
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


def stall_quantile(q: float, *, share: ArrayLike, stalls_s: ArrayLike, weights: ArrayLike) -> Arr:
    """q-quantile of a stall that is 0 with probability 1 − f and drawn from
    ``stalls_s`` with probability f = ``share``.  ``share`` is (candidates, …),
    ``stalls_s`` and ``weights`` (candidates or 1, K)."""
    f = np.clip(_f(share), 0.0, 1.0)
    f2 = f.reshape(f.shape[0], -1) if f.ndim else f.reshape(1, 1)
    x = np.atleast_2d(_f(stalls_s))
    w = np.broadcast_to(_f(weights), x.shape)
    order = np.argsort(x, axis=-1)
    xs = np.take_along_axis(x, order, axis=-1)
    cum = np.cumsum(np.take_along_axis(w, order, axis=-1), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        level = np.where(f2 > 0, (q - (1.0 - f2)) / f2, 0.0)
    out = np.zeros(f2.shape)
    for r in range(f2.shape[0]):
        rr = r if x.shape[0] > 1 else 0
        idx = np.searchsorted(cum[rr], level[r] * cum[rr, -1] * (1.0 - ROUNDING_MARGIN))
        out[r] = xs[rr, np.minimum(idx, x.shape[1] - 1)]
    out = np.where(1.0 - f2 >= q, 0.0, out)
    return out.reshape(f.shape)


def prefill_room_tokens(*, budget_tokens: float, batch: ArrayLike, decode_tokens: float = 1.0) -> Arr:
    """Prompt tokens one iteration carries beside B decodes: R = max(T − d·B, 0)."""
    return np.maximum(float(budget_tokens) - float(decode_tokens) * _f(batch), 0.0)


@dataclass(frozen=True)
class ServiceTimes:
    """One replica's service times for the load model (arrays broadcast: a leading
    candidate axis, then a batch axis for per-batch values; per-request values on
    the last axis with ``weights``)."""

    cycle_s: Arr  # decode cycle at each batch (…, B)
    tokens_per_pass: float  # τ: tokens per sequence per cycle (speculation)
    mean_output_tokens: float  # E[o]
    weights: Arr  # (S,) request classes' probabilities
    prefill_work_s: Arr  # (…, S) chunk time a request's prefill adds to iterations (colocated)
    prefill_iterations: Arr  # (…, S) iterations its chunks span (colocated)
    chunk_share: Arr  # (…, S) new tokens / budget_tokens: the share of an empty iteration's budget it uses
    stall_s: Arr  # (…, K) one chunk's time, over every chunk of every class
    stall_weights: Arr  # (…, K) how often each chunk occurs (summing to 1)
    budget_tokens: float  # T: tokens one iteration carries, decodes first (serving.chunk_tokens)
    decode_tokens: float  # d: tokens one decoding sequence puts in an iteration (k + 1 when verifying drafts)
    # The eager launches an iteration carrying prompt tokens pays once (prefill_work_s excludes
    # them): a prompt is charged its share n/R of them, and its own iterations in full.
    launch_s: float = 0.0

    @property
    def mean_new_tokens(self) -> Arr:
        """E[n] (…, 1): the mean new prompt tokens a request prefills."""
        return np.asarray(np.sum(self.weights * self.chunk_share, axis=-1, keepdims=True) * self.budget_tokens,
                          dtype=float)

    def room_tokens(self, batch: ArrayLike) -> Arr:
        """R(B) = max(T − d·B, 0): prompt tokens an iteration at decode batch B has room for."""
        return prefill_room_tokens(budget_tokens=self.budget_tokens, batch=batch, decode_tokens=self.decode_tokens)

    def prompt_share(self, batch: ArrayLike) -> tuple[Arr, Arr]:
        """(n/R, ⌈n/R⌉) per class at decode batch B, shape batch.shape + (S,): the share of
        one iteration's prompt room a request's prefill uses, and the iterations it spans
        (inf where the decodes fill the budget)."""
        room = self.room_tokens(batch)[..., None]
        n = np.expand_dims(self.chunk_share * self.budget_tokens, -2)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(room > 0, n / np.where(room > 0, room, 1.0), np.inf)
        return share, np.where(np.isfinite(share), np.maximum(np.ceil(share - ROUNDING_MARGIN), 1.0), np.inf)


@dataclass(frozen=True)
class ColocatedDecode:
    """Decode on a colocated replica at a batch (arrays over candidates × batches)."""

    rate_per_s: Arr  # requests/s the batch corresponds to (Little's law)
    itl_mean_s: Arr
    itl_quantile_s: Arr  # at the requested percentile, chunk stalls included
    itl_worst_s: Arr  # the longest chunk's stall
    prefill_share: Arr  # ρ_p: share of time on prefill chunks
    chunk_share: Arr  # f: share of the iterations' prompt room in use (prefill keeps up while < 1)
    residual_s: Arr  # mean remaining time of the iteration an arrival lands in: E[T²] / (2 E[T])
    launch_share: Arr | float = 1.0  # a prompt's share of the launches of the iterations it rides


def colocated_decode(sv: ServiceTimes, *, batch: ArrayLike, itl_percentile: float,
                     closed_loop: bool = False) -> ColocatedDecode:
    """ITL (mean and percentile) and the rate a decode batch B implies on a colocated
    replica: ITL = c/τ + B'·E[P]/E[o] with B' = B (open arrivals) or B − 1 (a closed
    loop: only the others' prompts interrupt a decoding sequence)."""
    b = _f(batch)
    tau = sv.tokens_per_pass
    eo = sv.mean_output_tokens
    room = sv.room_tokens(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ek = np.where(room > 0, sv.mean_new_tokens / np.where(room > 0, room, 1.0), np.inf)
    others = np.maximum(b - 1.0, 0.0) if closed_loop else b
    work = np.sum(sv.weights * sv.prefill_work_s, axis=-1, keepdims=True)
    # A prompt's share of the launches of the iterations it rides: the prompts arriving in one
    # cycle (Poisson, x = λ·c of them on average) share the next iteration, so a prompt pays
    # (1 − e^(−x))/x of its launches, and never less than its share n/R of the budget.
    x = others * sv.cycle_s / (eo * (sv.cycle_s / tau + others * work / eo))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        alone = np.where(x > 1e-9, -np.expm1(-x) / np.where(x > 1e-9, x, 1.0), 1.0)
    launch_share = np.minimum(np.maximum(alone, np.where(np.isfinite(ek), ek, 0.0)), 1.0)
    ep = work + sv.launch_s * launch_share
    itl = sv.cycle_s / tau + others * ep / eo
    rate = b / (eo * itl)
    lam_others = others / (eo * itl)
    rho_p = lam_others * ep
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where((rho_p < 1) & np.isfinite(ek), lam_others * ek * sv.cycle_s / (1.0 - rho_p), np.inf)
        f = np.where(lam_others > 0, f, 0.0)
    stall = stall_quantile(itl_percentile, share=np.broadcast_to(f, np.broadcast_shapes(f.shape, itl.shape)),
                           stalls_s=sv.stall_s, weights=sv.stall_weights)
    worst = np.max(sv.stall_s, axis=-1, keepdims=True)
    sw = np.broadcast_to(sv.stall_weights, sv.stall_s.shape)
    x1 = np.sum(sw * sv.stall_s, axis=-1, keepdims=True)
    x2 = np.sum(sw * sv.stall_s * sv.stall_s, axis=-1, keepdims=True)
    fc = np.clip(f, 0.0, 1.0)
    cyc = sv.cycle_s
    t1 = cyc + fc * x1
    t2 = cyc * cyc + fc * (2.0 * cyc * x1 + x2)
    return ColocatedDecode(rate_per_s=rate, itl_mean_s=itl, itl_quantile_s=(sv.cycle_s + stall) / tau,
                           itl_worst_s=(sv.cycle_s + worst) / tau, prefill_share=rho_p, chunk_share=f,
                           residual_s=t2 / (2.0 * t1), launch_share=launch_share)


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


def batch_at_rate(rate_per_s: ArrayLike, *, batches: ArrayLike, rates_per_s: ArrayLike) -> Arr:
    """The batch whose Little's-law rate is ``rate_per_s``, interpolated per
    candidate row on a grid of batches (``batches``, 1-D) and the rates they
    imply (``rates_per_s``, (C, B), rising along the grid); beyond the grid's
    last rate, the last batch (saturated).  ``rate_per_s`` is (C, Q)."""
    grid = _f(batches)
    r = np.maximum.accumulate(np.atleast_2d(_f(rates_per_s)), axis=-1)
    lam = np.atleast_2d(_f(rate_per_s))
    lam = np.broadcast_to(lam, (r.shape[0], lam.shape[-1]))
    out = np.empty(lam.shape)
    for i in range(lam.shape[0]):
        out[i] = np.interp(lam[i], r[i], grid)
    return out


def rate_at_concurrency(concurrency: float, e2e_at_rate: Callable[[float], float], *, upper_per_s: float) -> float:
    """Closed loop: the throughput X with N = X × E2E(X), by bisection on (0, upper)."""
    lo, hi = 0.0, upper_per_s
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid * e2e_at_rate(mid) < concurrency:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
