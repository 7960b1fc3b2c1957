"""Collectives between the GPUs of a replica: tensor-parallel all-reduces,
expert-parallel all-to-alls, pipeline hops, each timed on its link.

A ring all-reduce over g GPUs moves 2(g−1)/g of the message over each GPU's
link, one direction (``planner.physics.link``), in 2(g−1) steps; each step
pays a hop latency on top of the collective's launch floor λ:

    t = λ + 2(g−1) × λ_hop + 2(g−1)/g × bytes / link

A group spanning nodes (g GPUs in n local domains of d: ``link.local_link``) reduces
hierarchically: reduce-scatter inside the domain, all-reduce of the 1/d shard over the
NICs, all-gather inside the domain:

    t = λ + (2(d−1) + 2(n−1)) × λ_hop + 2(d−1)/d × bytes / local link + 2(n−1)/n × (bytes/d) / NIC

An all-to-all over an EP group of g GPUs (dispatch to the experts and combine back)
sends (g−1)/g of what a GPU's tokens carry; spanning domains, the share for peers in
its domain goes over the local link and the rest over the NIC at the same time:

    t = λ + λ_a2a + max(B × (d−1)/g / local link, B × (g−d)/g / NIC),   none at EP = 1

λ_call (``collective_call_s``, fitted, added to an all-reduce's λ once per call), λ_a2a
(``all_to_all_call_s``: a dispatch or combine kernel's own latency, its token
permutation and signalling, beyond the link's, added once per all-to-all call) and
λ_hop are fitted terms; λ_hop is ``collective_hop_s`` (:mod:`planner.physics.terms`);
a scenario's ``efficiency.collective_latency_s`` states the whole latency
(λ + hops) instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri

from planner.physics.link import RDMA_LATENCY_S, group_link, local_link, nic_bytes_per_s
from planner.physics.roofline import compute_dtype
from planner.physics.terms import term
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = ["COMBINE_ELEMENT_BYTES", "FP8_DISPATCH_ELEMENT_BYTES", "LayerComm", "all_to_all_s", "collective_s",
           "dispatch_element_bytes", "ep_busiest_factor", "layer_comm", "layer_comm_s", "p2p_s"]

# DeepEP's FP8 dispatch (SGLang, TensorRT-LLM, vLLM with FP8 experts): one byte per
# element plus one fp32 scale per 128 elements (DeepSeek-V3's block quantization).
FP8_DISPATCH_ELEMENT_BYTES = 1.0 + 4.0 / 128.0
# The combine returns the experts' outputs in BF16.
COMBINE_ELEMENT_BYTES = 2.0

Arr = NDArray[np.float64]
ACT_BYTES = 2.0  # activations cross the links in 16-bit


def _f(x: ArrayLike) -> Arr:
    return np.asarray(x, dtype=float)


def _out(x: Arr) -> Arr | float:
    return float(x) if np.ndim(x) == 0 else x


def collective_s(
    *, gpu: GpuSpec, group: ArrayLike, message_bytes: ArrayLike, count: ArrayLike,
    latency_s: float | None = None,
) -> Arr | float:
    """All-reduces: count × (λ + hops + 2(g−1)/g × bytes / link), hierarchical over the
    NICs when the group spans local domains; zero for a group of one."""
    g = _f(group)
    m = _f(message_bytes)
    d_n, d_lat, d_bw = local_link(gpu)
    spans = g > d_n
    lat, bw = group_link(gpu, np.minimum(g, d_n))
    d = np.minimum(g, d_n)
    n = np.where(spans, np.ceil(g / d_n), 1.0)
    lat = np.where(spans, RDMA_LATENCY_S, lat) + term("collective_call_s") \
        + (2.0 * (d - 1.0) + 2.0 * (n - 1.0)) * term("collective_hop_s")
    if latency_s is not None:
        lat = np.full_like(lat, latency_s)
    inner = 2.0 * (d - 1.0) / d * m / np.where(spans, d_bw, bw)
    outer = np.where(spans, 2.0 * (n - 1.0) / n * (m / d) / nic_bytes_per_s(gpu), 0.0)
    per = lat + inner + outer
    return _out(np.where(g > 1, _f(count) * per, 0.0))


def all_to_all_s(
    *, gpu: GpuSpec, group: ArrayLike, ep: ArrayLike, bytes_per_gpu: ArrayLike, count: ArrayLike,
    latency_s: float | None = None,
) -> Arr | float:
    """Expert-parallel all-to-alls over a ``group`` of GPUs (the EP group): count × (λ +
    max(B(d−1)/g / local link, B(g−d)/g / NIC)), B = ``bytes_per_gpu``, what the busiest
    GPU's tokens carry to (or back from) the experts; none at EP = 1."""
    g = _f(group)
    b = _f(bytes_per_gpu)
    d_n, _, d_bw = local_link(gpu)
    spans = g > d_n
    lat, bw = group_link(gpu, np.minimum(g, d_n))
    d = np.minimum(g, d_n)
    lat = np.where(spans, RDMA_LATENCY_S, lat) + term("all_to_all_call_s")
    if latency_s is not None:
        lat = np.full_like(lat, latency_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        local = b * (d - 1.0) / np.maximum(g, 1.0) / np.where(spans, d_bw, bw)
        remote = np.where(spans, b * (g - d) / np.maximum(g, 1.0) / nic_bytes_per_s(gpu), 0.0)
    per = lat + np.maximum(local, remote)
    return _out(np.where((_f(ep) > 1) & (g > 1), _f(count) * per, 0.0))


def p2p_s(
    *, gpu: GpuSpec, span: ArrayLike, message_bytes: ArrayLike, count: ArrayLike, latency_s: float | None = None,
) -> Arr | float:
    """Point-to-point sends (pipeline hops): count × (λ + bytes / link of a ``span``-GPU group)."""
    lat, bw = group_link(gpu, span)
    if latency_s is not None:
        lat = np.full_like(lat, latency_s)
    return _out(np.maximum(_f(count), 0.0) * (lat + _f(message_bytes) / bw))


def dispatch_element_bytes(gpu: GpuSpec, weights_dtype: str) -> float:
    """Bytes per hidden element the dispatch all-to-all carries: FP8 (with its block
    scales) where the experts compute in FP8 or FP4 on this GPU, as DeepEP dispatches
    for them; else BF16."""
    return FP8_DISPATCH_ELEMENT_BYTES if compute_dtype(gpu, weights_dtype) in ("fp8", "fp4") else 2.0


def ep_busiest_factor(*, assignments: ArrayLike, ep: ArrayLike, experts: int, redundant_experts: ArrayLike = 0
                      ) -> Arr | float:
    """Busiest EP GPU's token-expert assignments over the mean, for ``assignments`` =
    tokens × k spread uniformly over ``ep`` GPUs (normal approximation of the binomial,
    Blom's expected maximum of EP draws):

        f = 1 + z_EP × √((EP − 1) / assignments) × E / (E + R),   z_EP = Φ⁻¹((EP − 0.375)/(EP + 0.25))

    capped at EP (every assignment on one GPU).  Redundant copies (EPLB) let the
    balancer split the hottest experts: their excess shrinks by E / (E + R) (assumed)."""
    a, g = np.broadcast_arrays(_f(assignments), _f(ep))
    z = ndtri((g - 0.375) / (g + 0.25))  # Φ⁻¹ (scipy.stats.norm.ppf's own kernel)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where((a > 0) & (g > 1), z * np.sqrt((g - 1.0) / np.where(a > 0, a, 1.0)), 0.0)
    shrink = experts / (experts + _f(redundant_experts))
    return _out(np.minimum(1.0 + spread * shrink, np.maximum(g, 1.0)))


@dataclass(frozen=True)
class LayerComm:
    """One forward pass's collectives on the busiest GPU (arrays broadcast over the inputs)."""

    all_reduce_s: Arr  # TP all-reduces (and data-parallel attention's gather/scatter of the MLPs)
    all_to_all_s: Arr  # MoE dispatch + combine over the EP group (0 without data-parallel attention or at EP = 1)
    p2p_s: Arr  # pipeline hops

    @property
    def total_s(self) -> Arr:
        return self.all_reduce_s + self.all_to_all_s + self.p2p_s


def layer_comm(*, model: ModelSpec, gpu: GpuSpec, weights_dtype: str, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike,
               dp_attention: ArrayLike, tokens: ArrayLike, rank_tokens: ArrayLike, latency_s: float | None,
               redundant_experts: ArrayLike = 0) -> LayerComm:
    """One forward pass's collectives for ``tokens`` in the stage's group, of which the
    busiest attention rank holds ``rank_tokens`` (M = tokens × hidden × 2 bytes):

    * TP attention: 2 all-reduces of M per layer over TP (the MoE layer's experts see
      every token on every GPU, so EP adds no all-to-all: its partial outputs join the
      MLP's all-reduce);
    * data-parallel attention: each dense MLP layer gathers and scatters the group's
      tokens over TP (one all-reduce of M); each MoE layer dispatches the rank's tokens
      to their k experts and combines them back (all-to-all over EP, FP8 dispatch where
      the experts compute in FP8, BF16 combine), the busiest GPU (the larger of its
      sends and its receives, ``ep_busiest_factor``) setting the time, plus an all-reduce
      of M/EP over the TP/EP GPUs that shard each expert; at EP = 1, one all-reduce of M;
    * PP − 1 hops between stages (the rank's tokens with data-parallel attention).
    """
    tp_a, pp_a, ep_a = _f(tp), _f(pp), _f(ep)
    dp = np.asarray(dp_attention, bool)
    h = float(model.hidden_width)
    t, tr = _f(tokens), _f(rank_tokens)
    m = t * h * ACT_BYTES
    moe_layers = model.layers - model.dense_layers if model.is_moe else 0
    dense_layers = model.layers - moe_layers
    tp_ar = _f(collective_s(gpu=gpu, group=tp_a, message_bytes=m, count=2 * model.layers, latency_s=latency_s))
    dense_ar = _f(collective_s(gpu=gpu, group=tp_a, message_bytes=m, count=dense_layers, latency_s=latency_s))
    if moe_layers:
        k = float(model.experts_per_token)
        f = _f(ep_busiest_factor(assignments=t * k, ep=ep_a, experts=model.experts,
                                 redundant_experts=redundant_experts))
        # Per MoE layer: the busiest GPU's token copies, sent or received.
        copies = np.maximum(tr * k, t * k / ep_a * f)
        a2a = (_f(all_to_all_s(gpu=gpu, group=ep_a, ep=ep_a, count=moe_layers, latency_s=latency_s,
                               bytes_per_gpu=copies * h * dispatch_element_bytes(gpu, weights_dtype)))
               + _f(all_to_all_s(gpu=gpu, group=ep_a, ep=ep_a, count=moe_layers, latency_s=latency_s,
                                 bytes_per_gpu=copies * h * COMBINE_ELEMENT_BYTES)))
        moe_ar = _f(collective_s(gpu=gpu, group=tp_a / ep_a, message_bytes=m / ep_a, count=moe_layers,
                                 latency_s=latency_s))
        dp_ar = dense_ar + moe_ar
    else:
        a2a = np.zeros_like(m)
        dp_ar = _f(collective_s(gpu=gpu, group=tp_a, message_bytes=m, count=model.layers, latency_s=latency_s))
    hop = np.where(dp, tr, t) * h * ACT_BYTES
    p2p = _f(p2p_s(gpu=gpu, span=tp_a * pp_a, message_bytes=hop, count=pp_a - 1, latency_s=latency_s))
    shape = np.broadcast_shapes(np.shape(tp_ar), np.shape(dp_ar), np.shape(a2a), np.shape(p2p), np.shape(dp))
    ar = np.broadcast_to(np.where(dp, dp_ar, tp_ar), shape).astype(float)
    return LayerComm(all_reduce_s=ar, all_to_all_s=np.broadcast_to(np.where(dp, a2a, 0.0), shape).astype(float),
                     p2p_s=np.broadcast_to(p2p, shape).astype(float))


def layer_comm_s(*, model: ModelSpec, gpu: GpuSpec, weights_dtype: str, tp: ArrayLike, pp: ArrayLike,
                 ep: ArrayLike, dp_attention: ArrayLike, tokens: ArrayLike, rank_tokens: ArrayLike,
                 latency_s: float | None, redundant_experts: ArrayLike = 0) -> Arr:
    """One forward pass's collectives in seconds (``layer_comm``'s total)."""
    return layer_comm(model=model, gpu=gpu, weights_dtype=weights_dtype, tp=tp, pp=pp, ep=ep,
                      dp_attention=dp_attention, tokens=tokens, rank_tokens=rank_tokens, latency_s=latency_s,
                      redundant_experts=redundant_experts).total_s
