"""One replica under a given load, through the load model (``physics.queueing``):
the prediction ``validate`` makes for a published benchmark row and the probe
makes for a measured load level.  ``plan`` and ``sweep`` reach the same model
through ``sizing.operating``.

Fixed prompt n and output o tokens.  Loads:

* ``request_rate`` λ (open loop, Poisson): the decode batch solves Little's law
  B = λ·E[o]·ITL(B) on the batch grid; beyond the grid's last rate the replica
  saturates at the engine's batch cap.  Each iteration's token budget T
  (``serving.chunk_tokens``) holds the B decodes, then R = T − B prompt tokens
  (several short prompts, or a chunk of a long one): TTFT = M/G/1 wait on the
  prompt room (a prompt occupies it for c·n/R + P(n)) + its own ⌈n/R⌉·c + P(n).
* ``concurrency`` N (closed loop): the throughput X solves N = X·E2E(X); a
  decoding sequence is interrupted by the N − 1 others' prompts; N beyond the
  batch cap queue: TTFT += N/X − E2E.
* ``max_throughput`` (offline): a closed loop at the batch cap.
* ``synchronized`` concurrency (streams that start together and stay in step,
  the probe's warm-up with fixed lengths): the N prompts prefill as one batch
  (TTFT = prefill of N·n tokens) and decode together at batch N.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner.physics.layout import attention_dp
from planner.physics.prefill import host_floor_s
from planner.physics.queueing import (
    ROUNDING_MARGIN,
    ServiceTimes,
    balance_busy,
    balance_wait_cycles,
    colocated_decode,
    mgc_wait,
    recv_wait_cycles,
)
from planner.physics.speculative import drafter_for
from planner.physics.step import decode_cycle, prefill_chunks, prefill_step
from planner.spec.context import Resolved

__all__ = ["LoadKind", "LoadPoint", "replica_load"]

LoadKind = Literal["max_throughput", "concurrency", "request_rate", "synchronized"]


class LoadPoint(BaseModel):
    """One replica's state at a load (SI units): the operating point a
    measurement is predicted at."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    load: str
    replicas: int
    max_batch: int
    batch_size: float
    saturated: bool
    step_s: float  # decode cycle at the batch
    prefill_s: float  # the prompt's own chunked prefill latency (no wait)
    itl_s: float  # mean inter-token latency, chunk stalls included
    itl_p50_s: float  # median inter-token gap
    ttft_s: float  # mean, queueing included
    e2e_s: float
    output_tok_s_per_replica: float


