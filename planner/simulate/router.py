"""Routing an arriving request to a replica.

* round_robin: replicas in turn.
* least_loaded: fewest requests in flight (ties: fewest pending prefill tokens, lowest index).
* prefix_affinity (the seeds' router): the highest score

      score = w_affinity × cached-prefix fraction − w_queue × pending tokens / norm − w_kv × KV utilization

  where the cached-prefix fraction is the share of the prompt that replica already
  holds in its prefix cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner.errors import ScenarioError

__all__ = ["ReplicaLoad", "affinity_score", "choose_replica"]


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    """What a router sees of one replica when a request arrives."""

    in_flight: int
    pending_tokens: int  # prefill tokens queued or in progress
    kv_utilization: float  # used KV blocks / capacity
    cached_prefix_tokens: int  # of this request's prompt


def affinity_score(*, load: ReplicaLoad, prompt_tokens: int, w_affinity: float, w_queue: float, w_kv: float,
                   queue_norm_tokens: float) -> float:
    """w_affinity × cached fraction − w_queue × pending / norm − w_kv × KV utilization."""
    frac = load.cached_prefix_tokens / prompt_tokens if prompt_tokens > 0 else 0.0
    return w_affinity * frac - w_queue * load.pending_tokens / queue_norm_tokens - w_kv * load.kv_utilization


def choose_replica(*, policy: str, loads: Sequence[ReplicaLoad], prompt_tokens: int, counter: int,
                   w_affinity: float = 1.0, w_queue: float = 0.5, w_kv: float = 0.5,
                   queue_norm_tokens: float = 8192.0) -> int:
    """Index of the replica that gets the request."""
    if not loads:
        raise ScenarioError("replicas: at least one replica is needed")
    if policy == "round_robin":
        return counter % len(loads)
    if policy == "least_loaded":
        return min(range(len(loads)), key=lambda i: (loads[i].in_flight, loads[i].pending_tokens, i))
    if policy == "prefix_affinity":
        scores = [affinity_score(load=ld, prompt_tokens=prompt_tokens, w_affinity=w_affinity, w_queue=w_queue,
                                 w_kv=w_kv, queue_norm_tokens=queue_norm_tokens) for ld in loads]
        best = max(scores)
        return scores.index(best)
    raise ScenarioError(f"router: expected round_robin, least_loaded or prefix_affinity, got {policy!r}")
