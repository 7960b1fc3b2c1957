"""A disaggregated benchmark run under its client load: P prefill workers and D decode
workers, each with its own layout, a closed loop of N users over the whole deployment
(InferenceX's Dynamo runs).

It uses the planner's disaggregated model (:func:`planner.sizing.modes.disaggregated_load`)
piece by piece, at a stated worker count instead of a sized one:

* prefill pool: the P workers form one M/G/c queue (``ttft_pool``); a worker's
  iteration carries up to ``serving.chunk_tokens`` prompt tokens, so k = ⌊T/n⌋ prompts
  of n tokens share one pass of k·n tokens (service per prompt = pass / k, its own
  latency the whole pass); a longer prompt runs in ⌈n/T⌉ chunks; pipelined over PP;
* KV transfer: each prefill GPU ships its shard of the prompt's KV over its link
  (NVLink when both pools sit in one scale-up domain, else the NIC), layer by layer,
  only the tail exposed (:func:`planner.physics.link.kv_transfer_exposed_s`);
* decode pool: D workers with no prompt chunks in their iterations, ITL = cycle / τ at
  the decode batch b; the pool completes X_d(b) = D·b / ((o − 1)·ITL(b)) requests/s;
* closed loop: N = X·(TTFT(X) + (o − 1)·ITL(b)) at X = X_d(b), solved on the batch grid;
  users beyond what the grid holds queue (TTFT += N/X − E2E).
"""

from __future__ import annotations

import math

import numpy as np

from planner.physics.link import DEFAULT_KV_LINK_EFFICIENCY, kv_link_bytes_per_s, kv_transfer_exposed_s
from planner.physics.memory import kv_bytes_per_token_per_gpu
from planner.physics.queueing import ROUNDING_MARGIN, pipelined_prefill, ttft_pool
from planner.physics.speculative import drafter_for
from planner.physics.step import decode_cycle, prefill_chunks, prefill_step
from planner.physics.techniques import kv_transfer_s
from planner.sizing.load import LoadPoint
from planner.spec.context import Resolved

__all__ = ["disaggregated_point", "dp_prefill_pass", "prefill_service"]


def dp_prefill_pass(work_s: float, prompts: float, *, ranks: int, expert_share: float) -> tuple[float, float]:
    """(pass time, prompts it serves) when R attention-DP ranks each prefill their own
    prompts at once: each rank's attention runs on its own GPU in parallel, the expert
    GEMMs and the collectives of the group carry R ranks' tokens (their share of a one-rank
    pass, R times):

        t_R = t_1 × (1 + (R − 1) × expert_share),   prompts_R = R × prompts_1

    R = 1 (no DP attention): the one-rank pass unchanged.  (Scaling the expert GEMMs alone,
    each rank's all-to-all running over its own links in parallel, was cross-validated and
    lost: README "How accurate is it on MoE?".)"""
    if ranks <= 1:
        return work_s, prompts
    return work_s * (1.0 + (ranks - 1) * min(max(expert_share, 0.0), 1.0)), prompts * ranks


def prefill_service(r: Resolved, *, prompt: float) -> tuple[float, float]:
    """(server time per prompt, own latency) of one prefill worker: k = ⌊T/n⌋ prompts shorter
    than the token budget T share a pass (each attending only to its own tokens), a longer
    one runs in chunks; R attention-DP ranks fill their passes at once
    (:func:`dp_prefill_pass`); pipelined over PP."""
    s = r.scenario
    chunk = float(s.serving.chunk_tokens)
    kw = r.step_kwargs()
    if prompt < chunk:
        k = max(1.0, math.floor(chunk / prompt))
        one = prefill_step(tokens=k * prompt, sequences=k, **kw)
        work, iterations, per_prompt = float(np.asarray(one.time_s)), 1.0, k
    else:
        one = prefill_step(tokens=chunk, **kw)
        pc = prefill_chunks(new_tokens=[prompt], cached_tokens=[0.0], chunk_tokens=int(chunk), **kw)
        work, iterations, per_prompt = float(pc.total_s[0]), float(pc.counts[0]), 1.0
    work, per_prompt = dp_prefill_pass(work, per_prompt, ranks=s.parallel.attention_dp,
                                       expert_share=float(np.asarray(one.expert_s) + np.asarray(one.comm_s))
                                       / float(np.asarray(one.time_s)))
    srv, own = pipelined_prefill(prefill_s=work, stages=s.parallel.pp, microbatches=iterations)
    return float(srv) / per_prompt, float(own)


def disaggregated_point(prefill: Resolved, decode: Resolved, *, prompt_tokens: float, output_tokens: float,
                        users: float, prefill_workers: int, decode_workers: int, max_batch: int,
                        link: str) -> LoadPoint:
    """The deployment's state under ``users`` closed-loop clients (``LoadPoint`` with
    ``replicas`` = 1: the whole deployment; ``batch_size`` per decode worker)."""
    n, o = float(prompt_tokens), max(float(output_tokens), 2.0)
    srv, own = prefill_service(prefill, prompt=n)
    ps = prefill.scenario
    bw = kv_link_bytes_per_s(prefill.gpu, link=link, link_bytes_per_s=ps.fleet.link_bytes_per_s)
    kv_gpu = float(np.asarray(kv_bytes_per_token_per_gpu(model=prefill.model, kv_dtype=ps.kv_dtype,
                                                          tp=ps.parallel.tp, pp=ps.parallel.pp)))
    t_full = float(np.asarray(kv_transfer_s(kv_bytes=n * kv_gpu, link_bytes_per_s=bw,
                                            efficiency=DEFAULT_KV_LINK_EFFICIENCY)))
    t_exp = float(np.asarray(kv_transfer_exposed_s(transfer_s=t_full, prefill_s=own, layers=prefill.model.layers,
                                                   setup_s=ps.fleet.kv_transfer_setup_s)))
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
    pool = ttft_pool(arrival_per_s=rate, servers=float(prefill_workers), server_s=np.array([srv]),
                     own_s=np.array([own + t_exp]), weights=np.ones(1))
    ttft = np.asarray(pool.mean_s, float)
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
                     step_s=at(cycle), prefill_s=own + t_exp, itl_s=at(itl), itl_p50_s=at(itl),
                     ttft_s=at(ttft) + extra, e2e_s=at(e2e) + extra, output_tok_s_per_replica=x * o)
