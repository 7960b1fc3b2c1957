"""The result types of one replica's sections (roofline, memory, decode, prefill): SI units,
frozen; built by :mod:`planner.sizing.replica`, carried by the Plan."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["DecodeResult", "MemoryResult", "PrefillResult", "RooflineResult"]

_F = ConfigDict(frozen=True, extra="forbid")


class RooflineResult(BaseModel):
    model_config = _F
    compute_dtype: str
    peak_flops_per_s: float
    hbm_bytes_per_s: float
    ridge_flop_per_byte: float
    decode_intensity_flop_per_byte: float
    decode_attainable_flops_per_s: float
    decode_bound: Literal["memory", "compute"]
    prefill_intensity_flop_per_byte: float
    prefill_bound: Literal["memory", "compute"]


class MemoryResult(BaseModel):
    model_config = _F
    gpus_per_replica: int  # TP × PP
    nodes_per_replica: int = 1  # ⌈TP × PP / GPUs per node⌉
    hbm_bytes: float
    weight_bytes: float
    weight_bytes_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    context_tokens: int
    kv_bytes_per_sequence: float
    reserved_bytes: float
    activation_bytes: float
    kv_budget_bytes: float
    max_sequences: float
    fits: bool
    contiguous_reservation_bytes: float
    paged_reservation_bytes: float
    prefix_sharing_saved_bytes: float
    # Speculative decoding's drafter (planner.physics.draft; 0 with speculation off):
    # kv_budget_bytes is already net of its weights, max_sequences counts its KV.
    draft_name: str = ""
    draft_weight_bytes: float = 0.0
    draft_weight_bytes_per_gpu: float = 0.0
    draft_kv_bytes_per_token: float = 0.0
    draft_kv_bytes_per_token_per_gpu: float = 0.0


class DecodeResult(BaseModel):
    model_config = _F
    batch_size: int
    context_tokens: float
    step_s: float
    compute_s: float
    memory_s: float
    comm_s: float
    overhead_s: float
    itl_s: float
    tok_s_per_sequence: float
    tok_s_per_replica: float
    tok_s_per_gpu: float
    mbu: float
    mfu: float
    bound: Literal["memory", "compute"]
    speculative_tokens_per_pass: float
    speculative_speedup: float
    # Of comm_s: the MoE dispatch + combine over the EP group (0 at EP = 1 or with TP attention).
    all_to_all_s: float = 0.0


class PrefillResult(BaseModel):
    model_config = _F
    tokens: int
    cached_tokens: float
    time_s: float
    mfu: float
    bound: Literal["memory", "compute"]
    chunk_tokens: int
    chunks: int
    chunk_s: float
    chunk_iteration_s: float
    chunked_ttft_s: float
