"""A day of traffic: ``workload.profile`` points, their CSV form and named shapes.

* The profile is piecewise linear through its points ``(t_s, requests_per_s)`` and
  repeats daily: after the last point it runs linearly back to the first point's
  rate at ``t_s + DAY_S`` (before the first point, likewise from the last one).
* ``diurnal``: a cosine between ``trough`` and ``peak`` with its maximum at
  ``peak_hour`` and its minimum 12 hours away,
  rate(t) = trough + (peak − trough) × (1 + cos(2π (t − peak_hour × 3600) / DAY_S)) / 2,
  sampled every ``DIURNAL_STEP_S``.
* CSV: a header with ``t_s,requests_per_s`` and one row per point (text only: the
  parser never opens a path; the CLI reads a file its user names with a size cap).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from planner.errors import ScenarioError
from planner.io.csvtext import csv_number, csv_rows

__all__ = [
    "DAY_S",
    "DIURNAL_STEP_S",
    "MAX_PROFILE_CSV_BYTES",
    "MAX_PROFILE_POINTS",
    "MAX_PROFILE_RATE",
    "ProfilePoint",
    "check_profile",
    "diurnal_profile",
    "parse_profile_csv",
    "parse_shape",
    "profile_integral",
    "profile_argmax",
    "profile_max",
    "profile_rate",
    "profile_rates",
]

DAY_S = 86_400.0
# One point a minute for a day (1,440) is the finest profile a capacity review
# needs; 10,000 points leaves room for a 10-second sampling of a ramp.
MAX_PROFILE_POINTS = 10_000
# A profile CSV: 10,000 rows of two ~12-character numbers is ~250 KB.
MAX_PROFILE_CSV_BYTES = 1_000_000
# The simulator's bound on an offered rate (planner.simulate.options.MAX_RATE_REQ_S).
MAX_PROFILE_RATE = 1e6
# The diurnal shape is sampled every 15 minutes (96 points): the cosine between
# samples is within 0.3% of the linear interpolation.
DIURNAL_STEP_S = 900.0
_MAX_FIELD_CHARS = 40


class ProfilePoint(BaseModel):
    """One point of the daily traffic profile."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    t_s: Annotated[float, Field(ge=0, lt=DAY_S, allow_inf_nan=False)]
    requests_per_s: Annotated[float, Field(ge=0, le=MAX_PROFILE_RATE, allow_inf_nan=False)]


def check_profile(points: Sequence[ProfilePoint]) -> None:
    """Raise ValueError (one line) for an empty, oversized or unsorted profile, or one with no traffic."""
    if not points:
        raise ValueError("the profile is empty; give at least one {t_s, requests_per_s} point")
    if len(points) > MAX_PROFILE_POINTS:
        raise ValueError(f"{len(points):,} points is over the limit of {MAX_PROFILE_POINTS:,}")
    for i in range(1, len(points)):
        if points[i].t_s <= points[i - 1].t_s:
            raise ValueError(f"t_s must increase: point {i} ({points[i].t_s:g} s) is not after point {i - 1} "
                             f"({points[i - 1].t_s:g} s)")
    if max(p.requests_per_s for p in points) <= 0:
        raise ValueError("every rate is 0; the profile needs some traffic")


def _wrapped(points: Sequence[ProfilePoint]) -> tuple[list[float], list[float]]:
    """Breakpoints over one day [0, DAY_S], with the daily wrap-around made explicit."""
    ts = [p.t_s for p in points]
    rs = [p.requests_per_s for p in points]
    if len(ts) == 1:
        return [0.0, DAY_S], [rs[0], rs[0]]
    # Rate at t = 0 (and DAY_S): on the segment from the last point to the first one a day later.
    span = ts[0] + DAY_S - ts[-1]
    r0 = rs[-1] + (rs[0] - rs[-1]) * (DAY_S - ts[-1]) / span
    xs, ys = ([] if ts[0] == 0 else [0.0]) + ts + [DAY_S], ([] if ts[0] == 0 else [r0]) + rs + [r0 if ts[0] else rs[0]]
    return xs, ys


def profile_rate(points: Sequence[ProfilePoint], t_s: float) -> float:
    """The rate at time ``t_s`` (taken modulo a day)."""
    xs, ys = _wrapped(points)
    t = t_s % DAY_S
    for i in range(1, len(xs)):
        if t <= xs[i]:
            x0, x1 = xs[i - 1], xs[i]
            return ys[i - 1] + (ys[i] - ys[i - 1]) * ((t - x0) / (x1 - x0) if x1 > x0 else 0.0)
    return ys[-1]


def profile_rates(points: Sequence[ProfilePoint], times_s: NDArray[np.float64]) -> NDArray[np.float64]:
    """The rate at each of ``times_s`` (modulo a day), vectorized."""
    xs, ys = _wrapped(points)
    return np.asarray(np.interp(np.mod(times_s, DAY_S), xs, ys), dtype=float)


def profile_max(points: Sequence[ProfilePoint], start_s: float = 0.0, end_s: float = DAY_S) -> float:
    """The highest rate over [start_s, end_s] (within one day): at an end or a breakpoint."""
    xs, _ = _wrapped(points)
    inside = [x for x in xs if start_s < x < end_s]
    return max(profile_rate(points, t) for t in [start_s, end_s, *inside])


