"""Hugging Face ``config.json`` -> ModelSpec keyword arguments.

Supported ``model_type`` families: llama, mistral, qwen2, qwen3 (dense),
mixtral, qwen2_moe, qwen3_moe, glm4_moe (MoE), deepseek_v2, deepseek_v3, kimi_k2
(MLA + MoE), llama4 / llama4_text (interleaved MoE, chunked attention on the RoPE
layers; a multimodal config's ``text_config``), gpt_oss (MoE, alternating sliding-
window and full layers, attention sinks, biases).
Every error names the config key that is missing or contradicts another.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from planner.errors import CatalogError
from planner.io.jsonfile import read_json
from planner.spec.specs import MAX_ATTENTION_PATTERN, MAX_SPEC_INT

__all__ = ["MAX_CONFIG_INT", "SUPPORTED_MODEL_TYPES", "load_hf_config", "spec_kwargs_from_hf_config"]

_DENSE = {"llama", "mistral", "qwen2", "qwen3"}
_MOE = {"mixtral", "qwen2_moe", "qwen3_moe", "glm4_moe"}
_MLA = {"deepseek_v2", "deepseek_v3", "kimi_k2"}
_LLAMA4 = {"llama4", "llama4_text"}
_GPT_OSS = {"gpt_oss"}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_DENSE | _MOE | _MLA | _LLAMA4 | _GPT_OSS))
# Largest shape a config.json may give: the ModelSpec bound (int32, as frameworks
# store shapes; real values such as vocab ~256k or 10M-token contexts are far below).
MAX_CONFIG_INT = MAX_SPEC_INT


def _req(cfg: dict[str, Any], key: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise CatalogError(f"config.json: missing key '{key}'")
    return cfg[key]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(cfg: dict[str, Any], key: str, value: Any, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_CONFIG_INT:
        kind = "a positive integer" if low > 0 else "a non-negative integer"
        raise CatalogError(f"config.json: '{key}' must be {kind} up to {MAX_CONFIG_INT}, got {_shown(value)}")
    return int(value)


def _pos_int(cfg: dict[str, Any], key: str, default: Any = None) -> int:
    value = cfg.get(key, default) if default is not None else _req(cfg, key)
    return _int(cfg, key, value, low=1)


def _opt_int(cfg: dict[str, Any], key: str, *, low: int) -> int | None:
    value = cfg.get(key)
    return None if value is None else _int(cfg, key, value, low=low)


def _name(cfg: dict[str, Any], model_type: str) -> str:
    name = cfg.get("_name_or_path")
    if isinstance(name, str) and name.strip():
        return name.strip()[:200]
    arch = cfg.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str) and arch[0].strip():
        return arch[0].strip()[:200]
    return model_type


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return slug or "imported-model"


def spec_kwargs_from_hf_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Map a config.json dict to ModelSpec fields."""
    if not isinstance(cfg, dict):
        raise CatalogError("config.json: expected a JSON object")
    model_type = _req(cfg, "model_type")
    if not isinstance(model_type, str) or model_type not in SUPPORTED_MODEL_TYPES:
        raise CatalogError(
            f"config.json: model_type {_shown(model_type)} is not supported "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    if model_type == "llama4":
        # The multimodal wrapper: the language model's shapes are under text_config.
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise CatalogError("config.json: missing key 'text_config' (a llama4 config keeps its shapes there)")
        outer = {k: cfg[k] for k in ("_name_or_path", "architectures") if k in cfg}
        cfg = {**text, **outer}
    hidden = _pos_int(cfg, "hidden_size")
    heads = _pos_int(cfg, "num_attention_heads")
    layers = _pos_int(cfg, "num_hidden_layers")
    vocab = _pos_int(cfg, "vocab_size")
    kv_heads = _pos_int(cfg, "num_key_value_heads", heads)
    if heads % kv_heads:
        raise CatalogError(
            f"config.json: 'num_attention_heads' ({heads}) is not divisible by "
            f"'num_key_value_heads' ({kv_heads})"
        )
    if cfg.get("head_dim") is not None:
        head_dim = _pos_int(cfg, "head_dim")
    else:
        if hidden % heads:
            raise CatalogError(
                f"config.json: 'hidden_size' ({hidden}) is not divisible by "
                f"'num_attention_heads' ({heads}) and no 'head_dim' is given"
            )
        head_dim = hidden // heads
    name = _name(cfg, model_type)
    out: dict[str, Any] = {
        "id": _slug(str(name).split("/")[-1]),
        "name": str(name),
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "hidden": hidden,
        "vocab": vocab,
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "qkv_bias": bool(cfg.get("attention_bias", model_type in {"qwen2", "qwen2_moe"})),
        # gpt-oss's attention_bias covers the output projection too; GLM-4.5's and Qwen2's do not.
        "o_bias": bool(cfg.get("attention_bias", False)) and model_type in _GPT_OSS,
        "max_context_tokens": _opt_int(cfg, "max_position_embeddings", low=1),
        "source_note": f"imported from a config.json (model_type {model_type})",
    }
    if model_type in _DENSE:
        out["intermediate"] = _pos_int(cfg, "intermediate_size")
    elif model_type == "mixtral":
        out["intermediate"] = _pos_int(cfg, "intermediate_size")
        out["moe_intermediate"] = out["intermediate"]
        out["experts"] = _pos_int(cfg, "num_local_experts")
        out["experts_per_token"] = _pos_int(cfg, "num_experts_per_tok")
    elif model_type in _LLAMA4:
        out.update(_llama4_kwargs(cfg, layers))
    elif model_type in _GPT_OSS:
        out.update(_gpt_oss_kwargs(cfg, layers))
    elif model_type == "glm4_moe":
        out["intermediate"] = _pos_int(cfg, "intermediate_size")
        out["moe_intermediate"] = _pos_int(cfg, "moe_intermediate_size")
        out["experts"] = _pos_int(cfg, "n_routed_experts")
        out["experts_per_token"] = _pos_int(cfg, "num_experts_per_tok")
        out["shared_experts"] = _opt_int(cfg, "n_shared_experts", low=0) or 0
        out["dense_layers"] = _opt_int(cfg, "first_k_dense_replace", low=0) or 0
    elif model_type in {"qwen2_moe", "qwen3_moe"}:
        out["intermediate"] = _pos_int(cfg, "intermediate_size")
        out["moe_intermediate"] = _pos_int(cfg, "moe_intermediate_size")
        out["experts"] = _pos_int(cfg, "num_experts")
        out["experts_per_token"] = _pos_int(cfg, "num_experts_per_tok")
        if cfg.get("shared_expert_intermediate_size"):
            # Qwen2-MoE's shared expert is one MLP of this width.
            share = _pos_int(cfg, "shared_expert_intermediate_size")
            if share % out["moe_intermediate"]:
                raise CatalogError(
                    "config.json: 'shared_expert_intermediate_size' is not a multiple of "
                    "'moe_intermediate_size'"
                )
            out["shared_experts"] = share // out["moe_intermediate"]
        dense = cfg.get("mlp_only_layers")
        if dense is not None:
            if not isinstance(dense, list) or any(isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < layers
                                                  for x in dense):
                raise CatalogError(
                    f"config.json: 'mlp_only_layers' must be a list of layer indices below {layers}, "
                    f"got {_shown(dense)}")
            if dense:
                out["dense_layers"] = len(set(dense))
    else:  # MLA
        out["attention"] = "mla"
        out["kv_lora_rank"] = _pos_int(cfg, "kv_lora_rank")
        out["qk_rope_head_dim"] = _pos_int(cfg, "qk_rope_head_dim")
        out["qk_nope_head_dim"] = _pos_int(cfg, "qk_nope_head_dim")
        out["v_head_dim"] = _pos_int(cfg, "v_head_dim")
        if cfg.get("q_lora_rank") is not None:
            out["q_lora_rank"] = _pos_int(cfg, "q_lora_rank")
        out["head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
        out["intermediate"] = _pos_int(cfg, "intermediate_size")
        out["moe_intermediate"] = _pos_int(cfg, "moe_intermediate_size")
        out["experts"] = _pos_int(cfg, "n_routed_experts")
        out["experts_per_token"] = _pos_int(cfg, "num_experts_per_tok")
        out["shared_experts"] = _opt_int(cfg, "n_shared_experts", low=0) or 0
        out["dense_layers"] = _opt_int(cfg, "first_k_dense_replace", low=0) or 0
        if cfg.get("moe_layer_freq", 1) != 1:
            raise CatalogError("config.json: 'moe_layer_freq' other than 1 is not supported")
    if model_type in _MLA or model_type == "glm4_moe":
        # The checkpoint's multi-token-prediction modules (speculative.method 'mtp' drafts with them).
        out["mtp_layers"] = _opt_int(cfg, "num_nextn_predict_layers", low=0) or 0
    if out.get("experts") and out["experts_per_token"] > out["experts"]:
        raise CatalogError(
            f"config.json: 'num_experts_per_tok' ({out['experts_per_token']}) exceeds the "
            f"number of experts ({out['experts']})"
        )
    return out


def _period(kinds: list[str], key: str) -> tuple[str, ...]:
    """The shortest repeating unit of a per-layer list (ModelSpec.attention_pattern)."""
    for p in range(1, len(kinds) + 1):
        if all(kinds[i] == kinds[i % p] for i in range(len(kinds))):
            if p > MAX_ATTENTION_PATTERN:
                raise CatalogError(f"config.json: '{key}' does not repeat within {MAX_ATTENTION_PATTERN} layers")
            return tuple(kinds[:p])
    raise AssertionError("unreachable")  # p = len(kinds) always repeats


def _layer_list(cfg: dict[str, Any], key: str, layers: int, allowed: set[Any]) -> list[Any]:
    value = cfg[key]
    if not isinstance(value, list) or len(value) != layers or any(
            isinstance(x, bool) or x not in allowed for x in value):
        raise CatalogError(
            f"config.json: '{key}' must list one of {sorted(allowed, key=str)} per layer ({layers}), got {_shown(value)}")
    return value


def _llama4_kwargs(cfg: dict[str, Any], layers: int) -> dict[str, Any]:
    """Llama 4: routed experts of intermediate_size plus one shared expert on every
    interleave_moe_layer_step-th layer, the dense MLP of intermediate_size_mlp elsewhere;
    the RoPE layers (no_rope_layers = 1) use chunked attention, the NoPE ones are global."""
    out: dict[str, Any] = {
        "moe_intermediate": _pos_int(cfg, "intermediate_size"),
        "intermediate": _pos_int(cfg, "intermediate_size_mlp"),
        "experts": _pos_int(cfg, "num_local_experts"),
        "experts_per_token": _pos_int(cfg, "num_experts_per_tok"),
        "shared_experts": 1,
        "moe_layer_step": _pos_int(cfg, "interleave_moe_layer_step", 1),
    }
    step = out["moe_layer_step"]
    moe_layers = cfg.get("moe_layers")
    if moe_layers is not None and moe_layers != list(range(step - 1, layers, step)):
        raise CatalogError(f"config.json: 'moe_layers' {_shown(moe_layers)} is not every "
                           f"'interleave_moe_layer_step' ({step})-th layer")
    if cfg.get("no_rope_layers") is not None:
        rope = _layer_list(cfg, "no_rope_layers", layers, {0, 1})
    else:
        interval = _pos_int(cfg, "no_rope_layer_interval", 4)
        rope = [int((i + 1) % interval != 0) for i in range(layers)]
    chunk = _opt_int(cfg, "attention_chunk_size", low=1)
    if chunk is not None:
        out["attention_chunk_size"] = chunk
        out["attention_pattern"] = _period(["chunked" if r else "full" for r in rope], "no_rope_layers")
    return out


def _gpt_oss_kwargs(cfg: dict[str, Any], layers: int) -> dict[str, Any]:
    """gpt-oss: experts of intermediate_size with biases, layer_types alternating
    sliding_attention (sliding_window tokens) and full_attention, a sink logit per head."""
    top_k = cfg.get("num_experts_per_tok", cfg.get("experts_per_token"))
    out: dict[str, Any] = {
        "intermediate": _pos_int(cfg, "intermediate_size"),
        "moe_intermediate": _pos_int(cfg, "intermediate_size"),
        "experts": _pos_int(cfg, "num_local_experts"),
        "experts_per_token": _int(cfg, "num_experts_per_tok", _req({"num_experts_per_tok": top_k},
                                                                      "num_experts_per_tok"), low=1),
        "expert_bias": True,
        "attention_sinks": True,
    }
    if cfg.get("layer_types") is not None:
        types = _layer_list(cfg, "layer_types", layers, {"sliding_attention", "full_attention"})
        kinds = ["sliding" if t == "sliding_attention" else "full" for t in types]
        if "sliding" in kinds:
            out["sliding_window"] = _pos_int(cfg, "sliding_window")
        out["attention_pattern"] = _period(kinds, "layer_types")
    return out


def load_hf_config(path: str | Path) -> dict[str, Any]:
    """Read a config.json file; a JSON error names the file."""
    data: dict[str, Any] = read_json(path, error=CatalogError)
    return data
