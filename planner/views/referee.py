"""The simulator referees every recommendation: one decision, one function.

Compare's and Explore's pick, the sweep's ``cheapest``, the Plan verdict between
colocated and disaggregated and the report's answer are all :func:`referee_pick`:
walk the candidates the analytic plan finds feasible, cheapest first, simulate each
at its own fleet and peak rate (a short run) and pick the first whose simulated
attainment reaches ``slo.attainment``; at most ``REFEREE_MAX_SIMULATED`` are
simulated so a page stays responsive.  A candidate the simulation fails is never
labelled as meeting the SLO.

The simulation is passed in (``Simulate``: a scenario in, its simulated attainment
out, None when it has no fleet): ``planner.simulate.referee.simulated_attainment``
for pages and the CLI; views sit below the simulator.  Without one the pick is the
analytic one, labelled so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from planner.spec.scenario import Scenario

__all__ = ["REFEREE_MAX_SIMULATED", "RefereePick", "Simulate", "Simulated", "referee_pick", "slo_status"]

# Candidates simulated per pick, cheapest first (each a short run of well under a second
# on one core): enough to step past a few the analytic plan over-rates, few enough for a page.
REFEREE_MAX_SIMULATED = 6

Simulate = Callable[[Scenario], "float | None"]


@dataclass(frozen=True)
class Simulated:
    """One candidate simulated: its index among the candidates and its attainment."""

    index: int
    attainment: float
    passed: bool


@dataclass(frozen=True)
class RefereePick:
    """The refereed pick (None: no candidate passed, or none was feasible) and what was simulated."""

    pick: int | None
    simulated: tuple[Simulated, ...]
    target: float
    cap: int
    refereed: bool  # False: no simulator given, the pick is the analytic cheapest
    offered: int  # analytically feasible candidates

    def attainment_of(self, index: int) -> float | None:
        return next((s.attainment for s in self.simulated if s.index == index), None)

    def failed(self, index: int) -> bool:
        return any(s.index == index and not s.passed for s in self.simulated)

    def note(self) -> str:
        """How the pick was made, in words."""
        if not self.refereed:
            return "analytic pick (not simulated)"
        n = len(self.simulated)
        walked = (f"simulated {n} of {self.offered} feasible candidate{'s' if self.offered != 1 else ''} "
                  f"cheapest first (at most {self.cap})")
        if self.pick is not None:
            return f"{walked}; the first to reach {self.target:.0%} attainment in simulation is the pick"
        if self.offered == 0:
            return "no candidate meets the SLO analytically: nothing to simulate"
        return f"{walked}; none reached {self.target:.0%} attainment in simulation"


def referee_pick(candidate: Callable[[int], Scenario], costs: Sequence[float], *, target: float,
                 simulate: Simulate | None, cap: int = REFEREE_MAX_SIMULATED) -> RefereePick:
    """The cheapest candidate whose simulation meets ``target``: ``costs`` rank the
    candidates (ties by position; infinite: not feasible analytically, never picked)
    and ``candidate(i)`` is the scenario of candidate i, built only when simulated."""
    order = sorted((i for i, c in enumerate(costs) if math.isfinite(c)), key=lambda i: (costs[i], i))
    if simulate is None:
        return RefereePick(pick=order[0] if order else None, simulated=(), target=target, cap=cap, refereed=False,
                           offered=len(order))
    done: list[Simulated] = []
    pick = None
    for i in order[:cap]:
        a = simulate(candidate(i))
        if a is None:
            continue
        ok = a + 1e-12 >= target
        done.append(Simulated(index=i, attainment=a, passed=ok))
        if ok:
            pick = i
            break
    return RefereePick(pick=pick, simulated=tuple(done), target=target, cap=cap, refereed=True, offered=len(order))


def slo_status(*, feasible: bool, attainment: float | None, target: float) -> str:
    """One candidate's SLO status in words: analytic, and simulated where it was."""
    if not feasible:
        return "misses (analytic)"
    if attainment is None:
        return "meets (analytic, not simulated)"
    if attainment + 1e-12 >= target:
        return f"meets (simulated {attainment:.0%} ≥ {target:.0%})"
    return f"misses in simulation ({attainment:.0%} < {target:.0%})"
