"""The serving techniques' own arithmetic, as the seeds write it.

* MBU = bytes streamed per second / peak HBM bandwidth
* MFU = tokens/s × 2 × P / peak FLOP/s
* chunked prefill: iteration i = decode step + chunk i; TTFT = Σ_i iteration i
* static batching utilization = Σ outputs / (B × max output)
* speculative decoding: tokens per verify pass = 1 + α + α² + … + α^k
* pipeline bubble = (p − 1) / (m + p − 1)
* KV transfer = KV bytes / (η_n × link bytes/s) + setup
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "ChunkedPrefill",
    "chunked_prefill",
    "kv_transfer_s",
    "mbu",
    "mfu",
    "pipeline_bubble",
    "speculative_cycle_s",
    "speculative_itl_s",
    "speculative_speedup",
    "speculative_tokens_per_pass",
    "static_batch_utilization",
]


def mbu(*, bytes_per_s: ArrayLike, hbm_bytes_per_s: float) -> NDArray[np.float64] | float:
    """MBU = bytes decode must stream per second / peak bandwidth."""
    out = np.asarray(bytes_per_s, float) / hbm_bytes_per_s
    return float(out) if np.ndim(out) == 0 else out


def mfu(
    *, tokens_per_s: ArrayLike, params: float, peak_flops_per_s: float
) -> NDArray[np.float64] | float:
    """MFU = tokens/s × 2 × params / peak FLOP/s."""
    out = np.asarray(tokens_per_s, float) * 2.0 * params / peak_flops_per_s
    return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class ChunkedPrefill:
    """A long prompt admitted in chunks beside a running decode batch."""

    chunks: int
    iteration_s: float  # decode step + the longest chunk = worst ITL during the admission
    ttft_s: float  # Σ_i (decode step + chunk i)
    dedicated_ttft_s: float  # the whole prefill run alone (stalls every decode)
    ttft_increase: float  # ttft / dedicated − 1


def chunked_prefill(
    *, prompt_tokens: int, chunk_tokens: int, decode_step_s: float, chunk_s: float | Sequence[float],
    dedicated_prefill_s: float,
) -> ChunkedPrefill:
    """TTFT = Σ_i (decode step + chunk i's time), i < ⌈N / chunk⌉.

    ``chunk_s`` is each chunk's time (chunk i attends to the i earlier chunks, so
    later chunks cost more: ``physics.step.prefill_chunks``), or one time for
    every chunk, the seeds' approximation: TTFT = ⌈N / chunk⌉ × (decode + chunk)."""
    chunks = math.ceil(prompt_tokens / chunk_tokens)
    times = [float(chunk_s)] * chunks if isinstance(chunk_s, int | float) else [float(x) for x in chunk_s]
    if len(times) != chunks:
        raise ValueError(f"chunk_s: {len(times)} chunk times for {chunks} chunks")
    ttft = chunks * decode_step_s + math.fsum(times)
    return ChunkedPrefill(
        chunks=chunks,
        iteration_s=decode_step_s + max(times),
        ttft_s=ttft,
        dedicated_ttft_s=dedicated_prefill_s,
        ttft_increase=ttft / dedicated_prefill_s - 1.0 if dedicated_prefill_s > 0 else 0.0,
    )


def static_batch_utilization(output_tokens: Sequence[int]) -> float:
    """Useful slot-steps / slot-steps = Σ outputs / (B × max output)."""
    if not output_tokens:
        raise ValueError("output_tokens is empty")
    return float(sum(output_tokens)) / (len(output_tokens) * max(output_tokens))


def speculative_tokens_per_pass(*, draft_tokens: ArrayLike, acceptance: ArrayLike) -> NDArray[np.float64] | float:
    """Expected tokens per verify pass = 1 + α + … + α^k = (1 − α^(k+1)) / (1 − α)."""
    k = np.asarray(draft_tokens, float)
    a = np.asarray(acceptance, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(a >= 1.0, k + 1.0, (1.0 - a ** (k + 1.0)) / (1.0 - np.where(a >= 1.0, 0.0, a)))
    return float(out) if np.ndim(out) == 0 else out


def speculative_cycle_s(
    *, step_s: ArrayLike, verify_step_s: ArrayLike, draft_tokens: ArrayLike, draft_cost: ArrayLike,
) -> NDArray[np.float64] | float:
    """One speculative cycle = verify step + k × draft_cost × step.

    ``draft_cost`` is one draft step's time as a fraction of one target step;
    ``verify_step_s`` is the target's pass over k+1 positions per sequence.
    """
    out = np.asarray(verify_step_s, float) + np.asarray(draft_tokens, float) * np.asarray(draft_cost, float) \
        * np.asarray(step_s, float)
    return float(out) if np.ndim(out) == 0 else out


def speculative_itl_s(
    *, step_s: ArrayLike, verify_step_s: ArrayLike, draft_tokens: ArrayLike, acceptance: ArrayLike,
    draft_cost: ArrayLike,
) -> NDArray[np.float64] | float:
    """ITL with speculation = cycle / tokens per pass."""
    cycle = np.asarray(speculative_cycle_s(step_s=step_s, verify_step_s=verify_step_s, draft_tokens=draft_tokens,
                                           draft_cost=draft_cost))
    out = cycle / np.asarray(speculative_tokens_per_pass(draft_tokens=draft_tokens, acceptance=acceptance))
    return float(out) if np.ndim(out) == 0 else out


def speculative_speedup(
    *, draft_tokens: ArrayLike, acceptance: ArrayLike, draft_cost: ArrayLike,
    verify_step_s: ArrayLike, step_s: ArrayLike,
) -> NDArray[np.float64] | float:
    """Speedup = tokens per pass × step / (verify step + k × draft_cost × step)."""
    tpp = np.asarray(speculative_tokens_per_pass(draft_tokens=draft_tokens, acceptance=acceptance))
    cycle = np.asarray(speculative_cycle_s(step_s=step_s, verify_step_s=verify_step_s, draft_tokens=draft_tokens,
                                           draft_cost=draft_cost))
    out = tpp * np.asarray(step_s, float) / cycle
    return float(out) if np.ndim(out) == 0 else out


def pipeline_bubble(*, stages: ArrayLike, microbatches: ArrayLike) -> NDArray[np.float64] | float:
    """Bubble fraction = (p − 1) / (m + p − 1)."""
    p = np.asarray(stages, float)
    m = np.asarray(microbatches, float)
    out = (p - 1.0) / (m + p - 1.0)
    return float(out) if np.ndim(out) == 0 else out


def kv_transfer_s(
    *, kv_bytes: ArrayLike, link_bytes_per_s: float, efficiency: float = 1.0, setup_s: float = 0.0
) -> NDArray[np.float64] | float:
    """t_transfer = D_KV / (η_n × B_network) + t_setup."""
    out = np.asarray(kv_bytes, float) / (efficiency * link_bytes_per_s) + setup_s
    return float(out) if np.ndim(out) == 0 else out
