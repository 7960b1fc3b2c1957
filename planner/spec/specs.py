"""Frozen hardware and model specs, validated on load.

Numbers are in SI base units: bytes, bytes/s, FLOP/s, watts, USD.  Datasheet
capacities and bandwidths are decimal (1 GB = 1e9 bytes).  FLOP/s are DENSE
tensor-core rates; never the 2:4 structured-sparsity figure.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.errors import CatalogError, validation_message

__all__ = ["ATTENTION_LAYER_KINDS", "CUDA_VISIBLE_RATIO", "MAX_ATTENTION_PATTERN", "MAX_SPEC_FLOAT", "MAX_SPEC_INT",
           "AttentionLayerKind", "DenseFlops", "GpuSpec", "ModelSpec"]

# Bounds on every spec number (an inline spec can come from a share link):
# shapes fit in int32 as in every framework (the largest real ones, vocab
# ~256k and 10M-token contexts, are far below); rates, capacities, prices and
# parameter counts stay under 1e20 (the largest catalog figure, ~1e16 FLOP/s,
# is 10,000× below), so no product the planner forms can overflow a float.
MAX_SPEC_INT = 2**31 - 1
MAX_SPEC_FLOAT = 1e20

PosFloat = Annotated[float, Field(gt=0, le=MAX_SPEC_FLOAT, allow_inf_nan=False)]
PosInt = Annotated[int, Field(ge=1, le=MAX_SPEC_INT)]
NonNegInt = Annotated[int, Field(ge=0, le=MAX_SPEC_INT)]
SpecId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9][a-z0-9._-]*$")]
# Other names a catalog entry answers to (case-insensitively), e.g. deepseek-r1-0528.
Aliases = Annotated[tuple[SpecId, ...], Field(max_length=16)]

# What one attention layer keeps in its KV cache: "full" the whole context,
# "sliding" the last ``sliding_window`` tokens (gpt-oss, Mistral), "chunked" the
# tokens of its own ``attention_chunk_size``-token chunk (Llama 4's local layers).
AttentionLayerKind = Literal["full", "sliding", "chunked"]
ATTENTION_LAYER_KINDS: tuple[str, ...] = ("full", "sliding", "chunked")
# The repeating unit of per-layer attention kinds stays short (gpt-oss: 2, Llama 4: 4).
MAX_ATTENTION_PATTERN = 64


class DenseFlops(BaseModel):
    """Dense tensor-core FLOP/s per compute format (None: the chip lacks it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bf16: PosFloat
    fp16: PosFloat | None = None
    fp32: PosFloat | None = None
    fp8: PosFloat | None = None
    int8: PosFloat | None = None
    fp4: PosFloat | None = None

    def get(self, dtype: str) -> float | None:
        value: float | None = getattr(self, dtype)
        return value


# What the driver may report against the datasheet's capacity: a few percent under (the
# driver's reservation) to 7.4% over (a GiB-labelled "GB": B200's "180 GB" is 183,359 MiB).
CUDA_VISIBLE_RATIO = (0.9, 1.1)


class GpuSpec(BaseModel):
    """One accelerator (or a CPU host with nominal figures)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9._-]*$")]
    name: str
    aliases: Aliases = ()
    vendor: str = ""
    # The chip generation (hopper, blackwell, cdna3, ...): what a source states per
    # generation is read against it (planner.validate.names.row_kv_dtype).  "": not stated.
    architecture: Annotated[str, Field(pattern=r"^[a-z0-9]*$", max_length=32)] = ""
    hbm_bytes: PosFloat
    # Device memory as the CUDA runtime reports it (cudaMemGetInfo total, what
    # torch.cuda.mem_get_info and vLLM's gpu_memory_utilization budget against):
    # binary-unit capacity less what the driver reserves.  None: use hbm_bytes.
    cuda_visible_hbm_bytes: PosFloat | None = None
    hbm_bytes_per_s: PosFloat
    flops_per_s: DenseFlops
    scaleup_bytes_per_s: PosFloat | None = None
    # GPUs one NVLink (or equivalent) domain joins: the 8 of an HGX board, or the
    # 72 of a GB200/GB300 NVL72 rack across its 18 compute trays of 4.
    scaleup_domain_gpus: PosInt = 1
    gpus_per_node: PosInt = 8
    pcie_bytes_per_s: PosFloat
    # Scale-out (RDMA NIC) bandwidth per GPU, one direction: what collectives between
    # nodes run over (e.g. one 400 Gb/s ConnectX-7 per GPU = 50e9 B/s).  None: one
    # 400 Gb/s NIC per GPU (planner.physics.link.RDMA_BYTES_PER_S).
    scaleout_bytes_per_s: PosFloat | None = None
    tdp_w: PosFloat
    usd_per_gpu_hour: PosFloat
    source_url: str = ""
    source_note: str = ""

    @model_validator(mode="after")
    def _check(self) -> GpuSpec:
        if self.scaleup_domain_gpus > 1 and self.scaleup_bytes_per_s is None:
            raise ValueError(
                "scaleup_domain_gpus > 1 needs scaleup_bytes_per_s (the NVLink or "
                "equivalent bandwidth)"
            )
        if self.cuda_visible_hbm_bytes is not None and not (
                CUDA_VISIBLE_RATIO[0] <= self.cuda_visible_hbm_bytes / self.hbm_bytes <= CUDA_VISIBLE_RATIO[1]):
            raise ValueError(
                f"cuda_visible_hbm_bytes ({self.cuda_visible_hbm_bytes:.4g}) must be {CUDA_VISIBLE_RATIO[0]}–"
                f"{CUDA_VISIBLE_RATIO[1]} × hbm_bytes ({self.hbm_bytes:.4g}): the driver's figure for the same "
                "memory, in bytes (a datasheet's GiB read as GB is 7.4% above it)"
            )
        if self.scaleup_domain_gpus > self.gpus_per_node and self.scaleup_domain_gpus % self.gpus_per_node:
            raise ValueError(
                "scaleup_domain_gpus beyond one node must be a whole number of nodes "
                f"({self.scaleup_domain_gpus} GPUs, {self.gpus_per_node} per node)"
            )
        return self

    @property
    def scaleup_nodes(self) -> int:
        """Nodes one scale-up domain spans (18 trays of an NVL72 rack; 1 for an HGX board)."""
        return max(1, self.scaleup_domain_gpus // self.gpus_per_node)


class ModelSpec(BaseModel):
    """A decoder-only transformer, as its published config.json describes it.

    ``params`` / ``active_params`` may be declared for nominal shapes (the seeds'
    "8B" is exactly 8e9 parameters); otherwise they are counted from the shapes.
    ``published_params`` is the figure the model card states, kept for checking.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9._-]*$")]
    name: str = ""
    aliases: Aliases = ()
    layers: PosInt
    heads: PosInt
    kv_heads: PosInt
    head_dim: PosInt
    hidden: PosInt | None = None
    intermediate: PosInt | None = None
    vocab: PosInt | None = None
    tie_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False  # output-projection bias (gpt-oss attention_bias covers q, k, v and o)
    # Learned per-head sink logit (gpt-oss): ``heads`` parameters per layer, no cached token.
    attention_sinks: bool = False
    attention: Literal["gqa", "mla"] = "gqa"
    # Per-layer attention kinds, repeated over the layers: layer i is
    # attention_pattern[i % len(attention_pattern)].  gpt-oss: (sliding, full);
    # Llama 4: (chunked, chunked, chunked, full) (every 4th layer global, NoPE).
    attention_pattern: Annotated[tuple[AttentionLayerKind, ...],
                                 Field(min_length=1, max_length=MAX_ATTENTION_PATTERN)] = ("full",)
    sliding_window: PosInt | None = None  # tokens a "sliding" layer attends to (and keeps)
    attention_chunk_size: PosInt | None = None  # tokens per chunk of a "chunked" layer
    # MLA (DeepSeek-V2/V3): latent KV of kv_lora_rank + qk_rope_head_dim per layer.
    kv_lora_rank: PosInt | None = None
    q_lora_rank: PosInt | None = None
    qk_rope_head_dim: PosInt | None = None
    qk_nope_head_dim: PosInt | None = None
    v_head_dim: PosInt | None = None
    # Mixture of experts.
    experts: NonNegInt = 0
    experts_per_token: NonNegInt = 0
    shared_experts: NonNegInt = 0
    moe_intermediate: PosInt | None = None
    dense_layers: NonNegInt = 0  # leading layers with a dense MLP (first_k_dense_replace)
    # Every moe_layer_step-th layer after the dense ones is MoE, the others dense
    # (Llama 4 Maverick interleave_moe_layer_step = 2: layers 1, 3, 5, ...).
    moe_layer_step: PosInt = 1
    expert_bias: bool = False  # expert MLPs carry biases (gpt-oss)
    # Multi-token-prediction modules in the checkpoint (config.json num_nextn_predict_layers;
    # DeepSeek-V3/R1: 1): what speculative.method 'mtp' drafts with, 0: none.
    mtp_layers: NonNegInt = 0
    # Declared counts (nominal shapes) and the published figure.
    params: PosFloat | None = None
    active_params: PosFloat | None = None
    published_params: PosFloat | None = None
    published_active_params: PosFloat | None = None
    max_context_tokens: PosInt | None = None
    source_url: str = ""
    source_note: str = ""

    @property
    def attention_kind(self) -> str:
        """What the attention is called: MLA, MHA (a KV head per query head), MQA (one KV head) or GQA."""
        if self.attention == "mla":
            return "MLA"
        if self.kv_heads == self.heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def hidden_width(self) -> int:
        """The residual stream's width h: ``hidden``, else heads × head_dim."""
        return self.hidden or self.heads * self.head_dim

    @property
    def moe_layer_count(self) -> int:
        """MoE layers: those at or after ``dense_layers`` whose index + 1 is a multiple of ``moe_layer_step``."""
        if not self.is_moe:
            return 0
        return sum(1 for i in range(self.dense_layers, self.layers) if (i + 1) % self.moe_layer_step == 0)

    def layer_attention(self, layer: int) -> AttentionLayerKind:
        """The attention kind of layer ``layer`` (0-based)."""
        return self.attention_pattern[layer % len(self.attention_pattern)]

    @property
    def attention_layer_counts(self) -> dict[str, int]:
        """Layers of each attention kind (full, sliding, chunked), the kinds present only."""
        out: dict[str, int] = {}
        for i in range(self.layers):
            kind = self.layer_attention(i)
            out[kind] = out.get(kind, 0) + 1
        return out

    @property
    def has_windowed_layers(self) -> bool:
        """True when some layer keeps less than the whole context (sliding or chunked)."""
        return any(k != "full" for k in self.attention_pattern[: self.layers])

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"heads ({self.heads}) must be divisible by kv_heads ({self.kv_heads})"
            )
        if self.attention == "mla":
            for key in ("kv_lora_rank", "qk_rope_head_dim"):
                if getattr(self, key) is None:
                    raise ValueError(f"{key} is required when attention is 'mla'")
        if self.is_moe:
            if not 1 <= self.experts_per_token <= self.experts:
                raise ValueError(
                    f"experts_per_token ({self.experts_per_token}) must be between 1 "
                    f"and experts ({self.experts})"
                )
            if self.dense_layers > self.layers:
                raise ValueError("dense_layers cannot exceed layers")
            if self.moe_layer_count == 0:
                raise ValueError(
                    f"no MoE layer: dense_layers ({self.dense_layers}) and moe_layer_step "
                    f"({self.moe_layer_step}) leave none of the {self.layers} layers to the experts"
                )
        elif self.experts_per_token or self.shared_experts:
            raise ValueError("experts_per_token/shared_experts need experts > 0")
        if "sliding" in self.attention_pattern and self.sliding_window is None:
            raise ValueError("sliding_window is required when attention_pattern has a 'sliding' layer")
        if "chunked" in self.attention_pattern and self.attention_chunk_size is None:
            raise ValueError("attention_chunk_size is required when attention_pattern has a 'chunked' layer")
        if self.params is None:
            missing = [k for k in ("hidden", "intermediate", "vocab") if getattr(self, k) is None]
            if self.is_moe and self.moe_intermediate is None:
                missing.append("moe_intermediate")
            if missing:
                raise ValueError(
                    "give params, or the shapes to count them from: missing "
                    + ", ".join(missing)
                )
        if self.active_params is not None and self.params is not None:
            if self.active_params > self.params:
                raise ValueError("active_params cannot exceed params")
        return self

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any], *, id: str | None = None) -> ModelSpec:
        """Build a spec from a Hugging Face ``config.json`` (Llama, Mistral, Qwen2/3,
        Mixtral, Qwen3-MoE, DeepSeek-V2/V3).  A missing or contradictory key raises
        :class:`CatalogError` naming the key."""
        from planner.spec.hf_import import spec_kwargs_from_hf_config

        kwargs = spec_kwargs_from_hf_config(cfg)
        if id is not None:
            kwargs["id"] = id
        try:
            return cls(**kwargs)
        except ValidationError as exc:
            raise CatalogError(f"config.json: {validation_message(exc)}") from None


