"""The autoscaler of a Kubernetes target, from ``fleet.policy`` and the simulated day
(``planner.sizing.autoscale``):

* ``static``: none; each pool runs the plan's replica count around the clock.
* ``reactive``: a KEDA ScaledObject per pool on the engine's own queue metric
  (``vllm:num_requests_waiting``, ``sglang:num_queue_reqs``), min and max replicas
  the fewest and most the day's reactive controller had serving.
* ``predictive``: a KEDA ScaledObject per pool with one cron trigger per run of
  equal replica counts in the day, each starting the scale-up delay ahead (the
  predictive controller orders D ahead), min and max from the same day.

Times are seconds after midnight UTC (the profile's day).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner.deploy.layout import DeployError, DeployInputs
from planner.sizing.autoscale import AutoscaleResult, autoscale
from planner.spec.profile import DAY_S

__all__ = ["QUEUE_METRICS", "QUEUE_THRESHOLD", "PoolScale", "pool_scales", "scaled_object"]

# The engine's own count of requests waiting for a slot (its Prometheus /metrics).
QUEUE_METRICS = {"vllm": "vllm:num_requests_waiting", "sglang": "sglang:num_queue_reqs"}
# KEDA's prometheus threshold is a per-replica average: scale up once more than one request
# waits per replica on average (the plan sizes for no standing queue at the target utilization).
QUEUE_THRESHOLD = 1
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"


@dataclass(frozen=True)
class PoolScale:
    role: str
    policy: str
    replicas: int  # the plan's (the static fleet)
    min_replicas: int
    max_replicas: int
    windows: tuple[tuple[float, float, int], ...]  # predictive: (start_s, end_s, replicas), start D ahead
    delay_s: float
    cooldown_s: float  # fleet.scale_down_delay_s: how long the need must stay lower before a release


def _counts(result: AutoscaleResult, role: str) -> list[int]:
    if role == "prefill":
        return [st.prefill_replicas for st in result.steps]
    if role == "decode":
        return [st.decode_replicas for st in result.steps]
    return [st.replicas for st in result.steps]


def pool_scales(inputs: DeployInputs) -> dict[str, PoolScale]:
    """Each pool's replicas under ``fleet.policy`` (min = max = the plan's under ``static``)."""
    policy = inputs.scenario.fleet.policy
    if policy == "static":
        return {p.role: PoolScale(p.role, policy, p.replicas, p.replicas, p.replicas, (), 0.0, 0.0)
                for p in inputs.pools}
    day = autoscale(inputs.scenario, policy)
    delay = day.summary.scale_up_delay_s
    out: dict[str, PoolScale] = {}
    for p in inputs.pools:
        counts = _counts(day, p.role)
        windows: list[tuple[float, float, int]] = []
        if policy == "predictive":
            low = min(counts)
            for st, n in zip(day.steps, counts, strict=True):
                if n <= low:
                    continue
                if windows and windows[-1][2] == n and math.isclose(windows[-1][1], st.t_s):
                    windows[-1] = (windows[-1][0], st.t_s + st.duration_s, n)
                else:
                    windows.append((st.t_s, st.t_s + st.duration_s, n))
            windows = [(s - delay, e, n) for s, e, n in windows]
        out[p.role] = PoolScale(p.role, policy, p.replicas, max(1, min(counts)), max(counts), tuple(windows), delay,
                                inputs.scenario.fleet.scale_down_delay_s)
    return out


def _cron(t_s: float, *, up: bool) -> str:
    """A daily cron expression at ``t_s`` after midnight, rounded to the minute (down for a start, up for an end)."""
    minute = (math.floor(t_s / 60) if up else math.ceil(t_s / 60)) % int(DAY_S / 60)
    return f"{minute % 60} {minute // 60} * * *"


def scaled_object(name: str, target: dict[str, str], scale: PoolScale, engine: str, query_filter: str,
                  model_ref: str) -> dict[str, Any]:
    """The KEDA ScaledObject that scales ``target`` (a scaleTargetRef) for one pool."""
    if scale.policy == "reactive":
        metric = QUEUE_METRICS.get(engine)
        if metric is None:
            raise DeployError(f"fleet.policy reactive: no queue metric of {engine} is recorded to scale on; use "
                              "vllm or sglang, or fleet.policy static|predictive")
        triggers: list[dict[str, Any]] = [{"type": "prometheus", "name": f"{scale.role}-queue", "metadata": {
            "serverAddress": PROMETHEUS,
            "query": f'sum({metric}{{model_name="{model_ref}"{query_filter}}})',
            "threshold": str(QUEUE_THRESHOLD)}}]
    else:
        triggers = [{"type": "cron", "name": f"{scale.role}-{i}", "metadata": {
            "timezone": "Etc/UTC", "start": _cron(s, up=True), "end": _cron(e, up=False),
            "desiredReplicas": str(n)}} for i, (s, e, n) in enumerate(scale.windows)]
        if not triggers:  # a flat day: hold the minimum
            triggers = [{"type": "cron", "name": f"{scale.role}-0", "metadata": {
                "timezone": "Etc/UTC", "start": "0 0 * * *", "end": "59 23 * * *",
                "desiredReplicas": str(scale.min_replicas)}}]
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "ridgeline"}},
            "spec": {"scaleTargetRef": target, "minReplicaCount": scale.min_replicas,
                     "maxReplicaCount": scale.max_replicas, "pollingInterval": 30,
                     "cooldownPeriod": int(round(scale.cooldown_s)), "triggers": triggers}}
