"""Speculative decoding's memory: the draft's weights and KV cache, per GPU.

The seeds (000, 001) describe two drafters: "a small, cheap draft model (or a
lightweight draft head grafted onto the target model)".  Both hold weights in HBM
beside the target's, and both keep a KV cache of their own for every sequence's
context, so the engine's KV budget holds fewer sequences:

* separate draft model (vLLM/SGLang/TensorRT-LLM "draft-target"):
  draft weight bytes = draft parameters × bytes per weight;
  draft KV bytes/token = 2 × n_layers_d × n_kv_heads_d × head_dim_d × dtype_bytes
* EAGLE-style head (EAGLE-1/2 and MTP-style heads): ``draft_layers`` decoder
  layers of the target's own shape plus EAGLE's feature fusion (2h → h); it
  shares the target's embedding and LM head:
  head parameters = L_d × (P − embedding − LM head) / n_layers + 2h²;
  head KV bytes/token = L_d × target KV bytes/token / n_layers
* MTP module (speculative.method 'mtp', DeepSeek-V3's multi-token prediction): per depth
  one transformer block of the target's MoE shape + its projection 2h → h + two norms,
  sharing the target's embedding and output head (``speculative.mtp_module_params``;
  the checkpoint's 14B counts its own copies of those two as well):
  MTP KV bytes/token = mtp_layers × target KV bytes/token / n_layers

Per GPU, as engines place the draft: sharded over the target's TP group (vLLM V1
and SGLang run the drafter at the target's TP size): weights / TP, KV heads
ceil(n_kv_heads_d / TP) per rank; not split over pipeline stages or EP groups
(every GPU is charged the draft, the one that holds it binds).

The engine's KV pool then spans both models' layers (vLLM V1 allocates one block
table over the target's and the drafter's layers), so

    KV budget per GPU = budget before the draft − draft weights per GPU
    max sequences = KV budget per GPU / (context × (target + draft) KV bytes/token per GPU)

Not modelled: EAGLE-3's reduced-vocabulary LM head, the drafter's own activation
peak in the profile run, and the k lookahead slots a verify pass writes and frees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from planner.physics.memory import kv_bytes_per_token
from planner.physics.speculative import mtp_module_params
from planner.spec.params import param_counts
from planner.spec.precision import bytes_per_weight
from planner.spec.specs import ModelSpec

__all__ = ["DraftMemory", "draft_memory", "eagle_head_params"]


@dataclass(frozen=True)
class DraftMemory:
    """The drafter's memory, whole and per GPU (zeros with speculation off)."""

    kind: Literal["none", "head", "model", "mtp"]
    name: str  # the draft model's id, "EAGLE head (L layers of <target>)" or "MTP module (…)"
    params: float
    bytes_per_weight: float
    weight_bytes: float
    weight_bytes_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    tp: int


NO_DRAFT = DraftMemory(kind="none", name="", params=0.0, bytes_per_weight=0.0, weight_bytes=0.0,
                       weight_bytes_per_gpu=0.0, kv_bytes_per_token=0.0, kv_bytes_per_token_per_gpu=0.0, tp=1)


def eagle_head_params(target: ModelSpec, *, layers: int) -> float:
    """L_d × (P − embedding − LM head) / n_layers + 2h² (the head's feature fusion 2h → h)."""
    pc = param_counts(target)
    h = float(target.hidden_width)
    vocab = float(target.vocab or 0)
    emb = vocab * h * (1.0 if target.tie_embeddings else 2.0)
    body = max(pc.total - emb, 0.0)
    return layers * body / target.layers + 2.0 * h * h


def _kv_fraction_per_gpu(model: ModelSpec, tp: int) -> float:
    """KV heads one TP rank holds / KV heads (replicated past the head count; MLA: all)."""
    if model.attention == "mla":
        return 1.0
    return math.ceil(model.kv_heads / tp) / model.kv_heads


def draft_memory(*, target: ModelSpec, draft: ModelSpec | None, draft_tokens: int, draft_layers: int,
                 weights_dtype: str, kv_dtype: str, tp: int, method: str | None = None) -> DraftMemory:
    """The drafter's weights and KV per token, whole and on one GPU of a TP group.

    ``method`` 'mtp': the target's MTP module; otherwise ``draft`` None: an EAGLE-style
    head of ``draft_layers`` target-shaped layers; ``draft_tokens`` 0: speculation off,
    nothing charged."""
    if draft_tokens <= 0:
        return NO_DRAFT
    bpw = bytes_per_weight(weights_dtype)
    kind: Literal["head", "model", "mtp"]
    if method == "mtp":
        params = mtp_module_params(target)
        kv = target.mtp_layers * kv_bytes_per_token(target, kv_dtype) / target.layers
        frac = _kv_fraction_per_gpu(target, tp)
        name = f"MTP module ({target.mtp_layers} block{'s' if target.mtp_layers > 1 else ''} of {target.id})"
        kind = "mtp"
    elif draft is None:
        params = eagle_head_params(target, layers=draft_layers)
        kv = draft_layers * kv_bytes_per_token(target, kv_dtype) / target.layers
        frac = _kv_fraction_per_gpu(target, tp)
        name = f"EAGLE head ({draft_layers} layer{'s' if draft_layers > 1 else ''} of {target.id})"
        kind = "head"
    else:
        params = param_counts(draft).total
        kv = kv_bytes_per_token(draft, kv_dtype)
        frac = _kv_fraction_per_gpu(draft, tp)
        name, kind = draft.id, "model"
    w = params * bpw
    return DraftMemory(kind=kind, name=name, params=params, bytes_per_weight=bpw, weight_bytes=w,
                       weight_bytes_per_gpu=w / tp, kv_bytes_per_token=kv, kv_bytes_per_token_per_gpu=kv * frac, tp=tp)
