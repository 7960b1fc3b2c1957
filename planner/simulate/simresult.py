"""A finished simulation as a :class:`planner.simulate.simrun.SimRun` (planner.simulate.engine):
the per-request arrays, every inter-token gap, the replicas' timelines and their KV blocks at the end.

Inter-token gaps are slices of each replica's np.diff(iteration times), copied into place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from planner.errors import ScenarioError
from planner.simulate.alone import in_flight_area
from planner.simulate.arrivals import Request
from planner.simulate.options import SimOptions
from planner.simulate.replica import _Replica, _Seq
from planner.simulate.simrun import KvBlocks, SimRun
from planner.simulate.speculation import _SpecReplica

if TYPE_CHECKING:
    from planner.simulate.kernel import Compiled

__all__: list[str] = []


class _Finished(Protocol):
    """What a SimRun is built from: a simulation that has run (planner.simulate.engine._Sim)."""

    requests: tuple[Request, ...]
    seqs: list[_Seq | None]
    front: list[_Replica]
    replicas: list[_Replica]
    compiled: Compiled | None  # the replicas' compiled runs, if taken
    kv_capacity_tokens: int
    area: float  # ∫ requests in flight dt, integrated by the shared event queue
    in_flight: int

    def alone(self) -> bool: ...


def _emitted(s: _Seq, times: np.ndarray, offsets: dict[int, int]) -> np.ndarray:
    """A sequence's emission times over its runs, the first at its first token's time: a
    handed-off sequence's first token reaches the client with its KV, after the prefill
    iteration that sampled it (engine: TTFT = wait + prefill + exposed transfer).  The hosts'
    floor's hold (``held_s``) is the delivery's alone: the gaps stay the iterations', as the
    compiled replica gathers them."""
    emitted = np.concatenate([times[offsets[id(tl)] + a:offsets[id(tl)] + b + 1] for tl, a, b in s.segs])
    if emitted.size and s.first_s > emitted[0]:
        emitted[0] = s.first_s
    return emitted


def _all_gaps(seqs: list[_Seq], replicas: list[_Replica]) -> np.ndarray:
    """Every sequence's inter-token gaps, request by request: per sequence, np.diff of its
    emission times (its runs of iterations, concatenated).  A run of emissions is a run of
    one replica's consecutive iterations, so its gaps are a slice of that replica's
    np.diff(times) (the same subtractions): each sequence's slices are copied into place;
    only a sequence with several runs (preempted, or handed off) is diffed on its own."""
    offsets: dict[int, int] = {}
    pos = 0
    for rp in replicas:
        offsets[id(rp.times)] = pos
        pos += len(rp.times)
    times = np.concatenate([np.asarray(rp.times, dtype=float) for rp in replicas]) if pos else np.zeros(0)
    diff = np.diff(times)  # across two replicas' iterations: never read
    if replicas and replicas[0].speculative:
        return _burst_gaps(seqs, times, offsets)
    total = sum(b - a for s in seqs for _, a, b in s.segs) + sum(len(s.segs) - 1 for s in seqs if s.segs)
    out = np.empty(total, dtype=float)
    pos = 0
    for s in seqs:
        segs = s.segs
        if len(segs) == 1:
            tl, a, b = segs[0]
            o = offsets[id(tl)]
            out[pos:pos + b - a] = diff[o + a:o + b]
            pos += b - a
        elif segs:
            emitted = _emitted(s, times, offsets)
            out[pos:pos + emitted.size - 1] = np.diff(emitted)
            pos += emitted.size - 1
    return out


def _burst_gaps(seqs: list[_Seq], times: np.ndarray, offsets: dict[int, int]) -> np.ndarray:
    """Speculation: each emission carries ``counts`` tokens at one time (a burst), so a
    sequence's gaps are np.diff of its emission times each repeated by its count (zero gaps
    inside a burst)."""
    parts: list[np.ndarray] = []
    for s in seqs:
        if not s.segs:
            continue
        emitted = _emitted(s, times, offsets)
        if emitted.size != len(s.counts):
            raise ScenarioError("simulation: emissions and bursts disagree")  # a scheduler bug, never expected
        parts.append(np.diff(np.repeat(emitted, s.counts)))
    return np.concatenate(parts) if parts else np.zeros(0)


def _at(series: Sequence[Any] | np.ndarray, idx: np.ndarray) -> list[Any]:
    """Python numbers at ``idx`` of a list or an array."""
    if isinstance(series, np.ndarray):
        return list(series[idx].tolist())
    return [series[i] for i in idx.tolist()]


def _downsample(role: str, times: Sequence[float] | np.ndarray, batch_size: Sequence[int] | np.ndarray,
                free_blocks: Sequence[int] | np.ndarray, capacity: int, points: int) -> dict[str, Any]:
    """One replica's timeline, at most ``points`` of its iterations (evenly spaced)."""
    n = len(times)
    idx = np.unique(np.linspace(0, n - 1, min(points, n)).astype(int)) if n else np.zeros(0, dtype=int)
    free = np.array(_at(free_blocks, idx), dtype=float)
    return {"role": role,
            "t_s": _at(times, idx),
            "batch_size": _at(batch_size, idx),
            "kv_utilization": (1.0 - free / capacity).tolist()}


