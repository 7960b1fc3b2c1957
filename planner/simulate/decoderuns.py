"""The replica's token clock, and runs of decode-only iterations planned as one event
(a mixin of the simulator's replica).

Token clock: every decoding sequence gains one token per iteration, so none is touched
while it decodes.  The replica counts the iterations it has ended (its clock) and keeps,
over its decoding sequences, the sum of ``kv − clock at joining`` (the live context is
that sum + count × clock), how many sit at each ``kv mod block_tokens`` (which of them
open a block in a given iteration) and a heap of the clock values at which they finish.
An iteration then costs O(prefill pieces + finishes), not O(batch).  A sequence's kv,
generated tokens and blocks are brought up to date (exact integers) only when it
leaves the decoding set (finish, preemption): code reading them for a decoding sequence
(``s.decoding``) must call ``_sync(s)`` first.  Its kv never falls below its target
meanwhile, so ``kv < target`` still tells a prefill from a decoding sequence.

Runs: while nothing can change in a replica but the tokens (nothing waiting, every
running sequence decoding, blocks free for every growth), its next iterations up to the
first finish are known in advance: the same step times, summed in the same order as one
by one, so the run ends at bit-identical times.  An arrival routed to the replica cuts
the run at the iteration then in progress (whose end would have seen it), giving back
the blocks the cut iterations had taken.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from heapq import heappop, heappush
from itertools import accumulate
from operator import sub
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from planner.simulate.replica import _Seq

__all__: list[str] = []

# Longest run of decode-only iterations planned as one event (an arrival cuts a run short;
# longer runs waste the step times computed past the cut).
SEGMENT_MAX_ITERATIONS = 32
# The decode step-time table's pitch: planner.simulate.steptimes.CONTEXT_GRID_TOKENS is this.
GRID_TOKENS = 64


class _Rows(Protocol):
    def decode_rise(self, batch_size: int) -> tuple[list[float], list[float]]: ...


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
    free_series: list[int]
    _ndec: int
    _pieces: list[tuple[_Seq, int]]

    def _init_runs(self) -> None:
        self.clock = 0  # iterations ended
        self.ndec = 0  # decoding sequences (running, KV complete)
        self.dec_sum = 0  # Σ (kv − clock at joining) over them: live context = dec_sum + ndec × clock
        self.dec_mod = [0] * self.bt  # how many have (kv − clock at joining) ≡ i (mod block_tokens)
        self.dec_fin: list[tuple[int, int, _Seq]] = []  # heap: (clock at finish, admission, sequence)
        self.admitted = 0  # admissions to the batch so far (running keeps their order)
        self.seg_t: list[float] = []  # a planned run: its iterations' end times,
        self.seg_free: list[int] = []  # free blocks while each is in progress,
        self.seg_t0 = 0.0  # and when the run was planned
        self.event = 0  # order of the replica's live iteration-end event (older ones are stale)

    # -- the token clock ------------------------------------------------------
    def _join(self, s: _Seq) -> None:
        """``s`` decodes from the next iteration planned on (its kv complete, running)."""
        c = self.clock
        key = s.kv - c
        s.clock0, s.decoding = c, True
        self.ndec += 1
        self.dec_sum += key
        self.dec_mod[key % self.bt] += 1
        heappush(self.dec_fin, (s.out - s.generated + c, s.admitted, s))

    def _sync(self, s: _Seq) -> None:
        """Bring a decoding sequence's kv, generated tokens and blocks up to the clock."""
        d = self.clock - s.clock0
        if d:
            kv = s.kv
            s.kv = kv + d
            s.generated += d
            s.blocks += (kv + d - 1) // self.bt - (kv - 1) // self.bt
            s.clock0 = self.clock

    def _leave(self, s: _Seq) -> None:
        """``s`` stops decoding (finished or preempted); its state is brought up to date."""
        self._sync(s)
        key = s.kv - self.clock
        s.decoding = False
        self.ndec -= 1
        self.dec_sum -= key
        self.dec_mod[key % self.bt] -= 1

    def _finish_clock(self) -> int:
        """The clock at the next finish of a decoding sequence (no stale heap entry on top)."""
        fin = self.dec_fin
        while fin and not (fin[0][2].decoding and fin[0][2].admitted == fin[0][1]):
            heappop(fin)
        return fin[0][0] if fin else 2**62

    def _finishing(self) -> list[_Seq]:
        """Decoding sequences that reach their output at the clock, in batch order."""
        out: list[_Seq] = []
        fin, c = self.dec_fin, self.clock
        while fin and fin[0][0] <= c:
            _, adm, s = heappop(fin)
            if s.decoding and s.admitted == adm:
                out.append(s)
        return out

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
        running, bt, b = self.running, self.bt, self.ndec
        if self.waiting or not running or self.role == "prefill" or b != len(running):
            return 0.0
        c, fin = self.clock, self.dec_fin
        top = fin[0]
        nxt = top[0] if top[2].decoding and top[2].admitted == top[1] else self._finish_clock()
        ctx, rem, cnt = self.dec_sum + b * c, min(most, nxt - c), self.dec_mod
        free, grid = self.free, GRID_TOKENS
        row, rise = self.steps.decode_rise(b)
        ts, fs = self.seg_t, self.seg_free
        self.seg_t0 = t
        if b * (rem // bt + 1) <= free:  # blocks for every growth in reach: count them afterwards
            for live in range(ctx, ctx + rem * b, b):  # the live context of each iteration
                x = (live / b + 1.0) / grid  # StepTimes.decode_s, inlined
                i = int(x)
                f = x - i
                t = t + (row[i] + f * rise[i] if f else row[i])
                ts.append(t)
                if t >= until_s:
                    break
            k0, m = -c % bt, len(ts)
            grows = cnt[k0::-1] + cnt[:k0:-1]  # iteration j: cnt[-(c + j) % bt], period bt
            fs.extend(accumulate((grows * (m // bt + 1))[:m], sub, initial=free))
            del fs[0]
            free = fs[-1] if fs else free
        else:
            for j in range(rem):  # iteration j: every kv is kv0 + j; those at a block boundary grow
                need = cnt[-(c + j) % bt]
                if need > free:
                    break
                free -= need
                x = ((ctx + j * b) / b + 1.0) / grid
                i = int(x)
                f = x - i
                t = t + (row[i] + f * rise[i] if f else row[i])
                ts.append(t)
                fs.append(free)
                if t >= until_s:
                    break
        if len(ts) < 2:
            ts.clear()
            fs.clear()
            return 0.0
        self.free = free  # the sequences' blocks count their growth when brought up to date
        self._ndec, self._pieces = b, []
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
        self.batch_series.extend([self._ndec] * k1)
        self.free_series.extend(self.seg_free[:k1])
        self.seg_t.clear()
        self.seg_free.clear()
        return k1 + 1

