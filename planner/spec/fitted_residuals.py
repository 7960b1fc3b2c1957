"""Cross-validated residuals of the fitted defaults, one per predicted published row.

Written by ``python bench/fit_defaults.py --data ../shared/data/published_calibration.json --write``
from its leave-one-source-out run (each row predicted by efficiencies fitted
without its publication).  ``planner.sizing.uncertainty`` draws a plan's error
band from the rows nearest to the plan (same GPU and TP, falling back outward).
Each entry: (engine family, catalog GPU, TP degree, quantity, signed error in %
= (predicted − measured) / measured × 100); quantity is ``throughput``,
``ttft`` or ``itl``.
"""

from __future__ import annotations

__all__ = ["FITTED_RESIDUALS", "RESIDUALS_SCHEME"]

RESIDUALS_SCHEME = "leave-one-source-out"

# bench/fit_defaults.py residuals
FITTED_RESIDUALS: tuple[tuple[str, str, int, str, float], ...] = ()
