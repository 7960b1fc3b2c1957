"""Links between GPUs: which one a group of GPUs talks over, and the KV transfer
of disaggregated serving.

* A group within the GPU's scale-up domain (NVSwitch board) talks over NVLink,
  one direction at a time: the catalog's ``scaleup_bytes_per_s`` is the vendor's
  aggregate of both directions (H100 NVLink 4: 900 GB/s = 450 GB/s each way).
* A larger group inside one node talks over PCIe; beyond the node, over each
  GPU's own NIC (the catalog's ``scaleout_bytes_per_s``; default DGX/HGX H100: one
  400 Gb/s ConnectX-7 per GPU = 50 GB/s).  A group spanning nodes is built from fast
  local domains (``local_link``: the NVLink domain, or the node over PCIe) joined by
  the NICs; its collectives are hierarchical (:mod:`planner.physics.comm`).
* KV transfer (seeds 002): t = D_KV / (η_n × B) + t_setup.  The TP shards of a
  prompt's KV move in parallel, each GPU over its own link, so D_KV is the bytes
  one GPU holds.  Shipped layer by layer while the prefill still computes later
  layers (seeds 001: "engines hide most of it by shipping layer by layer"), only
  the tail is exposed: with per-layer transfer x = t/L and compute c = prefill/L,
  the last layer lands at max(L·c + x, c + L·x), so the exposed part is
  max(x, t − (L − 1)·c) + setup.

The plan and the simulator take their link from here: one default.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.spec.specs import GpuSpec

__all__ = [
    "DEFAULT_KV_LINK_EFFICIENCY",
    "LINK_DIRECTIONS",
    "NVLINK_COLLECTIVE_LATENCY_S",
    "PCIE_COLLECTIVE_LATENCY_S",
    "RDMA_BYTES_PER_S",
    "RDMA_LATENCY_S",
    "group_link",
    "local_link",
    "nic_bytes_per_s",
    "kv_link_bytes_per_s",
    "kv_transfer_exposed_s",
]

# Per-collective launch + latency floor (seeds 001: "160 × ~5 µs ≈ 0.8 ms" over
# NVLink, "~25 µs each" over PCIe).
NVLINK_COLLECTIVE_LATENCY_S = 5e-6
PCIE_COLLECTIVE_LATENCY_S = 25e-6
# Inter-node message latency over InfiniBand/RoCE NICs: of the order of the PCIe
# figure (NCCL's inter-node latency is tens of µs; assumed equal).
RDMA_LATENCY_S = PCIE_COLLECTIVE_LATENCY_S
# The catalog's scaleup_bytes_per_s is both directions summed; a send uses one.
LINK_DIRECTIONS = 2.0
# One 400 Gb/s NIC per GPU (seeds 001: "~52 ms over 400 Gb RDMA"; DGX H100 has
# 8 × ConnectX-7 400 Gb/s, one per GPU).
RDMA_BYTES_PER_S = 400e9 / 8
# Sustained fraction of a link's bandwidth in a KV transfer (assumed: NCCL and
# NIXL reach about 80% of line rate on large messages).
DEFAULT_KV_LINK_EFFICIENCY = 0.8

Arr = NDArray[np.float64]


def nic_bytes_per_s(gpu: GpuSpec) -> float:
    """One direction of the GPU's scale-out NIC: the catalog's ``scaleout_bytes_per_s``,
    else one 400 Gb/s NIC per GPU (RDMA_BYTES_PER_S)."""
    return gpu.scaleout_bytes_per_s if gpu.scaleout_bytes_per_s is not None else RDMA_BYTES_PER_S


def local_link(gpu: GpuSpec) -> tuple[int, float, float]:
    """(GPUs, latency_s, bytes/s one direction) of the fast domain a group spanning nodes
    is built from: the NVLink scale-up domain where it covers the node (an NVL72 rack:
    72 GPUs), else the node over PCIe."""
    if gpu.scaleup_bytes_per_s is not None and gpu.scaleup_domain_gpus >= gpu.gpus_per_node:
        return gpu.scaleup_domain_gpus, NVLINK_COLLECTIVE_LATENCY_S, gpu.scaleup_bytes_per_s / LINK_DIRECTIONS
    return gpu.gpus_per_node, PCIE_COLLECTIVE_LATENCY_S, gpu.pcie_bytes_per_s


def group_link(gpu: GpuSpec, group: ArrayLike) -> tuple[Arr, Arr]:
    """(latency_s, bytes/s one direction per GPU) of the link a group of GPUs
    talks over: NVLink within the scale-up domain, PCIe within the node, the
    GPU's NIC beyond it."""
    g = np.asarray(group, dtype=float)
    nvlink = (g <= gpu.scaleup_domain_gpus) & (gpu.scaleup_bytes_per_s is not None)
    in_node = g <= gpu.gpus_per_node
    nv_bw = (gpu.scaleup_bytes_per_s or gpu.pcie_bytes_per_s) / LINK_DIRECTIONS
    lat = np.where(nvlink, NVLINK_COLLECTIVE_LATENCY_S, np.where(in_node, PCIE_COLLECTIVE_LATENCY_S, RDMA_LATENCY_S))
    bw = np.where(nvlink, nv_bw, np.where(in_node, gpu.pcie_bytes_per_s, nic_bytes_per_s(gpu)))
    return lat, bw


def kv_link_bytes_per_s(gpu: GpuSpec, *, link: str, link_bytes_per_s: float | None = None) -> float:
    """One direction of the link each GPU ships its KV shard over: the scenario's
    ``fleet.link_bytes_per_s`` if given, else NVLink (aggregate / 2) or one NIC."""
    if link_bytes_per_s is not None:
        return link_bytes_per_s
    if link == "nvlink":
        return (gpu.scaleup_bytes_per_s or gpu.pcie_bytes_per_s) / LINK_DIRECTIONS
    return nic_bytes_per_s(gpu)


def kv_transfer_exposed_s(
    *, transfer_s: ArrayLike, prefill_s: ArrayLike, layers: int, setup_s: float = 0.0
) -> Arr | float:
    """The part of a layer-by-layer KV transfer the prefill does not hide:
    max(t/L, t − (L − 1)/L × prefill) + setup (``transfer_s`` without setup)."""
    t = np.asarray(transfer_s, float)
    p = np.asarray(prefill_s, float)
    out = np.maximum(t / layers, t - (layers - 1.0) / layers * p) + setup_s
    return float(out) if np.ndim(out) == 0 else out
