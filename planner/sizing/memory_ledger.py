"""The memory ledger's rows of a Plan: weights, KV bytes/token and per sequence, the KV
budget, the sequences it holds and the speculative drafter's share, each with its
derivation (the numbers are :func:`planner.sizing.gpu_memory.replica_memory`'s, the same
the operating point sizes the batch with).  Re-exported by :mod:`planner.sizing.replica`.
"""

from __future__ import annotations

import math

from planner.physics.draft import DraftMemory, draft_memory
from planner.physics.kvledger import kv_ledger_text
from planner.physics.layout import nodes_per_replica
from planner.physics.memory import (
    DEFAULT_NON_TORCH_BYTES,
    contiguous_reservation_bytes,
    engine_hbm_bytes,
    kv_bytes_per_token,
    max_sequences,
    paged_reservation_bytes,
    prefix_sharing_bytes,
    weight_bytes,
)
from planner.sizing.gpu_memory import replica_memory
from planner.sizing.layout_section import layout_memory_derivations
from planner.sizing.results import MemoryResult
from planner.spec.catalog import get_model
from planner.spec.context import Resolved
from planner.spec.derivation import Derivation, fmt_num, put_derivation
from planner.spec.precision import bytes_per_weight

__all__ = ["draft_section", "memory_section"]

Deriv = dict[str, Derivation]


