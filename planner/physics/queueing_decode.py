"""The replica side of the load model (``planner.physics.queueing``): one replica's
service times, the colocated decode and its ITL, and closed loops.

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

Closed loops (a benchmark at fixed concurrency N): throughput X solves
N = X × E2E(X); streams that start together and stay in step (fixed lengths, the
probe's warm-up) instead prefill N prompts as one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from planner.physics.queueing_numerics import BISECTION_STEPS, ROUNDING_MARGIN, Arr, _f

__all__ = [
    "ColocatedDecode",
    "ServiceTimes",
    "batch_at_rate",
    "colocated_decode",
    "prefill_room_tokens",
    "rate_at_concurrency",
    "stall_quantile",
]


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
    # The hosts' floor on a prompt's first token (planner.physics.prefill.host_floor_s): no sooner than
    # this after the iteration that prefills it starts; the decode's cadence is not held.  (…, 1) per
    # candidate, or one value.
    host_floor_s: Arr | float = 0.0

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
