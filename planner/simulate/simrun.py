"""A simulated run's result (:func:`planner.simulate.engine.simulate`): per-request arrays and run totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["KvBlocks", "SimRun"]


@dataclass(frozen=True)
class KvBlocks:
    """One replica's KV blocks when the run ends: after every request finished, nothing is
    referenced and free + cached = capacity (blocks are conserved through preemption and sharing)."""

    capacity: int
    free: int
    cached: int  # held by prefix-cache entries no sequence references
    referenced: int  # held by referenced prefix entries or by sequences' private blocks


@dataclass(frozen=True)
class SimRun:
    """One simulated run: per-request arrays (seconds, tokens) and run totals."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    hit_tokens: np.ndarray
    tpot_s: np.ndarray  # per request: mean inter-token latency, (finish − first token) / (outputs − 1)
    itl_s: np.ndarray  # every inter-token gap, request by request (outputs − 1 each, in request order)
    preemptions: int
    mean_in_flight: float  # time-average of requests in the system, integrated by the engine
    duration_s: float  # first arrival to last finish
    iterations: int
    kv_capacity_tokens: int
    timeline: tuple[dict[str, Any], ...]  # per replica: t_s, batch_size, kv_utilization (downsampled)
    kv_blocks: tuple[KvBlocks, ...] = ()  # per replica, at the end of the run
    # Speculative decoding: verify passes (sequence × iteration) and the tokens they emitted
    # (their ratio: the simulated mean tokens per pass; 0, 0 without speculation).
    verify_passes: int = 0
    verify_tokens: int = 0

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    def itl_series(self, index: int) -> np.ndarray:
        """Request ``index``'s inter-token gaps, in order."""
        counts = np.maximum(self.output_tokens - 1, 0)
        start = int(counts[:index].sum())
        return self.itl_s[start:start + int(counts[index])]

    @property
    def ttft_s(self) -> np.ndarray:
        return np.asarray(self.first_token_s - self.arrival_s, dtype=float)

    @property
    def e2e_s(self) -> np.ndarray:
        return np.asarray(self.finish_s - self.arrival_s, dtype=float)
