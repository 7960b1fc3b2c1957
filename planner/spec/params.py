"""Parameter counts from a model's shapes.

Per layer (GQA):  q = h·H·d, k = v = h·Hkv·d, o = H·d·h  (+ q/k/v biases)
Per layer (MLA):  q_a = h·r_q, q_b = r_q·H·(d_nope + d_rope), kv_a = h·(r_kv + d_rope),
                  kv_b = r_kv·H·(d_nope + d_v), o = H·d_v·h
                  (+ o bias h, + H attention-sink logits where present: gpt-oss)
Dense MLP (gated): 3·h·I.   MoE layer: E experts of 3·h·I_moe (+ 2·I_moe + h biases
where present: gpt-oss), shared experts of the same width, router h·E.  The MoE
layers are those from ``dense_layers`` on whose index + 1 is a multiple of
``moe_layer_step`` (Llama 4 Maverick: every 2nd); every other layer has the dense
MLP of width I.  Norms: 2·h per layer + h.  Embedding V·h, LM head V·h unless
tied.  Active parameters count top-k routed + shared experts.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.spec.specs import ModelSpec

__all__ = ["ParamCounts", "param_counts"]


class ParamCounts(BaseModel):
    """Total and active parameters, split into expert and non-expert parts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: float
    active: float
    expert_total: float  # routed experts only (what EP shards and top-k samples)
    per_expert_per_layer: float
    moe_layers: int
    declared: bool  # True when the spec declared params (nominal shape)
    # Attention projections and their norms, all layers (what data-parallel attention
    # replicates per rank; 0 when a declared count has no shapes to split it by).
    attention_total: float = 0.0
    shared_expert_total: float = 0.0  # MoE shared experts, all MoE layers

    @property
    def non_expert(self) -> float:
        return self.total - self.expert_total


def _attention_params(m: ModelSpec) -> float:
    h = float(m.hidden or 0)
    if m.attention == "mla":
        assert m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
        d_nope = float(m.qk_nope_head_dim or 0)
        d_rope = float(m.qk_rope_head_dim)
        d_v = float(m.v_head_dim or m.head_dim)
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * m.heads * (d_nope + d_rope)
        else:
            q = h * m.heads * (d_nope + d_rope)
        kv = h * (m.kv_lora_rank + d_rope) + m.kv_lora_rank + m.kv_lora_rank * m.heads * (d_nope + d_v)
        return q + kv + m.heads * d_v * h
    q = h * m.heads * m.head_dim
    kv = 2 * h * m.kv_heads * m.head_dim
    o = m.heads * m.head_dim * h
    bias = (m.heads + 2 * m.kv_heads) * m.head_dim if m.qkv_bias else 0
    o_bias = h if m.o_bias else 0.0
    sinks = m.heads if m.attention_sinks else 0
    return q + kv + o + bias + o_bias + sinks


def param_counts(model: ModelSpec) -> ParamCounts:
    """Count parameters; declared ``params``/``active_params`` take precedence."""
    moe_layers = model.moe_layer_count
    if model.params is not None:
        total = float(model.params)
        active = float(model.active_params or model.params)
        expert_total = 0.0
        per_expert = 0.0
        if model.is_moe and model.active_params is not None and moe_layers:
            # Spread the routed-expert difference evenly: total - active =
            # moe_layers·(E - k)·per_expert.
            per_expert = (total - active) / (moe_layers * (model.experts - model.experts_per_token))
            expert_total = per_expert * moe_layers * model.experts
        return ParamCounts(
            total=total,
            active=active,
            expert_total=expert_total,
            per_expert_per_layer=per_expert,
            moe_layers=moe_layers,
            declared=True,
            attention_total=model.layers * (_attention_params(model) + 2.0 * model.hidden) if model.hidden else 0.0,
        )
    assert model.hidden and model.intermediate and model.vocab
    h = float(model.hidden)
    attn = _attention_params(model) + 2 * h  # + the two RMSNorms
    dense_mlp = 3 * h * model.intermediate
    embed = model.vocab * h * (1 if model.tie_embeddings else 2) + h
    if model.is_moe:
        assert model.moe_intermediate
        per_expert = 3 * h * model.moe_intermediate + ((2 * model.moe_intermediate + h) if model.expert_bias else 0)
        router = h * model.experts + (model.experts if model.expert_bias else 0)
        shared = model.shared_experts * per_expert
        moe_total = model.experts * per_expert + shared + router
        moe_active = model.experts_per_token * per_expert + shared + router
        dense_layers = model.layers - moe_layers
        total = embed + model.layers * attn + dense_layers * dense_mlp + moe_layers * moe_total
        active = embed + model.layers * attn + dense_layers * dense_mlp + moe_layers * moe_active
        expert_total = moe_layers * model.experts * per_expert
        shared_total = moe_layers * shared
    else:
        shared_total = 0.0
        per_expert = 0.0
        total = active = embed + model.layers * (attn + dense_mlp)
        expert_total = 0.0
    return ParamCounts(
        total=total,
        active=active,
        expert_total=expert_total,
        per_expert_per_layer=per_expert,
        moe_layers=moe_layers,
        declared=False,
        attention_total=model.layers * attn,
        shared_expert_total=shared_total,
    )
