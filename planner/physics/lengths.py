"""Prompt/output length distributions: fixed means, lognormal, or a trace.

A distribution is reduced to weighted joint samples (prompt, output) from which
the planner takes the moments it needs.  Lognormal(mean, σ): the underlying
normal has μ = ln(mean) − σ²/2, so the mean is exact; it is discretized at 48
equal-probability quantiles per dimension (prompt and output independent).
A trace is used as given (one sample per row).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from planner.errors import ScenarioError
from planner.io.csvtext import csv_rows
from planner.io.jsonfile import read_text_file
from planner.spec.scenario import MAX_SEQUENCE_TOKENS, MAX_TRACE_ROWS

__all__ = [
    "MAX_TRACE_CSV_BYTES",
    "LengthSamples",
    "csv_rows",
    "draw_lengths",
    "length_samples",
    "lognormal_mu",
    "lognormal_quantiles",
    "parse_trace_csv",
    "token_count",
    "weighted_quantile",
]

QUANTILE_POINTS = 48
# A length-trace CSV: MAX_TRACE_ROWS rows of two integers is ~1.5 MB; 4 MB
# leaves room for spaces and CRLF line ends.
MAX_TRACE_CSV_BYTES = 4_000_000
_MAX_FIELD_CHARS = 40
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


def lognormal_mu(*, mean: float, sigma: float) -> float:
    """The underlying normal's μ = ln(mean) − σ²/2 of a lognormal whose mean is ``mean``."""
    return math.log(mean) - sigma * sigma / 2.0


def lognormal_quantiles(*, mean: float, sigma: float, points: int = QUANTILE_POINTS) -> Arr:
    """Equal-probability quantiles of a lognormal with the given mean and σ,
    rescaled so their average is exactly ``mean``."""
    if sigma <= 0:
        return np.array([float(mean)])
    mu = lognormal_mu(mean=mean, sigma=sigma)
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


def draw_lengths(*, mean_tokens: float, count: int, distribution: str, sigma: float,
                 rng: np.random.Generator, max_tokens: int | None = None) -> NDArray[np.int64]:
    """``count`` random integer lengths ≥ 1 with the given mean (the simulator's draws; the
    planner's moments use :func:`length_samples`): fixed, or lognormal(μ, σ) with the same μ."""
    if distribution == "fixed" or sigma == 0:
        out = np.full(count, float(mean_tokens))
    else:
        out = rng.lognormal(mean=lognormal_mu(mean=mean_tokens, sigma=sigma), sigma=sigma, size=count)
    out = np.maximum(np.rint(out), 1.0)
    if max_tokens is not None:
        out = np.minimum(out, max_tokens)
    return np.asarray(out, dtype=np.int64)


def token_count(raw: str, *, label: str) -> int:
    """One token-count field of a trace row: an integer from 1 to MAX_SEQUENCE_TOKENS, written
    as a number (``2000`` or ``2000.0``); ``label`` names the field and its row in the message.
    Both trace formats (length pairs here, timed requests in the simulator) read counts with it."""
    text = raw.strip()
    try:
        value = float(text) if len(text) <= _MAX_FIELD_CHARS else math.nan
    except ValueError:
        value = math.nan
    if value != value:
        raise ScenarioError(f"{label} is not a number ({text[:_MAX_FIELD_CHARS]!r})")
    if not (1 <= value <= MAX_SEQUENCE_TOKENS and value.is_integer()):
        raise ScenarioError(f"{label} must be an integer from 1 to {MAX_SEQUENCE_TOKENS:,}, "
                            f"got {text[:_MAX_FIELD_CHARS]!r}")
    return int(value)


def parse_trace_csv(source: str | Path | io.TextIOBase, *, max_rows: int = MAX_TRACE_ROWS) -> tuple[tuple[int, int], ...]:
    """Read ``prompt_tokens,output_tokens`` CSV text (a ``Path``: a file a local
    user names, at most MAX_TRACE_CSV_BYTES; a ``str`` is always CSV text, never
    a path); errors name the row and field.  At most ``max_rows`` rows of
    1..MAX_SEQUENCE_TOKENS tokens."""
    if isinstance(source, Path):
        text = read_text_file(source, max_bytes=MAX_TRACE_CSV_BYTES, what="trace")
    elif isinstance(source, str):
        text = source
    else:
        text = source.read(MAX_TRACE_CSV_BYTES + 1)
        if len(text) > MAX_TRACE_CSV_BYTES:
            raise ScenarioError(f"trace CSV: over the limit of {MAX_TRACE_CSV_BYTES:,} characters")
    max_rows = min(max_rows, MAX_TRACE_ROWS)
    rows: list[tuple[int, int]] = []
    for i, row in csv_rows(text, "trace CSV", ("prompt_tokens", "output_tokens")):
        if len(rows) >= max_rows:
            raise ScenarioError(f"trace CSV: more than {max_rows:,} rows; the limit is {max_rows:,}")
        pair = [token_count(row.get(col) or "", label=f"trace CSV row {i}: {col}")
                for col in ("prompt_tokens", "output_tokens")]
        rows.append((pair[0], pair[1]))
    if not rows:
        raise ScenarioError("trace CSV: no rows")
    return tuple(rows)
