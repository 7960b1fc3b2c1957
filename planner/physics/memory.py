"""Memory: weight bytes, KV-cache bytes, the KV budget and max concurrency.

The seeds' equations:

* weight bytes = parameters × bytes per weight
* KV bytes/token = 2 × n_layers × n_kv_heads × head_dim × dtype_bytes   (GQA/MHA/MQA)
* KV bytes/token = n_layers × (kv_lora_rank + qk_rope_head_dim) × dtype_bytes   (MLA)
* with sliding-window or chunked layers (gpt-oss, Llama 4) KV per sequence is the
  ledger of planner.physics.kvledger (each such layer holds at most its window), and
  KV bytes/token at a context L is that ledger / L
* KV budget per GPU = HBM − weights per GPU − reserved        (seeds' accounting)
* KV budget per GPU, by engine family (``serving.engine``), V = the CUDA-visible bytes
  (an H100 80 GB exposes 85.05e9, not 80e9):
    vLLM    ``gpu_memory_utilization`` u:    u × V − weights − activation peak − non-torch
    TRT-LLM ``kv_cache_free_gpu_mem_fraction`` u of the memory free after the engine loads:
                                             u × (V − weights − activation peak − non-torch)
    SGLang  ``mem_fraction_static`` u (weights + KV pool; activations outside it):
                                             u × V − weights
* max sequences = KV budget per GPU / KV bytes per sequence per GPU

Functions accept numpy arrays wherever a number is expected.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.physics.kvledger import kv_bytes_per_token_at
from planner.spec.params import param_counts
from planner.spec.precision import bytes_per_kv_element, bytes_per_weight
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = [
    "ACTIVATION_BYTES_PER_TOKEN_FACTOR",
    "ACTIVATION_ELEMENT_BYTES",
    "LOGIT_ELEMENT_BYTES",
    "MAX_PROFILED_LOGIT_ROWS",
    "CUDA_GRAPH_BYTES",
    "DEFAULT_NON_TORCH_BYTES",
    "DEFAULT_MLP_RATIO",
    "DEFAULT_VOCAB",
    "ENGINE_FAMILIES",
    "PROFILE_DECODE_TOKENS",
    "activation_peak_bytes",
    "activation_profile_tokens",
    "contiguous_reservation_bytes",
    "dp_replicated_params",
    "expert_weight_bytes",
    "internal_fragmentation",
    "kv_budget_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu",
    "kv_heads_per_gpu",
    "engine_hbm_bytes",
    "max_sequences",
    "paged_reservation_bytes",
    "prefix_sharing_bytes",
    "weight_bytes",
    "weight_bytes_per_gpu",
]

# Engine families whose KV budget accounting kv_budget_bytes knows (serving.engine).
ENGINE_FAMILIES: tuple[str, ...] = ("vllm", "trtllm", "sglang")
# vLLM-style budgeting constants (assumed defaults).
# Non-torch memory: CUDA context, NCCL buffers, allocator slack; vLLM's profiler
# typically reports 0.5-1.5 GB per GPU.
DEFAULT_NON_TORCH_BYTES = 1.0e9
# CUDA graphs captured for decode batch sizes; vLLM logs ~0.3-1 GB per GPU.
CUDA_GRAPH_BYTES = 0.5e9
# Peak activation bytes per batched token ≈ factor × (hidden + intermediate/tp)
# × activation bytes (the profile run's MLP intermediate and residual stream,
# plus fp32 logits for the sampled tokens, counted separately).
ACTIVATION_BYTES_PER_TOKEN_FACTOR = 4.0
# Activations are held in 16-bit (bf16/fp16) during the forward pass.
ACTIVATION_ELEMENT_BYTES = 2.0
# Logits are materialized in fp32 for sampling.
LOGIT_ELEMENT_BYTES = 4.0
# The profile run samples at most this many sequences' logits at once (vLLM's
# sampler warm-up caps the dummy batch at 1024 sequences; assumed here).
MAX_PROFILED_LOGIT_ROWS = 1024.0
# Vocabulary assumed when a model spec omits it (Llama-2's 32,000 tokens).
DEFAULT_VOCAB = 32000
# MLP width assumed when a model spec omits it: the classic 4 × hidden.
DEFAULT_MLP_RATIO = 4.0
# vLLM's profile run batches the per-iteration token budget (max_num_batched_tokens
# = serving.chunk_tokens) plus one decode token for each of max_num_seqs sequences
# (vLLM's default max_num_seqs = 256).
PROFILE_DECODE_TOKENS = 256


def weight_bytes(model: ModelSpec, weights_dtype: str) -> float:
    """W = parameters × bytes per weight (all GPUs of a replica together)."""
    return param_counts(model).total * bytes_per_weight(weights_dtype)


def expert_weight_bytes(model: ModelSpec, weights_dtype: str) -> float:
    """Bytes of the routed experts alone (0 for dense models)."""
    return param_counts(model).expert_total * bytes_per_weight(weights_dtype)


def dp_replicated_params(model: ModelSpec, *, ep: ArrayLike = 1) -> NDArray[np.float64] | float:
    """Parameters data-parallel attention replicates on every rank: the attention
    projections (all layers), and with EP > 1 the shared experts too (SGLang's DeepEP
    path and TensorRT-LLM's attention-DP MoE run them unsharded on each rank's own
    tokens; with EP = 1 the MoE layer, shared experts included, is TP over the group)."""
    pc = param_counts(model)
    out = pc.attention_total + np.where(np.asarray(ep, float) > 1, pc.shared_expert_total, 0.0)
    return float(out) if np.ndim(out) == 0 else out


def weight_bytes_per_gpu(
    *, model: ModelSpec, weights_dtype: str, tp: ArrayLike = 1, pp: ArrayLike = 1, ep: ArrayLike = 1,
    dp_attention: ArrayLike = False, redundant_experts: ArrayLike = 0,
) -> NDArray[np.float64] | float:
    """Weights one GPU holds (the replica has TP × PP GPUs; EP lays the experts over them):

        (W_rest / TP + W_replicated + W_experts × (E + R) / E / TP) / PP

    W_replicated: with data-parallel attention, the attention weights (and with EP > 1 the
    shared experts) on every rank (``dp_replicated_params``), else 0 (sharded over TP
    with the rest).  Routed experts: E/EP per GPU, each sharded over TP/EP GPUs, so
    1/TP of them whatever EP is, plus the R redundant copies (EPLB).
    """
    bpw = bytes_per_weight(weights_dtype)
    w = weight_bytes(model, weights_dtype)
    we = expert_weight_bytes(model, weights_dtype)
    tp_a, pp_a = np.asarray(tp, float), np.asarray(pp, float)
    dp = np.asarray(dp_attention, bool)
    rep = np.where(dp, np.asarray(dp_replicated_params(model, ep=ep), float) * bpw, 0.0)
    slots = (model.experts + np.asarray(redundant_experts, float)) / model.experts if model.is_moe else 1.0
    out = ((w - we - rep) / tp_a + rep + we * slots / tp_a) / pp_a
    return float(out) if np.ndim(out) == 0 else out


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str, context_tokens: ArrayLike | None = None) -> float:
    """KV bytes per token for the whole model.

    GQA: 2 × n_layers × n_kv_heads × head_dim × dtype_bytes (the 2 is K and V).
    MLA: n_layers × (kv_lora_rank + qk_rope_head_dim) × dtype_bytes.
    With windowed layers and ``context_tokens`` given: the ledger's KV per sequence
    at that context / context (planner.physics.kvledger); without a context, the
    figure with every layer full (what a token costs while the windows still grow).
    Models without windowed layers ignore ``context_tokens``.
    """
    if context_tokens is not None and model.has_windowed_layers:
        if np.ndim(context_tokens) != 0:
            raise ValueError("kv_bytes_per_token takes one context; use kv_bytes_per_token_per_gpu for arrays")
        return float(kv_bytes_per_token_at(model, kv_dtype, context_tokens))
    b = bytes_per_kv_element(kv_dtype)
    if model.attention == "mla":
        assert model.kv_lora_rank is not None and model.qk_rope_head_dim is not None
        return model.layers * (model.kv_lora_rank + model.qk_rope_head_dim) * b
    return 2 * model.layers * model.kv_heads * model.head_dim * b


def kv_heads_per_gpu(model: ModelSpec, tp: ArrayLike) -> NDArray[np.float64] | float:
    """KV heads each TP rank stores: ceil(n_kv_heads / TP); replicated once
    TP exceeds the KV head count.  MLA's latent is replicated on every rank."""
    tp_a = np.asarray(tp, float)
    if model.attention == "mla":
        out = np.ones_like(tp_a) * model.kv_heads
    else:
        out = np.ceil(model.kv_heads / tp_a)
    return float(out) if np.ndim(out) == 0 else out