def _timelines(sim: _Finished, points: int) -> tuple[dict[str, Any], ...]:
    if sim.compiled is not None:
        return tuple(_downsample(rp.role, kr.times, kr.batch_size, kr.free_blocks, rp.capacity, points)
                     for rp, kr in zip(sim.front, sim.compiled.replicas, strict=True))
    return tuple(_downsample(rp.role, rp.times, rp.batch_series, rp.free_series, rp.capacity, points)
                 for rp in sim.replicas)


def _kv_blocks(rep: _Replica) -> KvBlocks:
    held = sum(q.blocks for q in (*rep.running, *rep.waiting))
    return KvBlocks(capacity=rep.capacity, free=rep.free,
                    cached=sum(e.blocks for e in rep.entries.values() if e.refs == 0),
                    referenced=held + sum(e.blocks for e in rep.entries.values() if e.refs > 0))


def _end_blocks(sim: _Finished) -> tuple[KvBlocks, ...]:
    """Each replica's KV blocks at the end."""
    if sim.compiled is not None:
        return tuple(KvBlocks(capacity=rp.capacity, free=kr.free, cached=kr.cached_blocks,
                              referenced=kr.referenced_blocks)
                     for rp, kr in zip(sim.front, sim.compiled.replicas, strict=True))
    return tuple(_kv_blocks(rp) for rp in sim.replicas)


def _result(sim: _Finished, options: SimOptions) -> SimRun:
    reqs = sim.requests
    if sim.compiled is not None:
        c = sim.compiled
        arrival, prompt, out = c.stream.arrival_s, c.stream.prompt_tokens, c.stream.output_tokens
        first, finish, itl, hit = c.first_s, c.finish_s, c.itl_s, c.hit_tokens
        if np.isnan(finish).any():
            raise ScenarioError("simulation did not finish every request")  # a scheduler bug, never expected
    else:
        seqs = [s for s in sim.seqs if s is not None]
        if len(seqs) != len(reqs) or any(s.finish_s != s.finish_s for s in seqs):
            raise ScenarioError("simulation did not finish every request")  # a scheduler bug, never expected
        arrival = np.array([s.arrival_s for s in seqs])
        first = np.array([s.first_s + s.held_s for s in seqs])  # as the client sees it (the hosts' floor)
        finish = np.array([s.finish_s for s in seqs])
        out = np.array([s.req.output_tokens for s in seqs])
        prompt = np.array([s.req.prompt_tokens for s in seqs])
        hit = np.array([max(s.hit, 0) for s in seqs])
        itl = _all_gaps(seqs, sim.replicas)
    # a first token held by the hosts' floor (StepTimes.host_floor_s) holds the tokens behind it too
    finish = np.maximum(finish, first)
    tpot = np.where(out > 1, (finish - first) / np.maximum(out - 1, 1), 0.0)
    t0, t1 = float(arrival.min()), float(finish.max())
    duration = t1 - t0
    return SimRun(
        arrival_s=arrival,
        first_token_s=first,
        finish_s=finish,
        prompt_tokens=prompt,
        output_tokens=out,
        hit_tokens=hit,
        tpot_s=tpot,
        itl_s=itl,
        preemptions=(sum(kr.preemptions for kr in sim.compiled.replicas) if sim.compiled is not None
                     else sum(rp.preemptions for rp in sim.replicas)),
        mean_in_flight=(in_flight_area(arrival, finish) if sim.alone() else sim.area) / duration if duration > 0
        else float(sim.in_flight),
        duration_s=duration,
        iterations=(sum(kr.times.size for kr in sim.compiled.replicas) if sim.compiled is not None
                    else sum(len(rp.times) for rp in sim.replicas)),
        kv_capacity_tokens=sim.kv_capacity_tokens,
        timeline=_timelines(sim, options.timeline_points),
        kv_blocks=_end_blocks(sim),
        verify_passes=_verify(sim)[0],
        verify_tokens=_verify(sim)[1],
    )


def _verify(sim: _Finished) -> tuple[int, int]:
    """(verify passes, tokens they emitted) over the replicas (0, 0 without speculation)."""
    if sim.compiled is not None:
        return (sum(kr.verify_passes for kr in sim.compiled.replicas),
                sum(kr.verify_tokens for kr in sim.compiled.replicas))
    reps = [rp for rp in sim.replicas if isinstance(rp, _SpecReplica)]
    return sum(rp.spec_passes for rp in reps), sum(rp.spec_tokens for rp in reps)
