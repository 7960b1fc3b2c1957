"""The layout's rows of a Plan: GPUs and nodes per replica, the shards of weights and
KV one GPU holds, each with its derivation (planner.physics.layout, planner.physics.memory).
"""

from __future__ import annotations

from planner.physics.comm import dispatch_element_bytes
from planner.physics.layout import nodes_per_replica
from planner.physics.link import local_link
from planner.physics.memory import dp_replicated_params, kv_heads_per_gpu
from planner.physics.step import DecodeStep
from planner.physics.terms import term
from planner.spec.context import Resolved
from planner.spec.derivation import Derivation, fmt_num, put_derivation
from planner.spec.precision import bytes_per_weight

__all__ = ["layout_comm_derivations", "layout_memory_derivations"]


def layout_memory_derivations(r: Resolved, d: dict[str, Derivation], *, weight_bytes_per_gpu: float,
                              kv_bytes_per_token_per_gpu: float) -> None:
    """Add the layout rows: GPUs (TP × PP) and nodes per replica, attention ranks, the
    weights and KV bytes/token one GPU holds (``weight_bytes_per_gpu`` and
    ``kv_bytes_per_token_per_gpu`` as ``replica_memory`` computed them)."""
    s, m, gpu = r.scenario, r.model, r.gpu
    p = s.parallel
    put_derivation(d, "layout.gpus_per_replica", "TP × PP (EP lays the experts over these GPUs, never adds any)",
                   f"{p.tp} × {p.pp}", p.gpus, "GPUs")
    put_derivation(d, "layout.nodes_per_replica", "⌈GPUs per replica / GPUs per node⌉",
                   f"⌈{p.gpus} / {gpu.gpus_per_node}⌉", float(nodes_per_replica(gpu, tp=p.tp, pp=p.pp)), "nodes")
    put_derivation(d, "layout.attention_ranks",
                   "TP with data-parallel attention (each rank its own sequences, whole KV), else 1 (TP attention)",
                   f"{p.tp if p.dp_attention else 1}", p.attention_dp, "ranks")
    bpw = bytes_per_weight(s.weights_dtype)
    pc = r.params
    we = pc.expert_total * bpw
    rep = float(dp_replicated_params(m, ep=p.ep)) * bpw if p.dp_attention else 0.0
    rest = pc.total * bpw - we - rep
    slots = f" × ({m.experts} + {p.redundant_experts}) / {m.experts}" if p.redundant_experts and m.is_moe else ""
    if m.is_moe:
        formula = ("(W_rest / TP + W_replicated + W_experts" + (" × (E + R) / E" if slots else "")
                   + " / TP) / PP; W_replicated: attention" + (" and shared experts" if p.ep > 1 else "")
                   + " on every data-parallel attention rank (0 with TP attention); routed experts E/EP per "
                   "GPU, each sharded over TP/EP GPUs")
        sub = f"({fmt_num(rest)} / {p.tp} + {fmt_num(rep)} + {fmt_num(we)}{slots} / {p.tp}) / {p.pp}"
    else:
        formula = "(W_rest / TP + W_replicated) / PP; W_replicated: attention on every data-parallel rank"
        sub = f"({fmt_num(rest)} / {p.tp} + {fmt_num(rep)}) / {p.pp}"
    put_derivation(d, "memory.weight_bytes_per_gpu", formula, sub, weight_bytes_per_gpu, "bytes")
    heads = float(kv_heads_per_gpu(m, p.attention_tp))
    if m.attention == "mla":
        kv_formula = ("KV bytes/token / PP: MLA's single latent head cannot be sharded, so every GPU of a "
                      "TP-attention group holds it whole (data-parallel attention: each rank holds it for "
                      "its own sequences only)")
        kv_sub = f"{fmt_num(kv_bytes_per_token_per_gpu * p.pp)} / {p.pp}"
    else:
        kv_formula = ("KV bytes/token × ⌈n_kv_heads / attention TP⌉ / n_kv_heads / PP (attention TP: TP, or 1 "
                      "with data-parallel attention)")
        kv_sub = (f"{fmt_num(kv_bytes_per_token_per_gpu * p.pp * m.kv_heads / heads)} × {fmt_num(heads)} / "
                  f"{m.kv_heads} / {p.pp}")
    put_derivation(d, "memory.kv_bytes_per_token_per_gpu", kv_formula, kv_sub, kv_bytes_per_token_per_gpu, "bytes")


def layout_comm_derivations(r: Resolved, d: dict[str, Derivation], *, step: DecodeStep, batch_size: int) -> None:
    """The decode step's collectives split by kind: all-reduces and (data-parallel attention
    with EP > 1) the MoE all-to-all, with the link each runs on."""
    s, m, gpu = r.scenario, r.model, r.gpu
    p = s.parallel
    local = local_link(gpu)[0]
    spans = "over the NICs between nodes" if p.tp > local else "inside the node"
    ring = ("hierarchical: a ring inside each node, the NICs between nodes" if p.tp > local
            else "a ring inside the node")
    put_derivation(d, "decode.all_reduce_s",
                   ("2 all-reduces per layer over TP" if not p.dp_attention else
                    "data-parallel attention: the MLPs' gather/scatter over TP (one all-reduce per dense layer"
                    + (", and over TP/EP GPUs per MoE layer" if p.moe_tp > 1 else "") + ")")
                   + f", {ring} (TP {p.tp}, batch {batch_size})" if p.tp > 1 else "none (TP = 1)",
                   fmt_num(float(step.all_reduce_s)), float(step.all_reduce_s), "s")
    if m.is_moe and p.dp_attention and p.ep > 1:
        b = dispatch_element_bytes(gpu, s.weights_dtype)
        put_derivation(d, "decode.all_to_all_s",
                       "per MoE layer: dispatch (" + ("FP8 with block scales" if b < 2 else "BF16") + ") + combine (BF16) "
                       "of the busiest GPU's token copies over the EP group: λ + λ_a2a + max(B·(d−1)/EP / local link, "
                       "B·(EP−d)/EP / NIC), B = copies × hidden × bytes, λ_a2a = each call's own latency "
                       f"(all_to_all_call_s {fmt_num(term('all_to_all_call_s') * 1e6)} µs, calibrated on InferenceX); "
                       f"{m.layers - m.dense_layers} MoE layers, EP {p.ep} ({spans}), {batch_size} sequences over "
                       f"{p.attention_dp} ranks", fmt_num(float(step.all_to_all_s)), float(step.all_to_all_s), "s")
