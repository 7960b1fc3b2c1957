"""How a replica's layout divides the work: attention ranks, expert shards, nodes.

GPUs per replica = TP × PP (:class:`planner.spec.parallel.Parallel`).  Within a stage of
TP GPUs:

* attention: TP attention shards every sequence's heads over the TP GPUs (attention
  TP = TP, one attention rank); data-parallel attention (``dp_attention``) gives each
  GPU its own 1/TP of the sequences, heads unsharded (attention TP = 1, TP ranks);
* routed experts: E/EP experts per GPU, each sharded over TP/EP GPUs (plus the
  redundant copies: (E + R)/EP expert slots per GPU);
* nodes per replica = ⌈TP × PP / GPUs per node⌉.

Every function broadcasts over numpy arrays (the sweep's candidate layouts).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.spec.specs import GpuSpec

__all__ = ["attention_dp", "attention_tp", "moe_tp", "nodes_per_replica"]

Arr = NDArray[np.float64]


def _out(x: Arr) -> Arr | float:
    return float(x) if np.ndim(x) == 0 else x


def attention_tp(tp: ArrayLike, dp_attention: ArrayLike) -> Arr | float:
    """GPUs one sequence's attention is sharded over: 1 with data-parallel attention, else TP."""
    return _out(np.where(np.asarray(dp_attention, bool), 1.0, np.asarray(tp, float)))


def attention_dp(tp: ArrayLike, dp_attention: ArrayLike) -> Arr | float:
    """Attention ranks per stage (each with its own sequences and their whole KV): TP
    with data-parallel attention, else 1."""
    return _out(np.where(np.asarray(dp_attention, bool), np.asarray(tp, float), 1.0))


def moe_tp(tp: ArrayLike, ep: ArrayLike) -> Arr | float:
    """GPUs each routed expert is sharded over: TP / EP."""
    return _out(np.asarray(tp, float) / np.asarray(ep, float))


def nodes_per_replica(gpu: GpuSpec, *, tp: ArrayLike, pp: ArrayLike = 1) -> Arr | float:
    """Nodes one replica spans: ⌈TP × PP / GPUs per node⌉."""
    return _out(np.ceil(np.asarray(tp, float) * np.asarray(pp, float) / gpu.gpus_per_node))
