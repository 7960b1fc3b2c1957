"""The workload's length distribution reduced to what the operating point needs:
residence-weighted context moments for the KV budget, the live context a decode
step reads, and prompt classes (× prefix hit/miss) for the prefill and TTFT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from planner.physics.lengths import LengthSamples, length_samples, weighted_quantile
from planner.spec.context import Resolved

__all__ = ["MAX_PROMPT_CLASSES", "WorkloadStats", "workload_stats"]

# Prompt lengths are grouped into at most this many equal-probability classes for
# the prefill and TTFT arithmetic (48 lognormal quantiles per dimension otherwise;
# the TTFT p90 moves by well under 1% between 24 and 48 classes).
MAX_PROMPT_CLASSES = 24
Arr = NDArray[np.float64]


@dataclass(frozen=True)
class WorkloadStats:
    """The moments of the length distribution the operating point needs."""

    samples: LengthSamples
    cached_tokens: float  # mean cached prompt tokens = prefix × hit rate
    mean_prompt: float
    mean_output: float
    capacity_context_mean: float  # residence-weighted E[n + o]
    capacity_context_std: float
    live_context: float  # residence-weighted E[n + o/2]: the KV a decode step reads
    p90_prompt: float
    class_prompt: Arr  # prompt classes × {hit, miss}: prompt tokens
    class_cached: Arr  # cached prompt tokens of each class
    class_weight: Arr  # probability of each class (sums to 1)
    prefix_tokens: float  # shared prefix held once per replica (0: none)
    prefix_hit_rate: float


def _prompt_classes(smp: LengthSamples) -> tuple[Arr, Arr]:
    """(prompt, weight) of at most MAX_PROMPT_CLASSES equal-probability groups."""
    order = np.argsort(smp.prompt, kind="stable")
    p, w = smp.prompt[order], smp.weight[order]
    values = np.unique(p)
    if values.size <= MAX_PROMPT_CLASSES:
        return values.astype(float), np.array([float(w[p == v].sum()) for v in values])
    cum = np.cumsum(w) - 0.5 * w
    group = np.minimum((cum * MAX_PROMPT_CLASSES).astype(int), MAX_PROMPT_CLASSES - 1)
    weights = np.bincount(group, weights=w, minlength=MAX_PROMPT_CLASSES).astype(float)
    means = np.bincount(group, weights=w * p, minlength=MAX_PROMPT_CLASSES) / np.where(weights > 0, weights, 1.0)
    keep = weights > 0
    return means[keep], weights[keep]


def workload_stats(r: Resolved) -> WorkloadStats:
    """The moments and prompt classes of the scenario's workload (``serving.context_tokens`` fixes the context)."""
    w = r.scenario.workload
    smp = length_samples(distribution=w.distribution, prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens,
                         prompt_sigma=w.prompt_sigma, output_sigma=w.output_sigma, trace=w.trace)
    eo = smp.mean_output
    tw = smp.weight * smp.output / eo  # residence-time weights
    cap = smp.prompt + smp.output
    mu = float(np.sum(tw * cap))
    sd = float(math.sqrt(max(float(np.sum(tw * cap * cap)) - mu * mu, 0.0)))
    live = float(np.sum(tw * (smp.prompt + smp.output / 2.0)))
    ctx = r.scenario.serving.context_tokens
    if ctx is not None:
        mu, sd, live = float(ctx), 0.0, float(ctx)
    prompts, weights = _prompt_classes(smp)
    h, pre = w.prefix_hit_rate, float(w.prefix_tokens)
    if pre > 0 and 0 < h:
        hit = np.minimum(pre, np.maximum(prompts - 1.0, 0.0))
        cls_p = np.concatenate([prompts, prompts]) if h < 1 else prompts
        cls_c = np.concatenate([hit, np.zeros_like(prompts)]) if h < 1 else hit
        cls_w = np.concatenate([weights * h, weights * (1 - h)]) if h < 1 else weights
    else:
        cls_p, cls_c, cls_w = prompts, np.zeros_like(prompts), weights
    return WorkloadStats(
        samples=smp, cached_tokens=pre * h, mean_prompt=smp.mean_prompt,
        mean_output=eo, capacity_context_mean=mu, capacity_context_std=sd, live_context=live,
        p90_prompt=weighted_quantile(smp.prompt, smp.weight, 0.9),
        class_prompt=cls_p, class_cached=cls_c, class_weight=cls_w / cls_w.sum(),
        prefix_tokens=pre if h > 0 else 0.0, prefix_hit_rate=h if pre > 0 else 0.0,
    )
