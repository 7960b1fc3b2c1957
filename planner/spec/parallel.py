"""The layout of one replica (or of one pool's replica): ``Parallel``.

Parallelism as the engines run it (SGLang ``--tp 8 --ep 8 [--enable-dp-attention]``,
TensorRT-LLM ``tp_size 8, moe_ep_size 8 [enable_attention_dp]``, vLLM
``--enable-expert-parallel --data-parallel-size``):

* GPUs per replica = TP × PP.  A pipeline stage is a group of TP GPUs; the group may
  span nodes (its collectives then run over the NICs between them).
* ``ep`` lays the routed experts over the TP GPUs a stage already has: EP divides TP,
  each GPU holds E/EP experts, each sharded over TP/EP GPUs (the MoE layer's own TP).
  EP never adds GPUs.
* ``dp_attention``: attention runs data-parallel over the TP GPUs of the stage: each
  rank holds its own 1/TP of the sequences and their whole KV, the attention weights
  replicated per rank (attention TP = 1); the MoE layers run over the whole group
  (experts over EP, tokens exchanged by all-to-all).  MLA models use it because TP
  cannot shard MLA's single latent KV head: with TP attention every GPU holds the full
  latent KV of every sequence.
* ``redundant_experts`` (EPLB): extra expert copies per MoE layer spread over the EP
  group; they cost memory and even out the load.

Self-contained (no catalog look-ups): the model-dependent checks (EP divides the
experts, EP only for MoE) live with whoever knows the model (``Scenario``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["MAX_EP", "MAX_PP", "MAX_REDUNDANT_EXPERTS", "MAX_TP", "OLD_EP_MEANING", "Parallel", "old_ep_message"]

# Layout bounds (the schema's bounds since the start).  TP may span nodes now
# (TP16/EP16 over two 8-GPU nodes, EP32-EP72 over RDMA or an NVL72 domain); 64 is
# past any published deployment's group.  PP and EP as deep as any published
# deployment (DeepSeek-V3 experts: EP 256 would need TP 256, so EP ≤ TP ≤ 64 binds).
MAX_TP = 64
MAX_PP = 64
MAX_EP = 256
# EPLB's redundant copies per MoE layer: DeepSeek-V3's deployment runs 32 on 256
# experts (the V3 report, §3.4); 256 leaves room for a copy of every expert.
MAX_REDUNDANT_EXPERTS = 256

# What a scenario written when parallel.ep multiplied the GPU count is told.
OLD_EP_MEANING = (
    "parallel.ep now lays experts over the tp×pp GPUs the replica already has"
)


def old_ep_message(*, tp: int, ep: int) -> str:
    """The one message for an EP that does not divide TP (a scenario written with the
    old meaning, where EP multiplied the GPUs): what changed and the layout to write."""
    g = tp * ep
    return (f"must divide parallel.tp ({tp}); {OLD_EP_MEANING}; for {g} GPUs with experts over all {g} "
            f"set parallel.tp={g}, parallel.ep={g} (and parallel.dp_attention=true for attention data "
            "parallelism)")


class Parallel(BaseModel):
    """Layout of one replica: TP × PP GPUs; EP lays the experts over each stage's TP
    GPUs; ``dp_attention`` runs attention data-parallel over them."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tp: Annotated[int, Field(ge=1, le=MAX_TP)] = 1
    pp: Annotated[int, Field(ge=1, le=MAX_PP)] = 1
    ep: Annotated[int, Field(ge=1, le=MAX_EP)] = 1
    dp_attention: bool = False
    redundant_experts: Annotated[int, Field(ge=0, le=MAX_REDUNDANT_EXPERTS)] = 0

    @field_validator("ep", mode="after")
    @classmethod
    def _ep_divides_tp(cls, value: int, info: ValidationInfo) -> int:
        tp = info.data.get("tp")
        if isinstance(tp, int) and tp % value:
            raise ValueError(old_ep_message(tp=tp, ep=value))
        return value

    @field_validator("redundant_experts", mode="after")
    @classmethod
    def _redundant_needs_ep(cls, value: int, info: ValidationInfo) -> int:
        ep: Any = info.data.get("ep")
        if value and isinstance(ep, int) and ep == 1:
            raise ValueError("redundant expert copies spread over the EP group: set parallel.ep > 1 first")
        return value

    @property
    def gpus(self) -> int:
        """GPUs per replica = TP × PP (never EP)."""
        return self.tp * self.pp

    @property
    def attention_dp(self) -> int:
        """Attention data-parallel ranks per stage: TP with ``dp_attention``, else 1."""
        return self.tp if self.dp_attention else 1

    @property
    def attention_tp(self) -> int:
        """GPUs one sequence's attention is sharded over: 1 with ``dp_attention``, else TP."""
        return 1 if self.dp_attention else self.tp

    @property
    def moe_tp(self) -> int:
        """GPUs each routed expert is sharded over: TP / EP."""
        return self.tp // self.ep

    def describe(self) -> str:
        """What the layout does, in words: how attention and the experts are spread."""
        parts = [f"attention data-parallel over {self.tp} ranks, each with its own sequences and their whole KV"
                 if self.dp_attention and self.tp > 1 else
                 (f"attention sharded over TP {self.tp}" if self.tp > 1 else "one GPU per stage")]
        if self.ep > 1:
            parts.append(f"experts over EP {self.ep}" + (f", each sharded over {self.moe_tp} GPUs"
                                                         if self.moe_tp > 1 else ", each whole on its GPU"))
        if self.redundant_experts:
            parts.append(f"{self.redundant_experts} redundant expert copies per layer (EPLB)")
        if self.pp > 1:
            parts.append(f"{self.pp} pipeline stages")
        return "; ".join(parts)

    def label(self) -> str:
        """The layout's short name: ``TP8·EP8·DPattn``, ``TP4·PP2``, ``TP8``."""
        out = f"TP{self.tp}" + (f"·PP{self.pp}" if self.pp > 1 else "") + (f"·EP{self.ep}" if self.ep > 1 else "")
        out += "·DPattn" if self.dp_attention else ""
        return out + (f"·+{self.redundant_experts}exp" if self.redundant_experts else "")
