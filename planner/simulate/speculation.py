"""Speculative decoding in the simulator: every decode iteration is a verify pass.

With ``speculative.draft_tokens`` = k > 0 each decode iteration is one speculative cycle
(the draft proposes k tokens, the target verifies k + 1 positions per sequence), timed by
the planner's own cycle (``physics.step.decode_cycle``: verify step + k × draft step, the
draft step the method's own drafter on the step model (``speculative.method``: a draft
model, an EAGLE-3 head or the MTP module) or draft_cost × step, tabulated by
:class:`planner.simulate.steptimes.StepTimes` from the same ``Drafter`` the plan uses).  Each decoding sequence
then emits a burst of tokens at the pass's end: the accepted draft tokens plus the
target's own (bonus or correction) token,

    tokens = 1 + j,   P(j ≥ i) = a_1 × … × a_i for i ≤ k   (draft token i accepted with probability a_i
                                                          while all before it were; one α: α^i, seeds 001)

so E[tokens] = 1 + Σ_i Π_{j≤i} a_j, the planner's ``speculative.tokens_per_verify`` with the
method's acceptance per position (``Drafter.acceptance``: the MTP, EAGLE-3 or draft-model
default, or the scenario's); the last pass of a request is cut at its output.  Each pass
samples its positions in turn with one uniform draw u: position i is accepted while u stays
under the running product Π_{j≤i} a_j.  The draws are a pure function of (seed, request,
pass number): a 32-bit integer hash compared against integer thresholds round(Π_{j≤i} a_j × 2³²),
the same arithmetic here and in the compiled kernel (planner.simulate.kernel), so the two
stay bit-identical.  KV grows by the tokens accepted (the verify pass's rejected slots are
freed in the same iteration).  Runs of decode-only iterations planned as one event and the
token clock (planner.simulate.decoderuns) assume one token per iteration: a speculative
replica plans and ends each iteration sequence by sequence instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner.physics.speculative import acceptance_positions
from planner.simulate.hashing import MASK32, hash32
from planner.simulate.replica import _Host, _Replica, _Seq
from planner.simulate.steptimes import StepTimes

__all__: list[str] = []

def seed_hash(seed: int) -> int:
    """The run's seed folded to 32 bits and hashed (SimOptions.seed may be 64-bit)."""
    return hash32((seed & MASK32) ^ hash32(seed >> 32))


@dataclass(frozen=True)
class SpecDraws:
    """Speculation's parameters for the simulator: k, the hashed seed, the thresholds T_i."""

    draft_tokens: int
    seed_h: int
    thresholds: tuple[int, ...]  # T_i = round(Π_{j≤i} a_j × 2³²), i = 1 … k (a draw h < T_i: draft token i accepted)

    def tokens(self, request: int, passes: int) -> int:
        """Tokens the verify pass number ``passes`` of ``request`` emits (1 … k + 1)."""
        h = hash32(hash32(self.seed_h ^ (request & MASK32)) ^ (passes & MASK32))
        a = 1
        for t in self.thresholds:
            if h >= t:
                break
            a += 1
        return a

    @property
    def mean_tokens(self) -> float:
        """E[tokens per pass] of these draws: 1 + Σ T_i / 2³² (≈ 1 + Σ_i Π_{j≤i} a_j)."""
        return 1.0 + sum(self.thresholds) / 2.0**32


def spec_draws(*, draft_tokens: int, acceptance: float | Sequence[float], seed: int) -> SpecDraws:
    """The draws for k draft tokens at one α (α^i) or a_1 … a_k (running products; a shorter
    tuple repeats its last entry, ``speculative.acceptance_positions``)."""
    if isinstance(acceptance, int | float):
        probs = [float(acceptance) ** i for i in range(1, draft_tokens + 1)]
    else:
        run, probs = 1.0, []
        for a in acceptance_positions(acceptance, draft_tokens):
            run *= a
            probs.append(run)
    return SpecDraws(draft_tokens=draft_tokens, seed_h=seed_hash(seed),
                     thresholds=tuple(min(round(p * 2.0**32), 2**32) for p in probs))


class _SpecReplica(_Replica):
    """A replica whose decode iterations are verify passes emitting bursts of tokens."""

    speculative = True

    def __init__(self, *, draws: SpecDraws, role: str, capacity_blocks: int, block_tokens: int, max_batch: int,
                 chunk_tokens: int, chunked: bool, steps: StepTimes, recv_interval: int = 1,
                 balance_ranks: int = 0) -> None:
        super().__init__(role=role, capacity_blocks=capacity_blocks, block_tokens=block_tokens, max_batch=max_batch,
                         chunk_tokens=chunk_tokens, chunked=chunked, steps=steps, recv_interval=recv_interval,
                         balance_ranks=balance_ranks)
        self.draws = draws
        self._spec_plan: list[tuple[_Seq, int]] = []
        self.spec_passes = 0  # verify passes (sequence × iteration)
        self.spec_tokens = 0  # tokens they emitted

    # -- no token clock: every decoding sequence is kept exact ------------------
    def _join(self, s: _Seq) -> None:
        s.decoding = True
        self.ndec += 1

    def _sync(self, s: _Seq) -> None:
        return None

    def _leave(self, s: _Seq) -> None:
        s.decoding = False
        self.ndec -= 1

    def plan_run(self, t: float, until_s: float = 0.0, most: int = 0) -> float:
        return 0.0  # no runs: one iteration at a time

    def _reserve_decode(self) -> tuple[int, int]:
        """1. Each decoding sequence (batch order) takes blocks for the tokens its pass will
        emit (evicting cached prefixes, then preempting the newest sequence when short)."""
        running, draws = self.running, self.draws
        plan: list[tuple[_Seq, int]] = []
        ctx = 0
        i = 0
        while i < len(running):
            s = running[i]
            i += 1
            if not s.decoding:
                continue
            a = min(draws.tokens(s.idx, s.passes), s.out - s.generated)
            while not self._alloc(s, a):
                victim = running.pop()
                self._preempt(victim)
                if victim is s:
                    break
            else:
                plan.append((s, a))
                ctx += s.kv
        self._spec_plan = plan
        return len(plan), ctx

    def apply(self, t: float, sim: _Host) -> None:
        """End the planned iteration at ``t``: every verify pass emits its burst."""
        idx = len(self.times)
        self.times.append(t)
        self._take_in_tick(1, t)
        done: list[_Seq] = []
        for s, a in self._spec_plan:
            s.kv += a
            s.generated += a
            s.passes += 1
            s.counts.append(a)
            self.spec_tokens += a
            if s.generated >= s.out:
                done.append(s)
        self.spec_passes += len(self._spec_plan)
        self._spec_plan = []
        self._settle(t, sim, idx, done)
