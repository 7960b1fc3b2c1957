"""The operating point under SLOs, computed on arrays of candidate layouts.

For each candidate (TP, PP, EP) and every decode batch B on a grid, with the
workload's length distribution (weighted samples of prompt n and output o):

* KV fits:     (B/EP)·μ_c·K_gpu + z·√(B/EP)·σ_c·K_gpu ≤ KV budget per GPU, where c = n + o
  is a sequence's final context, weighted by its residence time o (z = 2.326: a
  p99 of the live KV across the batch), so a long tail shows up as fewer sequences.
* decode cycle: one step at B (speculative: verify pass + k·draft_cost·step) and
  ITL = cycle / tokens per pass.
* colocated (chunked prefill, token budget = B decode tokens + one chunk):
  the fraction of iterations carrying a chunk is f = B·E[⌈n/c⌉]·tokens per pass / E[o],
  ITL = (cycle + f·chunk time) / tokens per pass; a prompt's prefill takes
  S = ⌈n/c⌉ × (cycle + chunk time).
* disaggregated: decode ITL = cycle / tokens per pass; a prefill replica serves
  prompts back to back, S = prefill time(n); TTFT adds the KV transfer.
* TTFT queueing: M/G/1 (Pollaczek-Khinchine) at the planned utilization u:
  mean wait W = λ·E[S²] / (2(1 − ρ)), λ = u × capacity, ρ = λ·E[S];
  p90 wait ≈ (W/ρ)·ln(ρ/0.1) (exponential tail with P(wait > 0) = ρ), 0 if ρ ≤ 0.1.
* goodput per replica = B / (E[o] × ITL) requests/s where both SLOs hold.

The largest feasible B is the operating point.  ``plan`` calls this with one
candidate and ``sweep`` with many: one physics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.lengths import LengthSamples, length_samples, weighted_quantile
from planner.physics.memory import (
    activation_peak_bytes,
    activation_profile_tokens,
    kv_budget_bytes,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    weight_bytes_per_gpu,
)
from planner.physics.step import decode_cycle, prefill_step
from planner.physics.techniques import kv_transfer_s
from planner.spec.context import Resolved
from planner.spec.defaults import DEFAULT_MAX_BATCH

__all__ = [
    "KV_TAIL_Z",
    "RDMA_BYTES_PER_S",
    "OperatingArrays",
    "WorkloadStats",
    "mg1_wait_s",
    "operating_arrays",
    "workload_stats",
]

KV_TAIL_Z = 2.326  # one-sided 99% normal quantile
RDMA_BYTES_PER_S = 400e9 / 8  # 400 Gb/s NIC per GPU (seeds 001)
Arr = NDArray[np.float64]


@dataclass(frozen=True)
class WorkloadStats:
    """The moments of the length distribution the operating point needs."""

    samples: LengthSamples
    cached_tokens: float
    mean_prompt: float
    mean_output: float
    capacity_context_mean: float  # residence-weighted E[n + o]
    capacity_context_std: float
    live_context: float  # residence-weighted E[n + o/2]: the KV a decode step reads
    p90_prompt: float


def workload_stats(r: Resolved) -> WorkloadStats:
    w = r.scenario.workload
    smp = length_samples(distribution=w.distribution, prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens,
                         prompt_sigma=w.prompt_sigma, output_sigma=w.output_sigma, trace=w.trace)
    eo = smp.mean_output
    tw = smp.weight * smp.output / eo  # residence-time weights
    cap = smp.prompt + smp.output
    mu = float(np.sum(tw * cap))
    sd = float(math.sqrt(max(float(np.sum(tw * cap * cap)) - mu * mu, 0.0)))
    live = float(np.sum(tw * (smp.prompt + smp.output / 2.0)))
    ctx = r.scenario.serving.context_tokens
    if ctx is not None:
        mu, sd, live = float(ctx), 0.0, float(ctx)
    return WorkloadStats(
        samples=smp, cached_tokens=w.prefix_tokens * w.prefix_hit_rate, mean_prompt=smp.mean_prompt,
        mean_output=eo, capacity_context_mean=mu, capacity_context_std=sd, live_context=live,
        p90_prompt=weighted_quantile(smp.prompt, smp.weight, 0.9),
    )


def mg1_wait_s(*, arrival_per_s: ArrayLike, mean_s: ArrayLike, second_moment_s2: ArrayLike) -> tuple[Arr, Arr, Arr]:
    """(mean wait, p90 wait, ρ) of an M/G/1 queue; inf where ρ ≥ 1."""
    lam = np.asarray(arrival_per_s, float)
    rho = lam * np.asarray(mean_s, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(rho < 1, lam * np.asarray(second_moment_s2, float) / (2.0 * (1.0 - rho)), np.inf)
        p90 = np.where(rho > 0.1, (w / np.where(rho > 0, rho, 1.0)) * np.log(np.maximum(rho, 0.1) / 0.1), 0.0)
    return w, np.where(rho < 1, p90, np.inf), rho


@dataclass(frozen=True)
class OperatingArrays:
    """One entry per candidate (arrays of shape (C,))."""

    mode: str
    batch_size: NDArray[np.int64]
    feasible: NDArray[np.bool_]
    reason: NDArray[np.object_]
    max_sequences: Arr
    step_s: Arr
    itl_s: Arr
    itl_worst_s: Arr
    ttft_s: Arr  # = ttft_wait_s + prefill_service_s (+ kv_transfer_s, disaggregated)
    ttft_p90_s: Arr
    ttft_wait_s: Arr  # mean queueing wait before the prefill starts
    prefill_service_s: Arr  # mean prefill service time (colocated: its chunked iterations)
    goodput_req_s_per_replica: Arr  # decode replicas in disaggregated mode
    prefill_req_s_per_replica: Arr  # prefill replicas (colocated: same as goodput)
    tok_s_per_replica: Arr
    kv_transfer_s: Arr
    prefill_utilization: Arr
    weight_bytes_per_gpu: Arr
    kv_budget_bytes: Arr
    gpus_per_replica: Arr


def operating_arrays(
    r: Resolved, *, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike, mode: str, stats: WorkloadStats | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
) -> OperatingArrays:
    """Operating points for candidate layouts (tp, pp, ep arrays of equal shape)."""
    s = r.scenario
    st = stats or workload_stats(r)
    tp_c = np.asarray(tp, float).reshape(-1, 1)
    pp_c = np.asarray(pp, float).reshape(-1, 1)
    ep_c = np.asarray(ep, float).reshape(-1, 1)
    fixed = s.serving.batch_size
    grid = np.array([float(fixed)]) if fixed is not None else np.arange(1.0, max_batch + 1.0)
    b = grid.reshape(1, -1)
    kw = r.step_kwargs(tp=tp_c, pp=pp_c, ep=ep_c)
    model, gpu = r.model, r.gpu
    u = s.fleet.target_utilization
    slo = s.slo

    # Memory.
    wg = np.asarray(weight_bytes_per_gpu(model=model, weights_dtype=s.weights_dtype, tp=tp_c, pp=pp_c, ep=ep_c))
    util = s.serving.memory_utilization
    act = activation_peak_bytes(model=model, batched_tokens=activation_profile_tokens(s.serving.chunk_tokens), tp=tp_c) if util else 0.0
    budget = np.asarray(kv_budget_bytes(gpu=gpu, weight_bytes_per_gpu=wg, reserved_bytes=s.serving.reserved_bytes,
                                        memory_utilization=util, activation_bytes=act))
    kg = np.asarray(kv_bytes_per_token_per_gpu(model=model, kv_dtype=s.kv_dtype, tp=tp_c, pp=pp_c))
    mu, sd = st.capacity_context_mean, st.capacity_context_std
    x = b / ep_c
    kv_ok = (x * mu * kg + KV_TAIL_Z * np.sqrt(x) * sd * kg <= budget) & (budget > 0)
    cap = budget / kg
    sq = (-KV_TAIL_Z * sd + np.sqrt((KV_TAIL_Z * sd) ** 2 + 4.0 * mu * cap)) / (2.0 * mu)
    max_seq = (sq * sq * ep_c)[:, 0]

    # Decode cycle.
    sp = s.speculative
    cyc = decode_cycle(batch_size=b, context_tokens=st.live_context, draft_tokens=sp.draft_tokens,
                       acceptance=sp.acceptance, draft_cost=sp.draft_cost, **kw)
    step = np.asarray(cyc.step.step_s)
    tpp, cycle = cyc.tokens_per_pass, np.asarray(cyc.cycle_s)
    eo = st.mean_output
    smp = st.samples
    n_new = np.maximum(smp.prompt - st.cached_tokens, 1.0)
    k_tok = kv_bytes_per_token(model, s.kv_dtype)

    if mode == "colocated":
        c = s.serving.chunk_tokens
        chunk = np.asarray(prefill_step(tokens=min(c, st.mean_prompt), **kw).time_s)
        chunks = np.ceil(n_new / c)
        e_ch = float(np.sum(smp.weight * chunks))
        e_ch2 = float(np.sum(smp.weight * chunks * chunks))
        ch90 = weighted_quantile(chunks, smp.weight, 0.9)
        f = b * e_ch * tpp / eo
        iteration = cycle + np.minimum(f, 1.0) * chunk
        itl = iteration / tpp
        itl_worst = (cycle + chunk) / tpp
        goodput = b / (eo * itl)
        it_c = cycle + chunk
        w_mean, w90, rho = mg1_wait_s(arrival_per_s=u * goodput, mean_s=e_ch * it_c, second_moment_s2=e_ch2 * it_c * it_c)
        service = e_ch * it_c
        ttft = w_mean + service
        ttft90 = w90 + ch90 * it_c
        prefill_ok = (f <= 1.0) & (rho < 1.0)
        prefill_rate = goodput
        transfer = np.zeros_like(goodput)
    else:
        itl = cycle / tpp
        itl_worst = itl
        goodput = b / (eo * itl)
        pre = np.asarray(prefill_step(tokens=smp.prompt.reshape(1, -1), cached_tokens=st.cached_tokens,
                                      **kw).time_s)
        es = np.sum(smp.weight * pre, axis=1, keepdims=True)
        es2 = np.sum(smp.weight * pre * pre, axis=1, keepdims=True)
        s90 = np.array([[weighted_quantile(row, smp.weight, 0.9)] for row in np.atleast_2d(pre)])
        prefill_rate = np.broadcast_to(1.0 / es, goodput.shape)
        w_mean, w90, rho = mg1_wait_s(arrival_per_s=u / es, mean_s=es, second_moment_s2=es2)
        link = s.fleet.link_bytes_per_s or (
            (gpu.scaleup_bytes_per_s or gpu.pcie_bytes_per_s) if s.fleet.link == "nvlink" else RDMA_BYTES_PER_S)
        t_mean = kv_transfer_s(kv_bytes=st.mean_prompt * k_tok, link_bytes_per_s=link, setup_s=s.fleet.kv_transfer_setup_s)
        t90 = kv_transfer_s(kv_bytes=st.p90_prompt * k_tok, link_bytes_per_s=link, setup_s=s.fleet.kv_transfer_setup_s)
        service = es
        ttft = np.broadcast_to(w_mean + es + t_mean, goodput.shape)
        ttft90 = np.broadcast_to(w90 + s90 + t90, goodput.shape)
        prefill_ok = np.ones_like(goodput, dtype=bool)
        transfer = np.full_like(goodput, float(t_mean))

    itl_ok = itl <= slo.itl_s
    ttft_ok = ttft90 <= slo.ttft_s
    ok = kv_ok & itl_ok & ttft_ok & prefill_ok
    n_c = tp_c.shape[0]
    if fixed is not None:
        idx = np.zeros(n_c, dtype=int)
    else:
        any_ok = ok.any(axis=1)
        last = ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
        idx = np.where(any_ok, last, 0)
    rows = np.arange(n_c)
    feasible = ok[rows, idx]
    reason = np.array([""] * n_c, dtype=object)
    for i in range(n_c):
        j = idx[i]
        if feasible[i]:
            continue
        if budget[i, 0] <= 0 or not kv_ok[i, j]:
            reason[i] = "does not fit" if budget[i, 0] <= 0 or not kv_ok[i, 0] else "KV budget below batch"
        elif not itl_ok[i, j]:
            reason[i] = "misses ITL"
        elif not prefill_ok[i, j]:
            reason[i] = "prefill cannot keep up (raise serving.chunk_tokens)"
        else:
            reason[i] = "misses TTFT"

    def pick(a: Arr) -> Arr:
        return np.broadcast_to(np.asarray(a, float), ok.shape)[rows, idx]

    return OperatingArrays(
        mode=mode,
        batch_size=grid[idx].astype(np.int64),
        feasible=feasible,
        reason=reason,
        max_sequences=max_seq,
        step_s=pick(step),
        itl_s=pick(itl),
        itl_worst_s=pick(itl_worst),
        ttft_s=pick(ttft),
        ttft_p90_s=pick(ttft90),
        ttft_wait_s=pick(w_mean),
        prefill_service_s=pick(service),
        goodput_req_s_per_replica=np.where(feasible, pick(goodput), 0.0),
        prefill_req_s_per_replica=np.where(feasible, pick(prefill_rate), 0.0),
        tok_s_per_replica=grid[idx] / pick(itl),
        kv_transfer_s=pick(transfer),
        prefill_utilization=pick(rho),
        weight_bytes_per_gpu=wg[:, 0],
        kv_budget_bytes=budget[:, 0],
        gpus_per_replica=(tp_c * pp_c * ep_c)[:, 0],
    )