def kv_bytes_per_token_per_gpu(
    *, model: ModelSpec, kv_dtype: str, tp: ArrayLike = 1, pp: ArrayLike = 1,
    context_tokens: ArrayLike | None = None,
) -> NDArray[np.float64] | float:
    """KV bytes per token on one GPU = KV/token × (KV heads per GPU / KV heads) / PP.

    ``context_tokens`` (arrays allowed): for a model with windowed layers the KV/token
    is the ledger's at that context (planner.physics.kvledger), so context × this is
    the sequence's KV on the GPU; ignored for models whose layers are all full."""
    frac = np.asarray(kv_heads_per_gpu(model, tp), float) / model.kv_heads
    if context_tokens is not None and model.has_windowed_layers:
        k: NDArray[np.float64] | float = np.asarray(kv_bytes_per_token_at(model, kv_dtype, context_tokens), float)
    else:
        k = kv_bytes_per_token(model, kv_dtype)
    out = k * frac / np.asarray(pp, float)
    return float(out) if np.ndim(out) == 0 else out


def activation_profile_tokens(chunk_tokens: int) -> int:
    """Tokens in the engine's profile forward pass = token budget + max_num_seqs decode tokens."""
    return chunk_tokens + PROFILE_DECODE_TOKENS


def activation_peak_bytes(
    *, model: ModelSpec, batched_tokens: ArrayLike, tp: ArrayLike = 1
) -> NDArray[np.float64] | float:
    """Forward-pass peak of the engine's profile run at its per-iteration token
    budget: tokens × factor × (hidden + intermediate/TP) × 2 bytes, plus fp32
    logits for one sampled token per sequence (≤ tokens) × vocab/TP, plus the
    CUDA-graph pool."""
    hidden = float(model.hidden_width)
    inter = float(model.moe_intermediate if model.is_moe and model.moe_intermediate
                  else (model.intermediate or DEFAULT_MLP_RATIO * hidden))
    if model.is_moe:
        inter *= model.experts_per_token
    tok = np.asarray(batched_tokens, float)
    tp_a = np.asarray(tp, float)
    act = tok * ACTIVATION_BYTES_PER_TOKEN_FACTOR * (hidden + inter / tp_a) * ACTIVATION_ELEMENT_BYTES
    logits = np.minimum(tok, MAX_PROFILED_LOGIT_ROWS) * float(model.vocab or DEFAULT_VOCAB) / tp_a * LOGIT_ELEMENT_BYTES
    out = act + logits + CUDA_GRAPH_BYTES
    return float(out) if np.ndim(out) == 0 else out


