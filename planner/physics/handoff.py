"""The KV hand-off between a prefill pool and a decode pool with their own layouts.

A prompt of n tokens leaves K·n bytes of KV (K: KV bytes per token of the whole
model).  The prefill replica's N_p GPUs that hold KV (TP × PP of its layout) each
hold their shard of it, K_p·n bytes (K_p = ``kv_bytes_per_token_per_gpu`` of the
prefill layout); the decode replica's N_d GPUs each need their own shard of the
decode layout, K_d·n bytes (a KV head replicated over TP ranks, or MLA's one latent
head, is needed whole on every rank that holds it).  Re-sharding (TP4 → TP8: each
sender's heads split over two receivers; TP8 → TP4: two senders feed one receiver)
moves N_d·K_d·n bytes in all, every GPU over its own link at once:

* each receiving NIC carries K_d·n at L_d (the decode GPU's link);
* the senders share the N_d·K_d·n bytes evenly, N_d·K_d·n / N_p each at L_p;
* the transfer ends when the busiest NIC does:

      t = max(K_d·n / L_d, N_d·K_d·n / (N_p·L_p)) / η
        = (K_d·n / (η·L_d)) × max(1, (N_d·L_d) / (N_p·L_p))

so equal layouts on equal GPUs give exactly the one-pool figure K·n / (η·N·L)
(``factor`` = 1), and a decode pool receiving more bytes than the senders can push
(fewer or slower prefill GPUs) waits on the senders.  Shipped layer by layer behind
the prefill (``physics.link.kv_transfer_exposed_s``), only its tail is exposed.

The decode worker takes the request in on its own iterations: its scheduler reserves the KV
blocks, polls the transfer's completion and merges the request into its batch between decode
passes, so the first token leaves k decode iterations after the KV arrives
(:func:`decode_admission_s`, k the fitted term ``disagg_handoff_iterations``): a wait that grows
with the decode worker's batch, where the fixed hand-off (``disagg_handoff_s``) does not.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.terms import term

__all__ = ["decode_admission_s", "kv_handoff_factor", "kv_handoff_s"]

Arr = NDArray[np.float64]


def kv_handoff_factor(*, send_gpus: ArrayLike, recv_gpus: ArrayLike, send_link_bytes_per_s: ArrayLike,
                      recv_link_bytes_per_s: ArrayLike) -> Arr | float:
    """max(1, (N_d × L_d) / (N_p × L_p)): how much longer than the receivers' own time
    the senders take (1 when the senders keep up; exactly 1.0 for equal pools)."""
    ratio = (np.asarray(recv_gpus, float) * np.asarray(recv_link_bytes_per_s, float)) / (
        np.asarray(send_gpus, float) * np.asarray(send_link_bytes_per_s, float))
    out = np.maximum(1.0, ratio)
    return float(out) if np.ndim(out) == 0 else out


def kv_handoff_s(*, prompt_tokens: ArrayLike, recv_kv_bytes_per_token_per_gpu: ArrayLike, send_gpus: ArrayLike,
                 recv_gpus: ArrayLike, send_link_bytes_per_s: ArrayLike, recv_link_bytes_per_s: ArrayLike,
                 efficiency: float) -> Arr | float:
    """t = (K_d·n / (η·L_d)) × max(1, (N_d·L_d) / (N_p·L_p)) (without setup; see the module)."""
    own = (np.asarray(prompt_tokens, float) * np.asarray(recv_kv_bytes_per_token_per_gpu, float)) / (
        efficiency * np.asarray(recv_link_bytes_per_s, float))
    out = own * kv_handoff_factor(send_gpus=send_gpus, recv_gpus=recv_gpus,
                                  send_link_bytes_per_s=send_link_bytes_per_s,
                                  recv_link_bytes_per_s=recv_link_bytes_per_s)
    return float(out) if np.ndim(out) == 0 else out


def decode_admission_s(cycle_s: ArrayLike, iterations: float | None = None) -> Arr | float:
    """k × t_cycle: the time a disaggregated request waits on its decode worker between its KV
    arriving and its first token leaving (t_cycle: the decode worker's iteration at its batch; k:
    ``iterations``, default the fitted term ``disagg_handoff_iterations``)."""
    k = term("disagg_handoff_iterations") if iterations is None else float(iterations)
    out = k * np.asarray(cycle_s, float)
    return float(out) if np.ndim(out) == 0 else out
