"""Replicas that never see each other, each simulated alone (a fast path of the engine).

When every request is routed round robin (or there is one replica) from an open-loop
arrival stream to a colocated pool serving from the start, which replica gets which
request is known before the run (the k-th arrival handled goes to replica k mod n, the
engine's routing counter), no router reads a replica's state, and nothing a replica does
queues an event for another (no chat turns, no closed loop).  Each replica then runs
alone on its own arrivals, in the order the engine's one event queue would have handled
them: the arrivals are queued before any iteration, so an arrival at or before the end
of the iteration in progress is seen by that end.  A run of decode-only iterations is
planned up to the iteration in progress at the next arrival (where the engine would have
cut it), and may be longer than the engine's (nothing cuts it).  The time-average of
requests in flight is integrated afterwards over the same events, in the same time order
and the same arithmetic as the engine's running sum.  A speculative replica
(:mod:`planner.simulate.speculation`) plans no runs: each iteration is one verify pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from planner.simulate.arrivals import Request
from planner.simulate.replica import _Replica, _Seq

__all__: list[str] = []

# Longest run of decode-only iterations planned as one event when the next arrival is known
# (a run also ends at the first finish or at a block shortage).
ALONE_RUN_ITERATIONS = 4096


class _Quiet:
    """A replica's host when finishing or handing off queues nothing (colocated, open loop)."""

    def finished(self, s: _Seq, t: float) -> None:
        return None

    def transfer(self, s: _Seq, t: float) -> None:
        raise AssertionError("a colocated replica never hands off")


def alone_order(requests: Sequence[Request]) -> np.ndarray:
    """Request indices in the order the engine handles their arrivals: by time, then index."""
    arrival = np.fromiter((q.arrival_s for q in requests), dtype=float, count=len(requests))
    return np.argsort(arrival, kind="stable")


def run_alone(rep: _Replica, idx: Sequence[int], requests: Sequence[Request], seqs: list[_Seq | None]) -> None:
    """Simulate ``rep`` serving the requests ``idx`` (in arrival order) and nothing else."""
    arr = [requests[i].arrival_s for i in idx]
    arr.append(math.inf)
    m, k = len(idx), 0
    host = _Quiet()
    waiting, plan_run, plan, apply = rep.waiting, rep.plan_run, rep.plan, rep.apply
    while k < m:  # idle: the next arrival starts it
        i = idx[k]
        t = arr[k]
        s = seqs[i] = _Seq(i, requests[i], t)
        waiting.append(s)
        k += 1
        while True:
            end = 0.0 if waiting else plan_run(t, arr[k], ALONE_RUN_ITERATIONS)
            if end <= 0:
                dt = plan()
                if dt <= 0:
                    break
                end = t + dt
            while arr[k] <= end:  # arrivals the iteration's end sees
                i = idx[k]
                s = seqs[i] = _Seq(i, requests[i], arr[k])
                waiting.append(s)
                k += 1
            apply(end, host)
            t = end


def in_flight_area(arrival_s: np.ndarray, finish_s: np.ndarray) -> float:
    """∫ requests in flight dt from 0 to the last event: the engine's running sum
    (in_flight × (t − t_last) at each arrival and finish, in time order), term for term."""
    t = np.concatenate([arrival_s, finish_s])
    delta = np.concatenate([np.ones(arrival_s.size), -np.ones(finish_s.size)])
    order = np.argsort(t, kind="stable")
    t, delta = t[order], delta[order]
    before = np.cumsum(delta) - delta
    terms = before * np.diff(t, prepend=0.0)
    return float(np.cumsum(terms)[-1]) if terms.size else 0.0