def kv_budget_bytes(
    *,
    gpu: GpuSpec,
    weight_bytes_per_gpu: ArrayLike,
    reserved_bytes: ArrayLike = 0.0,
    memory_utilization: float | None = None,
    activation_bytes: ArrayLike = 0.0,
    non_torch_bytes: float = DEFAULT_NON_TORCH_BYTES,
    engine: str = "vllm",
) -> NDArray[np.float64] | float:
    """KV bytes one GPU can hold (clipped at 0).

    Seeds' accounting (``memory_utilization`` None):
        HBM − weights per GPU − reserved
    Engine accounting (``memory_utilization`` = u, V = CUDA-visible HBM: the engines
    budget against what the CUDA runtime reports, not the datasheet's decimal
    figure: H100 80 GB: 85.05e9 bytes), by ``engine`` (one of ENGINE_FAMILIES):
        vllm   (gpu_memory_utilization):         u × V − weights − activation peak − non-torch
        trtllm (kv_cache_free_gpu_mem_fraction): u × (V − weights − activation peak − non-torch)
        sglang (mem_fraction_static):            u × V − weights
    """
    w = np.asarray(weight_bytes_per_gpu, float)
    if memory_utilization is None:
        out = gpu.hbm_bytes - w - np.asarray(reserved_bytes, float)
    elif engine == "trtllm":
        out = memory_utilization * (engine_hbm_bytes(gpu) - w - np.asarray(activation_bytes, float) - non_torch_bytes)
    elif engine == "sglang":
        out = memory_utilization * engine_hbm_bytes(gpu) - w
    elif engine == "vllm":
        out = memory_utilization * engine_hbm_bytes(gpu) - w - np.asarray(activation_bytes, float) - non_torch_bytes
    else:
        raise ValueError(f"engine {engine!r}: expected one of {', '.join(ENGINE_FAMILIES)}")
    out = np.maximum(out, 0.0)
    return float(out) if np.ndim(out) == 0 else out


