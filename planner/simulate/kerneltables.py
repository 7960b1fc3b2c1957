"""The compiled replica's step-time tables (planner.simulate.kernel), filled on demand from a
:class:`planner.simulate.steptimes.StepTimes` as the kernel asks for rows."""

from __future__ import annotations

import numpy as np

from planner.simulate.steptimes import CACHED_GRID_TOKENS, StepTimes

# Nothing here is re-exported by planner.simulate: importing numba is slow, so the compiled
# modules load only when the engine first takes the compiled path (planner.simulate.kernel).
__all__: list[str] = []


class Tables:
    """The kernel's step-time tables, filled from a StepTimes as the kernel asks (shared by
    the replicas of one run)."""

    def __init__(self, steps: StepTimes, *, max_batch: int, max_context_tokens: int) -> None:
        self.steps = steps
        self.dec_idx = np.full(max_batch + 1, -1, dtype=np.int64)
        self.dec_rows = np.zeros((0, len(steps.decode_row(1))), dtype=np.float64)
        self.n_dec = 0
        self.pre_idx = np.full(max_context_tokens // CACHED_GRID_TOKENS + 2, -1, dtype=np.int64)
        self.pre_time = np.zeros((0, steps.chunk_tokens + 1), dtype=np.float64)
        self.pre_marg = np.zeros((0, steps.chunk_tokens + 1), dtype=np.float64)
        self.n_pre = 0

    def add_decode_row(self, batch_size: int) -> None:
        if self.n_dec == self.dec_rows.shape[0]:
            self.dec_rows = _doubled(self.dec_rows)
        self.dec_rows[self.n_dec] = self.steps.decode_row(batch_size)
        self.dec_idx[batch_size] = self.n_dec
        self.n_dec += 1

    def add_prefill_row(self, cached_tokens: int) -> None:
        if self.n_pre == self.pre_time.shape[0]:
            self.pre_time, self.pre_marg = _doubled(self.pre_time), _doubled(self.pre_marg)
        time_s, marginal_s = self.steps.prefill_rows(cached_tokens)
        self.pre_time[self.n_pre] = time_s
        self.pre_marg[self.n_pre] = marginal_s
        self.pre_idx[cached_tokens // CACHED_GRID_TOKENS] = self.n_pre
        self.n_pre += 1


def _doubled(rows: np.ndarray) -> np.ndarray:
    out = np.zeros((max(2 * rows.shape[0], 4), rows.shape[1]), dtype=rows.dtype)
    out[:rows.shape[0]] = rows
    return out