def _grid_state(r: Resolved, *, prompt: float, output: float, max_batch: int, closed: bool
                ) -> dict[str, np.ndarray]:
    """Every load-model quantity at each decode batch 1..max_batch (the rate a
    batch implies, by Little's law, and the TTFT queue at that rate)."""
    grid = np.arange(1.0, max_batch + 1.0)
    kw = r.step_kwargs()
    sp = r.scenario.speculative
    cyc = decode_cycle(batch_size=grid, context_tokens=prompt + output / 2.0, draft_tokens=sp.draft_tokens,
                       drafter=drafter_for(sp, r.model, r.scenario.serving.engine), **kw)
    chunk = r.scenario.serving.chunk_tokens
    pc = prefill_chunks(new_tokens=[prompt], cached_tokens=[0.0], chunk_tokens=chunk, **kw)
    cycle = np.atleast_2d(np.asarray(cyc.cycle_s, float))
    sv = ServiceTimes(
        cycle_s=cycle, tokens_per_pass=cyc.tokens_per_pass, mean_output_tokens=output, weights=np.ones(1),
        prefill_work_s=np.atleast_2d(pc.marginal_total_s - pc.counts * pc.launch_s),
        prefill_iterations=np.atleast_2d(pc.counts),
        chunk_share=np.array([[prompt / chunk]]), stall_s=np.atleast_2d(pc.marginal_s[0][pc.mask[0]]),
        stall_weights=np.full(int(pc.counts[0]), 1.0 / pc.counts[0]), budget_tokens=float(chunk),
        decode_tokens=float(sp.draft_tokens + 1), launch_s=float(pc.launch_s),
        host_floor_s=float(host_floor_s(r.model, tp=r.scenario.parallel.tp, pp=r.scenario.parallel.pp)))
    dec = colocated_decode(sv, batch=grid.reshape(1, -1), itl_percentile=0.5, closed_loop=closed)
    rate = np.maximum.accumulate(dec.rate_per_s[0])
    share, iters = sv.prompt_share(grid.reshape(1, -1))  # (1, B, 1): the prompt room one prompt uses, its iterations
    work = float(sv.prefill_work_s[0, 0])
    server = cycle[0] * share[0, :, 0] + work + sv.launch_s * np.asarray(dec.launch_share)[0]
    own_gpu = (cycle[0] + sv.launch_s) * iters[0, :, 0] + work  # its own iterations
    # its first token no sooner than the hosts' floor after they begin (host_floor_s); the decode goes on
    held = np.maximum(float(np.max(sv.host_floor_s)) - own_gpu, 0.0)
    own = own_gpu + held
    wait = mgc_wait(arrival_per_s=rate, servers=1, mean_s=server, second_moment_s2=server * server).mean_s
    ttft = wait + own + dec.residual_s[0]  # and the iteration in progress at arrival
    k = r.scenario.serving.scheduler_recv_interval
    if k > 1:
        # SGLang's receive interval: the decode passes before the scheduler takes the request in, when
        # it arrives to a decoding replica (closed loop: the others' sequences, from two users on;
        # open loop: with probability 1 − e^(−batch)); an idle replica takes it at once.
        busy = np.clip(grid - 1.0, 0.0, 1.0) if closed else -np.expm1(-grid)
        ttft = ttft + recv_wait_cycles(interval=k, arrivals_per_cycle=rate * cycle[0]) * cycle[0] * busy
    tb = r.scenario.serving.attention_dp_balance_iters
    if tb > 0:
        # TensorRT-LLM's attention-DP balance: the passes until every rank holds a prompt, or the timeout,
        # when every rank is decoding (closed loop: the others' sequences fill the R ranks; open loop:
        # balance_busy); a rank without sequences releases the prompts at once.
        ranks = int(attention_dp(r.scenario.parallel.tp, r.scenario.parallel.dp_attention))
        busy = np.clip(grid - ranks, 0.0, 1.0) if closed else balance_busy(ranks=ranks, batch=grid)
        ttft = ttft + balance_wait_cycles(timeout=tb, arrivals_per_cycle=rate * cycle[0], ranks=ranks) * cycle[0] * busy
    # the last token: the decode's own pace from the iteration that sampled the first (the floor holds
    # only the first token's delivery, and the tokens behind it)
    e2e = np.maximum(ttft - held + (output - 1.0) * dec.itl_mean_s[0], ttft)
    return {"batch": grid, "rate": rate, "cycle": cycle[0], "itl": dec.itl_mean_s[0],
            "itl50": dec.itl_quantile_s[0], "ttft": ttft, "own": own, "e2e": e2e}


def _at(state: dict[str, np.ndarray], key: str, value: float) -> dict[str, float]:
    """Every quantity where ``state[key]`` (rising along the grid) equals ``value``,
    interpolated linearly between grid batches (finite part of the grid only)."""
    x = state[key]
    ok = np.isfinite(x) & np.isfinite(state["e2e"])
    last = int(np.argmin(ok)) if not ok.all() else x.size
    last = max(last, 1)
    xs = np.maximum.accumulate(x[:last])
    return {k: float(np.interp(value, xs, v[:last])) for k, v in state.items()}


