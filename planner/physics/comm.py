"""Collectives between the GPUs of a replica: tensor-parallel all-reduces,
expert-parallel all-to-alls, pipeline hops.

A ring all-reduce over g GPUs moves 2(g−1)/g of the message over each GPU's
link, one direction (``planner.physics.link``), in 2(g−1) steps; each step
pays a hop latency on top of the collective's launch floor λ:

    t = λ + 2(g−1) × λ_hop + 2(g−1)/g × bytes / link

λ_call (``collective_call_s``, fitted, added to λ once per call) and
λ_hop are fitted terms; λ_hop is ``collective_hop_s`` (:mod:`planner.physics.terms`);
a scenario's ``efficiency.collective_latency_s`` states the whole latency
(λ + hops) instead.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.link import group_link
from planner.physics.terms import term
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = ["all_to_all_s", "collective_s", "layer_comm_s", "p2p_s"]

Arr = NDArray[np.float64]


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


def _out(x: Arr) -> Arr | float:
    return float(x) if np.ndim(x) == 0 else x


def collective_s(
    *, gpu: GpuSpec, group: ArrayLike, message_bytes: ArrayLike, count: ArrayLike,
    latency_s: float | None = None,
) -> Arr | float:
    """All-reduces: count × (λ + 2(g−1)·λ_hop + 2(g−1)/g × bytes / link), zero for a group of one."""
    g = _f(group)
    lat, bw = group_link(gpu, g)
    lat = lat + term("collective_call_s") + 2.0 * (g - 1.0) * term("collective_hop_s")
    if latency_s is not None:
        lat = np.full_like(lat, latency_s)
    per = lat + 2.0 * (g - 1.0) / g * _f(message_bytes) / bw
    return _out(np.where(g > 1, _f(count) * per, 0.0))


def all_to_all_s(
    *, gpu: GpuSpec, group: ArrayLike, ep: ArrayLike, bytes_per_gpu: ArrayLike, count: ArrayLike,
    latency_s: float | None = None,
) -> Arr | float:
    """Expert-parallel all-to-alls: count × (λ + bytes one GPU sends / link), none at EP = 1."""
    lat, bw = group_link(gpu, group)
    if latency_s is not None:
        lat = np.full_like(lat, latency_s)
    per = lat + _f(bytes_per_gpu) / bw
    return _out(np.where(_f(ep) > 1, _f(count) * per, 0.0))


def p2p_s(
    *, gpu: GpuSpec, span: ArrayLike, message_bytes: ArrayLike, count: ArrayLike, latency_s: float | None = None,
) -> Arr | float:
    """Point-to-point sends (pipeline hops): count × (λ + bytes / link of a ``span``-GPU group)."""
    lat, bw = group_link(gpu, span)
    if latency_s is not None:
        lat = np.full_like(lat, latency_s)
    return _out(np.maximum(_f(count), 0.0) * (lat + _f(message_bytes) / bw))


def layer_comm_s(*, model: ModelSpec, gpu: GpuSpec, tp: Arr, pp: Arr, ep: Arr, message_bytes: Arr,
                 latency_s: float | None) -> Arr:
    """One forward pass's collectives: 2 all-reduces per layer over TP, 2
    all-to-alls per MoE layer over EP (each GPU its own tokens' k expert copies),
    PP − 1 hops between stages."""
    comm = _f(collective_s(gpu=gpu, group=tp, message_bytes=message_bytes, count=2 * model.layers,
                           latency_s=latency_s))
    if model.is_moe:
        moe_layers = model.layers - model.dense_layers
        comm = comm + _f(all_to_all_s(gpu=gpu, group=tp * ep, ep=ep,
                                      bytes_per_gpu=message_bytes / ep * model.experts_per_token,
                                      count=2 * moe_layers, latency_s=latency_s))
    return comm + _f(p2p_s(gpu=gpu, span=tp * pp, message_bytes=message_bytes, count=pp - 1, latency_s=latency_s))
