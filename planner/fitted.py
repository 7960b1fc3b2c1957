"""Efficiency factors fitted on published measurements, per engine family.

Produced by ``python bench/fit_defaults.py --data ../shared/data/published_calibration.json``
(least squares on log error over every predictable row; see the README section
"How accurate is it?").  ``generic`` is fitted on all rows together and serves
engines whose family has too few rows of its own.
"""

from __future__ import annotations

__all__ = ["FITTED_EFFICIENCY", "FITTED_ON"]

FITTED_ON = "shared/data/published_calibration.json"

# bench/fit_defaults.py on published_calibration.json
FITTED_EFFICIENCY: dict[str, dict[str, float]] = {
    "generic": {"bandwidth": 0.8119, "compute": 0.5050, "step_overhead_s": 4.536e-03},
    "trtllm": {"bandwidth": 0.8730, "compute": 0.5038, "step_overhead_s": 5.530e-03},
    "vllm": {"bandwidth": 0.8119, "compute": 0.5050, "step_overhead_s": 4.536e-03},
}