def _prefill_only(r: Resolved, *, load: LoadKind, prompt: float, max_batch: int, level: float | None,
                  replicas: int) -> LoadPoint:
    """One output token: no decode phase, the replica is a prefill server (its
    chunks run alone).  Open loop: M/G/1; closed loop of N users with no think
    time: each waits for the N prompts ahead of it, TTFT = N × prefill."""
    pc = prefill_chunks(new_tokens=[prompt], cached_tokens=[0.0], chunk_tokens=r.scenario.serving.chunk_tokens,
                        **r.step_kwargs())
    own = float(pc.total_s[0])
    if load == "request_rate":
        lam = float(level or 0.0)
        ttft = float(mgc_wait(arrival_per_s=lam, servers=1, mean_s=own, second_moment_s2=own * own).mean_s) + own
        rate = lam
    else:
        users = float(max_batch if load == "max_throughput" else (level or 1.0))
        ttft = users * own
        rate = users / ttft
    return LoadPoint(load=load, replicas=replicas, max_batch=max_batch, batch_size=0.0,
                     saturated=not np.isfinite(ttft), step_s=0.0, prefill_s=own, itl_s=0.0, itl_p50_s=0.0,
                     ttft_s=ttft, e2e_s=ttft, output_tok_s_per_replica=rate)


def replica_load(
    r: Resolved, *, load: LoadKind, prompt_tokens: float, output_tokens: float, max_batch: int,
    level: float | None = None, replicas: int = 1,
) -> LoadPoint:
    """The replica's state at ``level`` (users for the closed loops, requests/s
    for ``request_rate``; unused at ``max_throughput``)."""
    n, o = float(prompt_tokens), float(output_tokens)
    if load == "synchronized":
        b = float(level or 1.0)
        sp = r.scenario.speculative
        cyc = float(decode_cycle(batch_size=b, context_tokens=n + o / 2.0, draft_tokens=sp.draft_tokens,
                                 drafter=drafter_for(sp, r.model, r.scenario.serving.engine), **r.step_kwargs()).cycle_s)
        ttft = float(prefill_step(tokens=b * n, **r.step_kwargs()).time_s)
        e2e = ttft + (o - 1.0) * cyc
        return LoadPoint(load=load, replicas=replicas, max_batch=max_batch, batch_size=b, saturated=False,
                         step_s=cyc, prefill_s=ttft, itl_s=cyc, itl_p50_s=cyc, ttft_s=ttft, e2e_s=e2e,
                         output_tok_s_per_replica=b * o / e2e)
    if o <= 1.0:
        return _prefill_only(r, load=load, prompt=n, max_batch=max_batch, level=level, replicas=replicas)
    closed = load != "request_rate"
    state = _grid_state(r, prompt=n, output=o, max_batch=max_batch, closed=closed)
    saturated = False
    extra = 0.0
    if load == "request_rate":
        lam = float(level or 0.0)
        top = _at(state, "rate", math.inf)
        if lam >= top["rate"]:
            pt, saturated = top, True
        else:
            pt = _at(state, "rate", lam)
        rate = min(lam, pt["rate"])
    else:
        users = float(max_batch if load == "max_throughput" else (level or 1.0))
        state["users"] = state["rate"] * state["e2e"]  # N = X × E2E at each decode batch
        pt = _at(state, "users", users)
        rate = pt["rate"]
        if users > pt["users"] * (1 + ROUNDING_MARGIN):
            # Users beyond what the batch cap holds wait in the queue: N = X × time in system.
            extra = users / rate - pt["e2e"] if rate > 0 else math.inf
            saturated = True
    return LoadPoint(load=load, replicas=replicas, max_batch=max_batch, batch_size=pt["batch"],
                     saturated=saturated, step_s=pt["cycle"], prefill_s=pt["own"], itl_s=pt["itl"],
                     itl_p50_s=pt["itl50"], ttft_s=pt["ttft"] + extra, e2e_s=pt["e2e"] + extra,
                     output_tok_s_per_replica=rate * o)