def engine_hbm_bytes(gpu: GpuSpec) -> float:
    """The memory an engine's ``gpu_memory_utilization`` is a fraction of: the
    CUDA-visible bytes where the catalog gives them, else the datasheet figure."""
    return gpu.cuda_visible_hbm_bytes if gpu.cuda_visible_hbm_bytes is not None else gpu.hbm_bytes


def max_sequences(
    *, kv_budget_bytes: ArrayLike, kv_bytes_per_token_per_gpu: ArrayLike, context_tokens: ArrayLike,
    prefix_tokens: ArrayLike = 0.0, prefix_hit_rate: ArrayLike = 0.0,
) -> NDArray[np.float64] | float:
    """max sequences = max(budget / (context × K), (budget − prefix × K) / ((context − h × prefix) × K)), per GPU.

    A shared prefix's blocks are held once per replica (prefix sharing, seeds
    001: "one copy of the system prompt however many users share it"); the
    fraction h of sequences that hit it hold only their own tokens beyond it.
    The copy pays off once more than one running sequence shares it, hence the
    max (never fewer sequences than without sharing).  Without a prefix: KV
    budget / (context × KV bytes/token) (fractional: the seeds' 60 / 1.05 ≈
    57.2; floor it to admit)."""
    k = np.asarray(kv_bytes_per_token_per_gpu, float)
    budget = np.asarray(kv_budget_bytes, float)
    ctx = np.asarray(context_tokens, float)
    p = np.asarray(prefix_tokens, float)
    h = np.asarray(prefix_hit_rate, float)
    alone = budget / (ctx * k)
    with np.errstate(divide="ignore", invalid="ignore"):
        shared = np.where(h * p > 0, np.maximum(budget - p * k, 0.0) / ((ctx - h * p) * k), 0.0)
    out = np.maximum(alone, shared)
    return float(out) if np.ndim(out) == 0 else out


def contiguous_reservation_bytes(*, kv_bytes_per_token: float, max_len_tokens: int) -> float:
    """Pre-paged worst-case reservation per request = max_len × KV/token."""
    return kv_bytes_per_token * max_len_tokens


def paged_reservation_bytes(*, kv_bytes_per_token: float, used_tokens: int, block_tokens: int) -> float:
    """Paged allocation = ceil(used / block) × block × KV/token (waste ≤ one block)."""
    return math.ceil(used_tokens / block_tokens) * block_tokens * kv_bytes_per_token


def internal_fragmentation(*, reserved_tokens: int, used_tokens: int) -> float:
    """Fraction of a reservation holding nothing = 1 − used / reserved."""
    return 1.0 - used_tokens / reserved_tokens


def prefix_sharing_bytes(
    *, kv_bytes_per_token: float, prefix_tokens: int, sequences: int
) -> tuple[float, float]:
    """(unshared, shared) KV bytes of a common prefix: prefix × users × KV/token
    versus one copy, prefix × KV/token."""
    unshared = prefix_tokens * sequences * kv_bytes_per_token
    return unshared, prefix_tokens * kv_bytes_per_token
