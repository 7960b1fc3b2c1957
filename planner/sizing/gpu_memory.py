"""One GPU's memory per candidate layout: weights, the activation peak, the KV budget
and KV bytes/token, with the speculative drafter's share (planner.physics.memory,
planner.physics.draft).  The operating point sizes the batch with these numbers and the
Plan's memory section derives them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.draft import draft_memory
from planner.physics.layout import attention_tp
from planner.physics.memory import (
    activation_peak_bytes,
    activation_profile_tokens,
    kv_budget_bytes,
    kv_bytes_per_token_per_gpu,
    weight_bytes_per_gpu,
)
from planner.spec.catalog import get_model
from planner.spec.context import Resolved

__all__ = ["ReplicaMemory", "replica_memory", "scenario_draft"]

Arr = NDArray[np.float64]


@dataclass(frozen=True)
class ReplicaMemory:
    """One GPU's memory per candidate layout (shape (C, 1); floats for one scalar
    layout): computed once here for the operating point and the Plan's memory
    section, whose derivations substitute these same values."""

    weight_bytes_per_gpu: Arr
    activation_bytes: Arr  # the engine's profile-run peak (0 with the seeds' accounting)
    kv_budget_bytes: Arr  # net of the drafter's weights (speculation: planner.physics.draft)
    kv_bytes_per_token_per_gpu: Arr  # the target's
    draft_weight_bytes_per_gpu: Arr  # speculation's drafter (0: off)
    draft_kv_bytes_per_token_per_gpu: Arr

    @property
    def cache_bytes_per_token_per_gpu(self) -> Arr:
        """KV bytes per token the engine's pool holds: target + drafter."""
        return np.asarray(self.kv_bytes_per_token_per_gpu) + np.asarray(self.draft_kv_bytes_per_token_per_gpu)


def scenario_draft(r: Resolved, *, tp: ArrayLike) -> tuple[Arr, Arr]:
    """(draft weight bytes per GPU, draft KV bytes/token per GPU) per layout (zeros: speculation off)."""
    s = r.scenario
    sp = s.speculative
    tp_a = np.asarray(tp, float)
    if sp.draft_tokens <= 0:
        return np.zeros_like(tp_a), np.zeros_like(tp_a)
    draft = get_model(sp.draft_model) if sp.draft_model is not None else None
    rows = {int(t): draft_memory(target=r.model, draft=draft, draft_tokens=sp.draft_tokens,
                                 draft_layers=sp.draft_layers, weights_dtype=sp.draft_weights_dtype or s.weights_dtype,
                                 kv_dtype=s.kv_dtype, tp=int(t), method=sp.method) for t in np.unique(tp_a)}
    w = np.vectorize(lambda t: rows[int(t)].weight_bytes_per_gpu, otypes=[float])(tp_a)
    k = np.vectorize(lambda t: rows[int(t)].kv_bytes_per_token_per_gpu, otypes=[float])(tp_a)
    return w, k


def replica_memory(r: Resolved, *, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike,
                   dp_attention: ArrayLike | None = None, context_tokens: ArrayLike | None = None) -> ReplicaMemory:
    """Weights, activation peak, KV budget and KV bytes/token on one GPU of each layout
    (``dp_attention`` None: the scenario's).  KV bytes/token per GPU follow the attention
    shards: TP heads over TP GPUs (MLA's latent on every GPU), whole KV with
    data-parallel attention (each rank its own sequences).  ``context_tokens``: the
    capacity context, at which a model with windowed layers has its KV/token (the
    ledger's KV per sequence / context; planner.physics.kvledger)."""
    s, model = r.scenario, r.model
    dp = s.parallel.dp_attention if dp_attention is None else dp_attention
    wg = np.asarray(weight_bytes_per_gpu(model=model, weights_dtype=s.weights_dtype, tp=tp, pp=pp, ep=ep,
                                         dp_attention=dp, redundant_experts=s.parallel.redundant_experts))
    util = s.serving.memory_utilization
    act = np.asarray(activation_peak_bytes(model=model, tp=tp, batched_tokens=activation_profile_tokens(
        s.serving.chunk_tokens)) if util else 0.0)
    budget = np.asarray(kv_budget_bytes(gpu=r.gpu, weight_bytes_per_gpu=wg, reserved_bytes=s.serving.reserved_bytes,
                                        memory_utilization=util, activation_bytes=act, engine=s.serving.engine))
    kg = np.asarray(kv_bytes_per_token_per_gpu(model=model, kv_dtype=s.kv_dtype, tp=attention_tp(tp, dp), pp=pp,
                                               context_tokens=context_tokens))
    dw, dk = scenario_draft(r, tp=tp)
    if s.speculative.draft_tokens > 0:
        budget = np.maximum(budget - dw, 0.0)
    return ReplicaMemory(weight_bytes_per_gpu=wg, activation_bytes=act, kv_budget_bytes=budget,
                         kv_bytes_per_token_per_gpu=kg, draft_weight_bytes_per_gpu=dw,
                         draft_kv_bytes_per_token_per_gpu=dk)
