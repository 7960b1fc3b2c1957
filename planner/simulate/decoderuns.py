"""Runs of decode-only iterations planned as one event (a mixin of the simulator's replica).

While nothing can change in a replica but the tokens (nothing waiting, every running
sequence decoding, blocks free for every growth), its next iterations up to the first
finish are known in advance: the same step times, summed in the same order as one by
one, so the run ends at bit-identical times.  An arrival routed to the replica cuts the
run at the iteration then in progress (whose end would have seen it), giving back the
blocks the cut iterations had taken.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from planner.simulate.replica import _Seq

__all__: list[str] = []

# Longest run of decode-only iterations planned as one event (an arrival cuts a run short;
# longer runs waste the step times computed past the cut).
SEGMENT_MAX_ITERATIONS = 32
# The decode step-time table's pitch: planner.simulate.replica.CONTEXT_GRID_TOKENS is this.
GRID_TOKENS = 64


class _Rows(Protocol):
    def decode_row(self, batch_size: int) -> list[float]: ...


class _DecodeRuns:
    role: str
    bt: int
    free: int
    capacity: int
    steps: _Rows
    waiting: deque[_Seq]
    running: list[_Seq]
    times: list[float]
    batch_series: list[int]
    kv_series: list[float]
    _decode: list[_Seq]
    _pieces: list[tuple[_Seq, int]]

    def _init_runs(self) -> None:
        self.seg_t: list[float] = []  # a planned run: its iterations' end times,
        self.seg_free: list[int] = []  # free blocks while each is in progress,
        self.seg_t0 = 0.0  # and when the run was planned
        self.event = 0  # order of the replica's live iteration-end event (older ones are stale)

    def free_at(self, t: float, pushed: float = -math.inf) -> int:
        """Free blocks while the iteration in progress at an event at ``t`` runs."""
        if not self.seg_t:
            return self.free
        return self.seg_free[min(self.seg_index(t, pushed), len(self.seg_t) - 1)]

    def plan_run(self, t: float, until_s: float = math.inf, most: int = SEGMENT_MAX_ITERATIONS) -> float:
        """When nothing can change but the tokens (nothing waiting, every running sequence
        decoding, blocks free for every growth), plan the next iterations at once, up to the
        first finish (at most ``most``; ``until_s``: up to the iteration in progress then, when
        the next arrival is known): the same step times, summed in the same order as one by
        one.  Returns the run's end time (0: plan one iteration instead)."""
        running, bt = self.running, self.bt
        if self.waiting or not running or self.role == "prefill":
            return 0.0
        ctx, rem, cnt = 0, most, [0] * bt
        for s in running:
            kv = s.kv
            if kv < s.target:
                return 0.0
            ctx += kv
            cnt[kv % bt] += 1
            r = s.out - s.generated
            if r < rem:
                rem = r
        b, free, grid = len(running), self.free, GRID_TOKENS
        row = self.steps.decode_row(b)
        ts, fs = self.seg_t, self.seg_free
        self.seg_t0 = t
        for j in range(rem):  # iteration j: every kv is kv0 + j; those at a block boundary grow
            need = cnt[-j % bt]
            if need > free:
                break
            free -= need
            x = ((ctx + j * b) / b + 1.0) / grid  # StepTimes.decode_s, inlined
            i = int(x)
            f = x - i
            t = t + (row[i] + f * (row[i + 1] - row[i]) if f else row[i])
            ts.append(t)
            fs.append(free)
            if t >= until_s:
                break
        if len(ts) < 2:
            ts.clear()
            fs.clear()
            return 0.0
        self.free = free  # the sequences' blocks count their growth when the run ends
        self._decode, self._pieces = list(running), []
        return t

    def seg_index(self, t: float, pushed: float) -> int:
        """The run's first iteration to end after an event at ``t`` (pushed at ``pushed``)
        is handled: the iteration in progress then, whose end sees it."""
        ts = self.seg_t
        j = bisect_left(ts, t)
        if j < len(ts) and ts[j] == t and not pushed < (ts[j - 1] if j else self.seg_t0):
            j += 1  # that iteration's end was queued first
        return j

    def cut(self, t: float, pushed: float) -> float:
        """A request arrived at ``t``: end the run with the iteration then in progress.
        Returns the new end time (0: the run ends then anyway)."""
        ts = self.seg_t
        j = self.seg_index(t, pushed)
        if j >= len(ts) - 1:
            return 0.0
        self.free = self.seg_free[j]
        del ts[j + 1:], self.seg_free[j + 1:]
        return ts[j]

    def _apply_run(self) -> int:
        """The series of all but the last iteration of a planned run; its length."""
        k1 = len(self.seg_t) - 1
        self.times.extend(self.seg_t[:k1])
        self.batch_series.extend([len(self._decode)] * k1)
        cap = self.capacity
        self.kv_series.extend([1.0 - f / cap for f in self.seg_free[:k1]])
        self.seg_t.clear()
        self.seg_free.clear()
        return k1 + 1

