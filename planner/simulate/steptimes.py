"""Step times for the simulator: cached calls into planner.physics.step for one resolved scenario."""

from __future__ import annotations

import numpy as np

from planner.physics.prefill import host_floor_s
from planner.physics.speculative import Drafter, drafter_for
from planner.physics.step import decode_cycle, decode_step, prefill_step
from planner.simulate.decoderuns import GRID_TOKENS
from planner.spec.context import Resolved

__all__ = ["CACHED_GRID_TOKENS", "CONTEXT_GRID_TOKENS", "StepTimes"]


# Decode step times are tabulated per batch size on a context grid of this pitch
# and interpolated linearly (the step time is piecewise linear in context).
CONTEXT_GRID_TOKENS = GRID_TOKENS  # (planner.simulate.decoderuns interpolates on it too)
# Prefill chunk times are tabulated per cached-context bucket of this pitch, over
# every chunk size up to serving.chunk_tokens (larger prefills are memoized exactly).
CACHED_GRID_TOKENS = 16


class StepTimes:
    """Cached calls into planner.physics.step for one resolved scenario."""

    def __init__(self, resolved: Resolved, *, max_context_tokens: int, chunk_tokens: int) -> None:
        self._kw = resolved.step_kwargs()
        self._spec = resolved.scenario.speculative  # draft_tokens > 0: a decode iteration is a speculative cycle
        self._drafter = drafter_for(self._spec, resolved.model, resolved.scenario.serving.engine)  # the plan's own drafter (method, acceptance, cost)
        self._chunk = chunk_tokens
        par = resolved.scenario.parallel
        # A colocated prompt's first token no sooner than this after the iteration that prefills it
        # began (the hosts' launches; planner.physics.prefill.host_floor_s), as the plan has it.
        self.host_floor_s = float(host_floor_s(resolved.model, tp=par.tp, pp=par.pp))
        self._rows: dict[int, tuple[list[float], list[float]]] = {}
        n = max_context_tokens // CONTEXT_GRID_TOKENS + 3
        self._grid = np.arange(n, dtype=float) * CONTEXT_GRID_TOKENS
        self._decode: dict[int, list[float]] = {}
        self._rise: dict[int, tuple[list[float], list[float]]] = {}
        self._prefill: dict[tuple[int, int], tuple[float, float]] = {}

    @property
    def drafter(self) -> Drafter | None:
        """The scenario's drafter (None: speculation off), the one the plan's cycle uses."""
        return self._drafter

    @property
    def chunk_tokens(self) -> int:
        """The largest prefill tabulated per cached bucket (serving.chunk_tokens)."""
        return self._chunk

    def decode_row(self, batch_size: int) -> list[float]:
        """decode_step(batch, context).step_s on the context grid (0, pitch, 2 × pitch, …); with
        speculation the planner's cycle, decode_cycle(…).cycle_s = verify pass over k + 1
        positions + k × the drafter's step (planner.simulate.speculation)."""
        row = self._decode.get(batch_size)
        if row is None:
            sp = self._spec
            if sp.draft_tokens > 0:
                cyc = decode_cycle(batch_size=batch_size, context_tokens=self._grid, draft_tokens=sp.draft_tokens,
                                   drafter=self._drafter, **self._kw)
                row = np.broadcast_to(np.asarray(cyc.cycle_s, dtype=float), self._grid.shape).tolist()
            else:
                st = decode_step(batch_size=batch_size, context_tokens=self._grid, **self._kw)
                row = np.asarray(st.step_s, dtype=float).tolist()
            self._decode[batch_size] = row
        return row

    def decode_rise(self, batch_size: int) -> tuple[list[float], list[float]]:
        """decode_row and its rise from each grid point to the next (row[i + 1] − row[i])."""
        pair = self._rise.get(batch_size)
        if pair is None:
            row = self.decode_row(batch_size)
            pair = self._rise[batch_size] = (row, [row[i + 1] - row[i] for i in range(len(row) - 1)] + [0.0])
        return pair

    def decode_s(self, batch_size: int, context_tokens: float) -> float:
        """decode_step(batch, context).step_s, interpolated on the context grid."""
        row = self._decode.get(batch_size) or self.decode_row(batch_size)
        x = context_tokens / CONTEXT_GRID_TOKENS
        i = int(x)
        f = x - i
        return row[i] + f * (row[i + 1] - row[i]) if f else row[i]

    def prefill_rows(self, cached_tokens: int) -> tuple[list[float], list[float]]:
        """prefill_step(n new tokens after ``cached_tokens``) for n = 0 … chunk_tokens: its
        time_s and marginal_s (``cached_tokens`` on the CACHED_GRID_TOKENS grid)."""
        rows = self._rows.get(cached_tokens)
        if rows is None:
            n = np.arange(self._chunk + 1, dtype=float)
            st = prefill_step(tokens=n + cached_tokens, cached_tokens=cached_tokens, **self._kw)
            rows = (np.asarray(st.time_s, dtype=float).tolist(), np.asarray(st.marginal_s, dtype=float).tolist())
            self._rows[cached_tokens] = rows
        return rows

    def prefill_s(self, tokens: int, cached_tokens: float, *, riding: bool = False) -> float:
        """prefill_step(tokens new after cached_tokens).time_s (cached rounded to the grid);
        ``riding``: its marginal cost inside a decode iteration (PrefillStep.marginal_s)."""
        c = int(round(cached_tokens / CACHED_GRID_TOKENS)) * CACHED_GRID_TOKENS
        if tokens <= self._chunk:
            rows = self._rows.get(c) or self.prefill_rows(c)
            return rows[1][tokens] if riding else rows[0][tokens]
        key = (tokens, c)
        pair = self._prefill.get(key)
        if pair is None:
            st = prefill_step(tokens=tokens + c, cached_tokens=c, **self._kw)
            pair = (float(st.time_s), float(st.marginal_s))
            self._prefill[key] = pair
        return pair[1] if riding else pair[0]
