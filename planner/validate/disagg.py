"""A disaggregated benchmark run under its client load: P prefill workers and D decode
workers, each with its own layout, a closed loop of N users over the whole deployment
(InferenceX's Dynamo runs).

It uses the planner's disaggregated model (:func:`planner.sizing.modes.disaggregated_load`)
piece by piece, at a stated worker count instead of a sized one:

* prefill pool: a worker's pass carries up to ``serving.chunk_tokens`` prompt tokens a
  rank, so at most k = ⌊T/n⌋ prompts of n tokens on each attention-DP rank share it (a
  longer prompt runs alone in ⌈n/T⌉ chunks); it carries the prompts that arrived during
  the last pass (:func:`prefill_batch`: one at a trickle, full passes near capacity), and
  a prompt waits for the pass in progress (half of it, when busy), then its own pass;
  beyond capacity the P workers queue as one M/G/c pool (``ttft_pool``, service per
  prompt = full pass / capacity); pipelined over PP;
* KV transfer: each prefill GPU ships its shard of the prompt's KV over its link
  (NVLink when both pools sit in one scale-up domain, else the NIC), layer by layer,
  only the tail exposed (:func:`planner.physics.link.kv_transfer_exposed_s`), plus the
  hand-off's fixed setup (:func:`planner.spec.context.kv_transfer_setup_s`), and the decode
  worker's take-in, k of its iterations at its batch (:func:`planner.physics.handoff.decode_admission_s`);
* decode pool: D workers with no prompt chunks in their iterations, ITL = cycle / τ at
  the decode batch b; the pool completes X_d(b) = D·b / ((o − 1)·ITL(b)) requests/s;
* closed loop: N = X·(TTFT(X) + (o − 1)·ITL(b)) at X = X_d(b), solved on the batch grid;
  users beyond what the grid holds queue (TTFT += N/X − E2E).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.handoff import decode_admission_s
from planner.physics.link import DEFAULT_KV_LINK_EFFICIENCY, kv_link_bytes_per_s, kv_transfer_exposed_s
from planner.physics.memory import kv_bytes_per_token_per_gpu
from planner.physics.queueing import ROUNDING_MARGIN, pipelined_prefill, ttft_pool
from planner.physics.speculative import drafter_for
from planner.physics.step import decode_cycle, prefill_chunks, prefill_step
from planner.physics.techniques import kv_transfer_s
from planner.sizing.load import LoadPoint
from planner.spec.context import Resolved, kv_transfer_setup_s

Arr = NDArray[np.float64]

__all__ = ["disaggregated_point", "dp_prefill_pass", "prefill_batch", "prefill_capacity", "prefill_pass",
           "prefill_service"]


def dp_prefill_pass(work_s: ArrayLike, prompts: ArrayLike, *, ranks: ArrayLike,
                    expert_share: ArrayLike) -> tuple[Arr, Arr]:
    """(pass time, prompts it serves) when R attention-DP ranks each prefill their own
    prompts at once: each rank's attention runs on its own GPU in parallel, the expert
    GEMMs and the collectives of the group carry R ranks' tokens (their share of a one-rank
    pass, R times):

        t_R = t_1 × (1 + (R − 1) × expert_share),   prompts_R = R × prompts_1

    R = 1 (no DP attention, or one rank with prompts): the one-rank pass unchanged.  (Scaling
    the expert GEMMs alone, each rank's all-to-all running over its own links in parallel, was
    cross-validated and lost: README "How accurate is it on MoE?".)"""
    r = np.maximum(np.asarray(ranks, float), 1.0)
    share = np.clip(np.asarray(expert_share, float), 0.0, 1.0)
    return np.asarray(work_s, float) * (1.0 + (r - 1.0) * share), np.asarray(prompts, float) * r


def prefill_capacity(r: Resolved, *, prompt: float) -> float:
    """The most prompts of ``prompt`` tokens one prefill worker's pass carries: k = ⌊T/n⌋ per
    rank (1 for a prompt of the budget T or longer, which runs in chunks) × its attention-DP
    ranks."""
    chunk = float(r.scenario.serving.chunk_tokens)
    k = max(1.0, math.floor(chunk / prompt)) if prompt < chunk else 1.0
    return k * float(r.scenario.parallel.attention_dp)


def prefill_pass(r: Resolved, *, prompt: float, prompts: ArrayLike) -> tuple[Arr, Arr]:
    """(server time, own latency) of one prefill worker's pass carrying ``prompts`` prompts of
    ``prompt`` tokens (at most :func:`prefill_capacity`; fractions interpolate): m prompts
    spread over min(m, R) attention-DP ranks, m / min(m, R) on each, sharing the rank's pass
    (each attending only to its own tokens); a prompt of the budget T or longer alone, in
    ⌈n/T⌉ chunks; the busy ranks' expert and collective parts add up (:func:`dp_prefill_pass`);
    pipelined over PP."""
    s = r.scenario
    chunk = float(s.serving.chunk_tokens)
    kw = r.step_kwargs()
    m = np.clip(np.asarray(prompts, float), 1.0, prefill_capacity(r, prompt=prompt))
    busy = np.minimum(m, float(s.parallel.attention_dp))
    if prompt < chunk:
        q = m / busy
        one = prefill_step(tokens=q * prompt, sequences=q, **kw)
        work, iterations = np.asarray(one.time_s, float), 1.0
    else:
        one = prefill_step(tokens=chunk, **kw)
        pc = prefill_chunks(new_tokens=[prompt], cached_tokens=[0.0], chunk_tokens=int(chunk), **kw)
        work, iterations = np.full(m.shape, float(pc.total_s[0])), float(pc.counts[0])
    share = (np.asarray(one.expert_s, float) + np.asarray(one.comm_s, float)) / np.asarray(one.time_s, float)
    work, _ = dp_prefill_pass(work, m, ranks=busy, expert_share=share)
    srv, own = pipelined_prefill(prefill_s=work, stages=s.parallel.pp, microbatches=iterations)
    return np.asarray(srv, float), np.asarray(own, float)


def prefill_service(r: Resolved, *, prompt: float) -> tuple[float, float]:
    """(server time per prompt, own latency) of one prefill worker with full passes
    (:func:`prefill_capacity` prompts each): its capacity."""
    cap = prefill_capacity(r, prompt=prompt)
    srv, own = prefill_pass(r, prompt=prompt, prompts=cap)
    return float(srv) / cap, float(own)


PASS_GRID_POINTS = 24  # prompts-per-pass points the batch a load forms is interpolated on
PASS_FIXED_POINT_ITERATIONS = 60


def prefill_batch(*, arrival_per_s: ArrayLike, workers: float, prompts: Arr, pass_s: Arr) -> Arr:
    """Prompts per pass of a prefill worker at ``arrival_per_s`` (the pool's): the prompts
    that arrive during one pass ride the next, m = λ/P × t(m), at least 1 and at most the
    worker's capacity (the last of ``prompts``; ``pass_s``: the pass's server time at each):
    the least fixed point, iterated from m = 1."""
    lam = np.asarray(arrival_per_s, float) / max(float(workers), 1.0)
    lo, hi = float(prompts[0]), float(prompts[-1])
    m = np.full(lam.shape, lo)
    for _ in range(PASS_FIXED_POINT_ITERATIONS):
        nxt = np.clip(lam * np.interp(m, prompts, pass_s), lo, hi)
        if np.allclose(nxt, m, rtol=1e-6, atol=0.0):
            break
        m = nxt
    return m


def disaggregated_point(prefill: Resolved, decode: Resolved, *, prompt_tokens: float, output_tokens: float,
                        users: float, prefill_workers: int, decode_workers: int, max_batch: int,
                        link: str) -> LoadPoint:
    """The deployment's state under ``users`` closed-loop clients (``LoadPoint`` with
    ``replicas`` = 1: the whole deployment; ``batch_size`` per decode worker)."""
    n, o = float(prompt_tokens), max(float(output_tokens), 2.0)
    cap = prefill_capacity(prefill, prompt=n)
    per_pass = np.unique(np.concatenate([np.geomspace(1.0, cap, PASS_GRID_POINTS), [cap]]))
    pass_srv, pass_own = prefill_pass(prefill, prompt=n, prompts=per_pass)
    ps = prefill.scenario
    bw = kv_link_bytes_per_s(prefill.gpu, link=link, link_bytes_per_s=ps.fleet.link_bytes_per_s)
    kv_gpu = float(np.asarray(kv_bytes_per_token_per_gpu(model=prefill.model, kv_dtype=ps.kv_dtype,
                                                          tp=ps.parallel.tp, pp=ps.parallel.pp)))
    t_full = float(np.asarray(kv_transfer_s(kv_bytes=n * kv_gpu, link_bytes_per_s=bw,
                                            efficiency=DEFAULT_KV_LINK_EFFICIENCY)))
    # decode batches per worker: below one too (a few users spend much of their cycle in prefill)
    # (every batch up to 64, then geometric steps of ~3%: the curves are smooth there)
    top = float(max(1, max_batch))
    grid = np.unique(np.concatenate([np.arange(1.0, 16.0) / 16.0, np.arange(1.0, min(top, 64.0) + 1.0),
                                     np.round(np.geomspace(min(top, 64.0), top, 160))]))
    ds = decode.scenario
    sp = ds.speculative
    cyc = decode_cycle(batch_size=grid, context_tokens=n + o / 2.0, draft_tokens=sp.draft_tokens,
                       drafter=drafter_for(sp, decode.model, decode.scenario.serving.engine), **decode.step_kwargs())
    cycle = np.asarray(cyc.cycle_s, float)
    itl = cycle / cyc.tokens_per_pass
    rate = decode_workers * grid / ((o - 1.0) * itl)  # requests/s the decode pool completes at batch b
    # prefill: the prompts arriving during a pass ride the next (one alone at a trickle, full
    # passes near capacity); a prompt waits for the pass in progress (half of it, when busy),
    # its own pass, the exposed transfer with the hand-off's setup, and beyond capacity the
    # pool's queue (M/G/c at the full pass's time per prompt)
    m = prefill_batch(arrival_per_s=rate, workers=prefill_workers, prompts=per_pass, pass_s=pass_srv)
    srv_m, own_m = np.interp(m, per_pass, pass_srv), np.interp(m, per_pass, pass_own)
    busy = np.minimum(rate / max(float(prefill_workers), 1.0) * srv_m / m, 1.0)
    t_exp = np.asarray(kv_transfer_exposed_s(transfer_s=t_full, prefill_s=own_m, layers=prefill.model.layers,
                                             setup_s=kv_transfer_setup_s(ps)), float)
    pool = ttft_pool(arrival_per_s=rate, servers=float(prefill_workers), server_s=np.array([pass_srv[-1] / cap]),
                     own_s=(own_m + t_exp)[:, None], weights=np.ones(1))
    # and the decode worker's take-in: k of its iterations at batch b after the KV arrives
    ttft = np.asarray(pool.mean_s, float) + busy * srv_m / 2.0 + np.asarray(decode_admission_s(cycle), float)
    e2e = ttft + (o - 1.0) * itl
    held = rate * e2e  # users in the system at each decode batch
    ok = np.isfinite(held)
    last = max(int(np.argmin(ok)) if not ok.all() else held.size, 1)
    xs = np.maximum.accumulate(held[:last])

    def at(v: np.ndarray) -> float:
        return float(np.interp(users, xs, v[:last]))

    extra, saturated = 0.0, False
    if users > xs[-1] * (1.0 + ROUNDING_MARGIN):
        x = at(rate)
        extra, saturated = (users / x - at(e2e) if x > 0 else math.inf), True
    else:
        x = users / at(e2e)  # Little's law at the interpolated state: N = X × E2E
    return LoadPoint(load="concurrency", replicas=1, max_batch=max_batch, batch_size=at(grid), saturated=saturated,
                     step_s=at(cycle), prefill_s=at(own_m + t_exp), itl_s=at(itl), itl_p50_s=at(itl),
                     ttft_s=at(ttft) + extra, e2e_s=at(e2e) + extra, output_tok_s_per_replica=x * o)
