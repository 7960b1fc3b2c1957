"""Chart labels that never overlap: label a point only where there is room.

A greedy pass in the order given (most important first): a point keeps its label
when, in chart-fraction coordinates (log axes in log space), it is at least
``min_dx`` of the width or ``min_dy`` of the height away from every label kept so far.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["LABEL_MIN_DX", "LABEL_MIN_DY", "room_for_labels"]

# A short label ("ridge 295 FLOP/B", "B=64") is ~12% of a chart's width and ~5% of its height.
LABEL_MIN_DX = 0.12
LABEL_MIN_DY = 0.05


def _fractions(values: Sequence[float], log: bool, domain: tuple[float, float] | None) -> list[float]:
    def t(x: float) -> float:
        return math.log10(x) if log and x > 0 else (x if not log else math.nan)

    v = [t(x) for x in values]
    finite = [x for x in v if math.isfinite(x)]
    if not finite:
        return [math.nan] * len(v)
    lo, hi = (t(domain[0]), t(domain[1])) if domain else (min(finite), max(finite))
    span = hi - lo or 1.0
    return [(x - lo) / span if math.isfinite(x) else math.nan for x in v]


def room_for_labels(xs: Sequence[float], ys: Sequence[float], *, log_x: bool = False, log_y: bool = False,
                    x_domain: tuple[float, float] | None = None, y_domain: tuple[float, float] | None = None,
                    min_dx: float = LABEL_MIN_DX, min_dy: float = LABEL_MIN_DY) -> list[bool]:
    """Which points get a label (True) so that no two labels overlap; ``x_domain`` /
    ``y_domain``: the chart's axis extents (default: the points' own)."""
    fx, fy = _fractions(xs, log_x, x_domain), _fractions(ys, log_y, y_domain)
    kept: list[tuple[float, float]] = []
    out = []
    for x, y in zip(fx, fy, strict=True):
        ok = math.isfinite(x) and math.isfinite(y) and all(abs(x - kx) >= min_dx or abs(y - ky) >= min_dy
                                                           for kx, ky in kept)
        if ok:
            kept.append((x, y))
        out.append(ok)
    return out