def profile_argmax(points: Sequence[ProfilePoint], start_s: float = 0.0, end_s: float = DAY_S) -> float:
    """The earliest time in [start_s, end_s] (within one day) where the rate is highest."""
    xs, _ = _wrapped(points)
    cands = sorted([start_s, end_s, *[x for x in xs if start_s < x < end_s]])
    rates = [profile_rate(points, t) for t in cands]
    return cands[rates.index(max(rates))]


def profile_integral(points: Sequence[ProfilePoint], start_s: float = 0.0, end_s: float = DAY_S) -> float:
    """∫ rate dt over [start_s, end_s] (within one day): requests in that span (trapezoids, exact)."""
    xs, _ = _wrapped(points)
    cuts = [start_s, *[x for x in xs if start_s < x < end_s], end_s]
    total = 0.0
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        total += (b - a) * (profile_rate(points, a) + profile_rate(points, b)) / 2.0
    return total


def diurnal_profile(*, peak: float, trough: float, peak_hour: float) -> tuple[ProfilePoint, ...]:
    """The ``diurnal`` shape as profile points (see the module docstring)."""
    if not (math.isfinite(peak) and math.isfinite(trough) and math.isfinite(peak_hour)):
        raise ScenarioError("diurnal: peak, trough and peak_hour must be finite numbers")
    if not 0 <= trough <= peak <= MAX_PROFILE_RATE or peak <= 0:
        raise ScenarioError(f"diurnal: need 0 ≤ trough ≤ peak ≤ {MAX_PROFILE_RATE:g} and peak > 0, "
                            f"got trough={trough:g}, peak={peak:g}")
    if not 0 <= peak_hour < 24:
        raise ScenarioError(f"diurnal: peak_hour must be from 0 to 24 (exclusive), got {peak_hour:g}")
    out = []
    n = int(DAY_S / DIURNAL_STEP_S)
    for i in range(n):
        t = i * DIURNAL_STEP_S
        phase = 2.0 * math.pi * (t - peak_hour * 3600.0) / DAY_S
        rate = trough + (peak - trough) * (1.0 + math.cos(phase)) / 2.0
        out.append(ProfilePoint(t_s=t, requests_per_s=min(max(rate, trough), peak)))
    return tuple(out)


def parse_shape(text: str) -> tuple[ProfilePoint, ...]:
    """``diurnal:peak=100,trough=10,peak_hour=14`` → the shape's profile points."""
    name, _, args = text.partition(":")
    if name.strip() != "diurnal":
        raise ScenarioError(f"--shape: unknown shape {name.strip()[:40]!r}; expected diurnal:peak=R,trough=R,peak_hour=H")
    values: dict[str, float] = {}
    for part in args.split(","):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in {"peak", "trough", "peak_hour"}:
            raise ScenarioError(f"--shape: expected diurnal:peak=R,trough=R,peak_hour=H, got {part.strip()[:40]!r}")
        try:
            if len(raw.strip()) > _MAX_FIELD_CHARS:
                raise ValueError(raw)
            values[key] = float(raw)
        except ValueError:
            raise ScenarioError(f"--shape: {key} is not a number: {raw.strip()[:40]!r}") from None
    missing = [k for k in ("peak", "trough", "peak_hour") if k not in values]
    if missing:
        raise ScenarioError(f"--shape: missing {', '.join(missing)}; expected diurnal:peak=R,trough=R,peak_hour=H")
    return diurnal_profile(peak=values["peak"], trough=values["trough"], peak_hour=values["peak_hour"])


def parse_profile_csv(text: str) -> tuple[ProfilePoint, ...]:
    """Profile points from CSV text with columns ``t_s,requests_per_s`` (at most
    MAX_PROFILE_CSV_BYTES and MAX_PROFILE_POINTS rows; sorted, rates ≥ 0)."""
    if len(text) > MAX_PROFILE_CSV_BYTES:
        raise ScenarioError(f"profile: the CSV is over the limit of {MAX_PROFILE_CSV_BYTES:,} bytes")
    points: list[ProfilePoint] = []
    for line, row in csv_rows(text, "profile", ("t_s", "requests_per_s")):
        if len(points) >= MAX_PROFILE_POINTS:
            raise ScenarioError(f"profile: more than {MAX_PROFILE_POINTS:,} rows; the limit is {MAX_PROFILE_POINTS:,}")
        t, rate = (csv_number(row, col, what="profile", line=line, max_chars=_MAX_FIELD_CHARS)
                   for col in ("t_s", "requests_per_s"))
        if not 0 <= t < DAY_S:
            raise ScenarioError(f"profile.t_s: must be from 0 to {DAY_S:g} s (exclusive) at line {line}")
        if not 0 <= rate <= MAX_PROFILE_RATE:
            raise ScenarioError(f"profile.requests_per_s: must be from 0 to {MAX_PROFILE_RATE:g} at line {line}")
        points.append(ProfilePoint(t_s=t, requests_per_s=rate))
    try:
        check_profile(points)
    except ValueError as exc:
        raise ScenarioError(f"profile: {exc}") from None
    return tuple(points)