def memory_section(r: Resolved, d: Deriv, *, context_tokens: int) -> MemoryResult:
    s, gpu, m = r.scenario, r.gpu, r.model
    p = s.parallel
    w = weight_bytes(m, s.weights_dtype)
    # KV/token at the capacity context: constant, or the ledger's KV per sequence / context
    # where sliding-window or chunked layers hold at most their window (planner.physics.kvledger).
    k = kv_bytes_per_token(m, s.kv_dtype, context_tokens)
    util = s.serving.memory_utilization
    # The same numbers operating_arrays sizes the batch with (one computation, two readers).
    rm = replica_memory(r, tp=p.tp, pp=p.pp, ep=p.ep, context_tokens=context_tokens)
    wg, kg = float(rm.weight_bytes_per_gpu), float(rm.cache_bytes_per_token_per_gpu)
    act, budget = float(rm.activation_bytes), float(rm.kv_budget_bytes)
    dm = draft_section(r, d, target_kv_bytes_per_token_per_gpu=float(rm.kv_bytes_per_token_per_gpu))
    # Data-parallel attention: each of the TP ranks holds its own sequences' whole KV.
    ranks = p.attention_dp
    pre = float(s.workload.prefix_tokens)
    h = s.workload.prefix_hit_rate if pre > 0 else 0.0
    seqs = float(max_sequences(kv_budget_bytes=budget, kv_bytes_per_token_per_gpu=kg, context_tokens=context_tokens,
                               prefix_tokens=pre, prefix_hit_rate=h)) * ranks
    fits = budget > 0 and seqs >= 1.0
    bpw = bytes_per_weight(s.weights_dtype)
    put_derivation(d, "memory.weight_bytes", "parameters × bytes per weight",
                   f"{fmt_num(r.params.total)} × {fmt_num(bpw)}", w, "bytes")
    layout_memory_derivations(r, d, weight_bytes_per_gpu=wg,
                              kv_bytes_per_token_per_gpu=float(rm.kv_bytes_per_token_per_gpu))
    if m.has_windowed_layers:
        ledger_f, ledger_s = kv_ledger_text(m, s.kv_dtype, context_tokens)
        put_derivation(d, "memory.kv_bytes_per_sequence", ledger_f + " (each windowed layer holds at most its window)",
                       ledger_s, k * context_tokens, "bytes")
        put_derivation(d, "memory.kv_bytes_per_token", "KV bytes per sequence / context tokens (at the capacity context)",
                       f"{fmt_num(k * context_tokens)} / {context_tokens}", k, "bytes")
    elif m.attention == "mla":
        put_derivation(d, "memory.kv_bytes_per_token", "n_layers × (kv_lora_rank + qk_rope_head_dim) × dtype_bytes",
                       f"{m.layers} × ({m.kv_lora_rank} + {m.qk_rope_head_dim}) × {fmt_num(k / m.layers / ((m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0)))}",
                       k, "bytes")
    else:
        put_derivation(d, "memory.kv_bytes_per_token", "2 × n_layers × n_kv_heads × head_dim × dtype_bytes",
                       f"2 × {m.layers} × {m.kv_heads} × {m.head_dim} × {fmt_num(k / (2 * m.layers * m.kv_heads * m.head_dim))}",
                       k, "bytes")
    if not m.has_windowed_layers:
        put_derivation(d, "memory.kv_bytes_per_sequence", "context tokens × KV bytes/token",
                       f"{context_tokens} × {fmt_num(k)}", k * context_tokens, "bytes")
    dw = f" − {fmt_num(dm.weight_bytes_per_gpu)}" if dm.kind != "none" else ""
    dwf = " − draft weights per GPU" if dm.kind != "none" else ""
    if util is None:
        put_derivation(d, "memory.kv_budget_bytes", f"max(0, HBM − weights per GPU − reserved{dwf})",
                       f"max(0, {fmt_num(gpu.hbm_bytes)} − {fmt_num(wg)} − {fmt_num(s.serving.reserved_bytes)}{dw})", budget,
                       "bytes")
    elif s.serving.engine == "trtllm":
        put_derivation(d, "memory.kv_budget_bytes",
                       "max(0, free fraction × (CUDA-visible HBM − weights per GPU − activation peak − non-torch)) "
                       f"(TensorRT-LLM kv_cache_free_gpu_mem_fraction){dwf}",
                       f"max(0, {util} × ({fmt_num(engine_hbm_bytes(gpu))} − {fmt_num(wg)} − {fmt_num(act)} − "
                       f"{fmt_num(DEFAULT_NON_TORCH_BYTES)})){dw}",
                       budget, "bytes")
    elif s.serving.engine == "sglang":
        put_derivation(d, "memory.kv_budget_bytes",
                       f"max(0, mem_fraction_static × CUDA-visible HBM − weights per GPU{dwf}) (SGLang)",
                       f"max(0, {util} × {fmt_num(engine_hbm_bytes(gpu))} − {fmt_num(wg)}{dw})", budget, "bytes")
    else:
        put_derivation(d, "memory.kv_budget_bytes",
                       "max(0, memory_utilization × CUDA-visible HBM − weights per GPU − activation peak − non-torch"
                       f"{dwf}) (vLLM gpu_memory_utilization)",
                       f"max(0, {util} × {fmt_num(engine_hbm_bytes(gpu))} − {fmt_num(wg)} − {fmt_num(act)} − "
                       f"{fmt_num(DEFAULT_NON_TORCH_BYTES)}{dw})",
                       budget, "bytes")
    alone = f"{fmt_num(budget)} / ({context_tokens} × {fmt_num(kg)})"
    if pre > 0 and h > 0:
        put_derivation(d, "memory.max_sequences",
                       "max(budget / (context × K), (budget − prefix × K) / ((context − hit rate × prefix) × K)) × "
                       "attention ranks, "
                       "K = KV bytes/token per GPU (a shared prefix is held once per replica)",
                       f"max({alone}, max(0, {fmt_num(budget)} − {fmt_num(pre)} × {fmt_num(kg)}) / (({context_tokens} − {h} × "
                       f"{fmt_num(pre)}) × {fmt_num(kg)})) × {ranks}", seqs, "sequences")
    else:
        put_derivation(d, "memory.max_sequences", "KV budget per GPU / (context × KV bytes/token per GPU) × attention ranks "
                       "(TP with data-parallel attention, else 1)"
                       + (" (KV bytes/token: target + draft)" if dm.kind != "none" else ""),
                       f"{alone} × {ranks}", seqs, "sequences")
    unshared, shared = prefix_sharing_bytes(kv_bytes_per_token=k, prefix_tokens=s.workload.prefix_tokens,
                                            sequences=max(int(seqs), 1))
    return MemoryResult(
        gpus_per_replica=r.gpus_per_replica,
        nodes_per_replica=int(nodes_per_replica(gpu, tp=p.tp, pp=p.pp)),
        hbm_bytes=gpu.hbm_bytes,
        weight_bytes=w,
        weight_bytes_per_gpu=wg,
        kv_bytes_per_token=k,
        kv_bytes_per_token_per_gpu=float(rm.kv_bytes_per_token_per_gpu),
        context_tokens=context_tokens,
        kv_bytes_per_sequence=k * context_tokens,
        reserved_bytes=s.serving.reserved_bytes if util is None else DEFAULT_NON_TORCH_BYTES,
        activation_bytes=act,
        kv_budget_bytes=budget,
        max_sequences=seqs,
        fits=fits,
        contiguous_reservation_bytes=contiguous_reservation_bytes(  # KV/token at max_len (windowed layers)
            kv_bytes_per_token=kv_bytes_per_token(m, s.kv_dtype, m.max_context_tokens or context_tokens),
            max_len_tokens=m.max_context_tokens or context_tokens),
        paged_reservation_bytes=paged_reservation_bytes(
            kv_bytes_per_token=k, used_tokens=context_tokens, block_tokens=s.serving.block_tokens),
        prefix_sharing_saved_bytes=unshared - shared,
        draft_name=dm.name,
        draft_weight_bytes=dm.weight_bytes,
        draft_weight_bytes_per_gpu=dm.weight_bytes_per_gpu,
        draft_kv_bytes_per_token=dm.kv_bytes_per_token,
        draft_kv_bytes_per_token_per_gpu=dm.kv_bytes_per_token_per_gpu,
    )


