"""Prompt/output length distributions: fixed means, lognormal, or a trace.

A distribution is reduced to weighted joint samples (prompt, output) from which
the planner takes the moments it needs.  Lognormal(mean, σ): the underlying
normal has μ = ln(mean) − σ²/2, so the mean is exact; it is discretized at 48
equal-probability quantiles per dimension (prompt and output independent).
A trace is used as given (one sample per row).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from planner.errors import ScenarioError

__all__ = ["LengthSamples", "length_samples", "lognormal_quantiles", "parse_trace_csv", "weighted_quantile"]

QUANTILE_POINTS = 48
Arr = NDArray[np.float64]


@dataclass(frozen=True)
class LengthSamples:
    """Weighted joint samples of (prompt tokens, output tokens)."""

    prompt: Arr
    output: Arr
    weight: Arr  # sums to 1

    def mean(self, x: Arr) -> float:
        return float(np.sum(self.weight * x))

    @property
    def mean_prompt(self) -> float:
        return self.mean(self.prompt)

    @property
    def mean_output(self) -> float:
        return self.mean(self.output)


def lognormal_quantiles(*, mean: float, sigma: float, points: int = QUANTILE_POINTS) -> Arr:
    """Equal-probability quantiles of a lognormal with the given mean and σ,
    rescaled so their average is exactly ``mean``."""
    if sigma <= 0:
        return np.array([float(mean)])
    mu = math.log(mean) - sigma * sigma / 2.0
    nd = NormalDist()
    q = np.array([math.exp(mu + sigma * nd.inv_cdf((i + 0.5) / points)) for i in range(points)])
    return np.asarray(q * (mean / q.mean()), dtype=float)


def weighted_quantile(values: Arr, weights: Arr, q: float) -> float:
    """The q-quantile of weighted samples."""
    order = np.argsort(values)
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    idx = int(np.searchsorted(cum, q * cum[-1]))
    return float(v[min(idx, len(v) - 1)])


def length_samples(
    *, distribution: str, prompt_tokens: float, output_tokens: float, prompt_sigma: float = 0.0,
    output_sigma: float = 0.0, trace: tuple[tuple[int, int], ...] | None = None,
) -> LengthSamples:
    """Joint samples for a workload's length distribution."""
    if distribution == "trace":
        if not trace:
            raise ScenarioError("workload.trace: a trace distribution needs at least one row")
        arr = np.asarray(trace, dtype=float)
        n = len(arr)
        return LengthSamples(prompt=arr[:, 0], output=arr[:, 1], weight=np.full(n, 1.0 / n))
    if distribution == "lognormal":
        p = lognormal_quantiles(mean=prompt_tokens, sigma=prompt_sigma)
        o = lognormal_quantiles(mean=output_tokens, sigma=output_sigma)
    else:
        p, o = np.array([float(prompt_tokens)]), np.array([float(output_tokens)])
    pp, oo = np.meshgrid(p, o, indexing="ij")
    w = np.full(pp.size, 1.0 / pp.size)
    return LengthSamples(prompt=np.maximum(pp.ravel(), 1.0), output=np.maximum(oo.ravel(), 1.0), weight=w)


def parse_trace_csv(source: str | Path | io.TextIOBase, *, max_rows: int = 1_000_000) -> tuple[tuple[int, int], ...]:
    """Read a ``prompt_tokens,output_tokens`` CSV; errors name the row and field."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and source.endswith(".csv")):
        try:
            text = Path(source).read_text()
        except OSError as exc:
            raise ScenarioError(f"cannot read trace {source}: {exc.strerror}") from None
    elif isinstance(source, str):
        text = source
    else:
        text = source.read()
    reader = csv.DictReader(io.StringIO(text))
    fields = set(reader.fieldnames or ())
    missing = [c for c in ("prompt_tokens", "output_tokens") if c not in fields]
    if missing:
        raise ScenarioError(f"trace CSV: missing column {', '.join(missing)} (need prompt_tokens,output_tokens)")
    rows: list[tuple[int, int]] = []
    for i, row in enumerate(reader, start=2):  # line 1 is the header
        if len(rows) >= max_rows:
            raise ScenarioError(f"trace CSV: more than {max_rows} rows")
        pair = []
        for col in ("prompt_tokens", "output_tokens"):
            raw = (row.get(col) or "").strip()
            try:
                value = int(float(raw))
            except ValueError:
                raise ScenarioError(f"trace CSV row {i}: {col} is not a number ({raw!r})") from None
            if value < 1 or value != float(raw):
                raise ScenarioError(f"trace CSV row {i}: {col} must be a positive integer, got {raw!r}")
            pair.append(value)
        rows.append((pair[0], pair[1]))
    if not rows:
        raise ScenarioError("trace CSV: no rows")
    return tuple(rows)
