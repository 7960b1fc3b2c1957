"""The scheduler's take-in (a mixin of the simulator's replica): which arrivals the next
iteration may admit, ``recv_t`` (arrivals up to it are taken in; +inf: all).

* SGLang's ``--scheduler-recv-interval`` k (``serving.scheduler_recv_interval``): new requests
  are taken in only when the weighted count of forward passes since the last take reaches k
  (a decode pass counts 1, a pass carrying prompt tokens counts past any interval); an idle
  replica takes them at once.  1: every iteration (the other engines).
* TensorRT-LLM's attention-DP balance (``serving.attention_dp_balance_iters``, the interval
  above): the count runs the same way, and a pass by whose end each of ``balance_ranks`` ranks
  holds a request not yet taken takes them all at once (a request's rank:
  :func:`planner.simulate.hashing.balance_rank`); while fewer sequences run than ranks, one rank
  has none and takes them at once.  0 ranks: SGLang's count alone.

The compiled replica (planner.simulate.kernelloop) runs the same rules, bit-identically; the load
model's waits are planner.physics.queueing_takein's.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

from planner.simulate.hashing import balance_rank

if TYPE_CHECKING:
    from planner.simulate.replica import _Seq

__all__: list[str] = []


class _TakeIn:
    times: list[float]
    waiting: deque[_Seq]
    running: list[_Seq]
    _pieces: list[tuple[_Seq, int]]

    def _init_take_in(self, recv_interval: int, balance_ranks: int) -> None:
        self.recv_interval = recv_interval
        self.recv_count = 0
        self.recv_t = math.inf if recv_interval <= 1 else -math.inf  # arrivals up to here are taken in
        self.balance_ranks = balance_ranks

    def _take_in_idle(self) -> None:
        """Planning an iteration: an idle replica (a rank idle) takes new requests at once (the
        scheduler's loop spins)."""
        if len(self.running) < max(self.balance_ranks, 1):
            self.recv_t = math.inf

    def _take_in_tick(self, iterations: int, t: float) -> None:
        """The ``iterations`` just ended, the last at ``t``: the receive count, then the balance's
        early take."""
        if self.recv_interval > 1:
            self._recv_tick(iterations)
            if self.balance_ranks and self.recv_t < t and self._ranks_covered(t):
                self.recv_count, self.recv_t = 0, t

    def _recv_tick(self, iterations: int) -> None:
        """The scheduler's receive counter over the ``iterations`` just ended (the last
        ``iterations`` entries of ``times``): a pass with prompt tokens takes in new requests
        at its end; decode passes count one each, and the count reaching the interval takes
        them in (at the end of that pass) and starts again."""
        times, ki = self.times, self.recv_interval
        if self._pieces:
            self.recv_count, self.recv_t = 0, times[-1]
            return
        c = self.recv_count + iterations
        if c >= ki:
            last = iterations - c % ki  # the last pass of the run at which the count reached the interval
            self.recv_t = times[len(times) - iterations + last - 1]
        self.recv_count = c % ki

    def _ranks_covered(self, t: float) -> bool:
        """Whether every attention-DP rank holds a request that arrived by ``t`` and is not yet
        taken (the attention-DP balance's early take)."""
        r, taken = self.balance_ranks, self.recv_t
        seen: set[int] = set()
        for s in self.waiting:
            if taken < s.arrival_s <= t:
                seen.add(balance_rank(s.idx, r))
                if len(seen) >= r:
                    return True
        return False