def draft_section(r: Resolved, d: Deriv, *, target_kv_bytes_per_token_per_gpu: float) -> DraftMemory:
    """The speculative drafter's rows of the memory ledger (planner.physics.draft), with derivations."""
    s, p = r.scenario, r.scenario.parallel
    sp = s.speculative
    draft = get_model(sp.draft_model) if sp.draft_model is not None else None
    dm = draft_memory(target=r.model, draft=draft, draft_tokens=sp.draft_tokens, draft_layers=sp.draft_layers,
                      weights_dtype=sp.draft_weights_dtype or s.weights_dtype, kv_dtype=s.kv_dtype, tp=p.tp,
                      method=sp.method)
    if dm.kind == "none":
        return dm
    m = draft or r.model
    h = float(m.hidden_width)
    if dm.kind == "mtp":
        block = dm.params / m.mtp_layers - 2.0 * h * h - 2.0 * h
        put_derivation(d, "memory.draft_params", "mtp_layers × (one MoE transformer block + projection 2h² + 2 norms 2h) "
                       "(the MTP module; embedding and output head shared with the target)",
                       f"{m.mtp_layers} × ({fmt_num(block)} + 2 × {fmt_num(h)} × {fmt_num(h)} + 2 × {fmt_num(h)})",
                       dm.params, "parameters")
        kv_sub = f"{m.mtp_layers} × {fmt_num(kv_bytes_per_token(m, s.kv_dtype))} / {m.layers}"
        kv_formula = "mtp_layers × target KV bytes/token / n_layers"
    elif dm.kind == "head":
        pc = r.params
        emb = float(m.vocab or 0) * h * (1.0 if m.tie_embeddings else 2.0)
        put_derivation(d, "memory.draft_params", "L_d × (P − embedding − LM head) / n_layers + 2h² (EAGLE-style head)",
                       f"{sp.draft_layers} × ({fmt_num(pc.total)} − {fmt_num(emb)}) / {m.layers} + 2 × {fmt_num(h)} × {fmt_num(h)}",
                       dm.params, "parameters")
        kv_sub = (f"{sp.draft_layers} × {fmt_num(kv_bytes_per_token(m, s.kv_dtype))} / {m.layers}")
        kv_formula = "L_d × target KV bytes/token / n_layers"
    else:
        put_derivation(d, "memory.draft_params", f"{m.id}'s parameters (from its shapes)", fmt_num(dm.params), dm.params,
                       "parameters")
        kv_formula = "2 × n_layers × n_kv_heads × head_dim × dtype_bytes (the draft's)"
        kv_sub = (f"2 × {m.layers} × {m.kv_heads} × {m.head_dim} × "
                  f"{fmt_num(dm.kv_bytes_per_token / (2 * m.layers * m.kv_heads * m.head_dim))}")
    put_derivation(d, "memory.draft_weight_bytes", "draft parameters × bytes per weight",
                   f"{fmt_num(dm.params)} × {fmt_num(dm.bytes_per_weight)}", dm.weight_bytes, "bytes")
    put_derivation(d, "memory.draft_weight_bytes_per_gpu", "draft weights / TP (sharded over the target's TP group, "
                   "on every PP stage and EP group)", f"{fmt_num(dm.weight_bytes)} / {p.tp}", dm.weight_bytes_per_gpu, "bytes")
    put_derivation(d, "memory.draft_kv_bytes_per_token", kv_formula, kv_sub, dm.kv_bytes_per_token, "bytes")
    put_derivation(d, "memory.draft_kv_bytes_per_token_per_gpu", "draft KV/token × ceil(n_kv_heads / TP) / n_kv_heads",
                   f"{fmt_num(dm.kv_bytes_per_token)} × {math.ceil(m.kv_heads / p.tp) if m.attention != 'mla' else m.kv_heads}"
                   f" / {m.kv_heads}", dm.kv_bytes_per_token_per_gpu, "bytes")
    put_derivation(d, "memory.cache_bytes_per_token_per_gpu", "target KV/token per GPU + draft KV/token per GPU",
                   f"{fmt_num(target_kv_bytes_per_token_per_gpu)} + {fmt_num(dm.kv_bytes_per_token_per_gpu)}",
                   target_kv_bytes_per_token_per_gpu + dm.kv_bytes_per_token_per_gpu, "bytes")
    return dm
