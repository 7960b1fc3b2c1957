"""Human units for display: the one place SI values become GB, ms, tok/s, $.

Pages and the CLI's table output call these; the core never does.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["NOT_A_NUMBER", "format_value", "human", "is_number"]

# What a table or page shows where a value does not exist (an infeasible
# plan's cost, a queue that never drains): never "nan" or "inf".
NOT_A_NUMBER = "—"


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool): something a reader can use as a number."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def human(value: Any, unit: str) -> str:
    """Format an SI value with its unit for people: bytes→GB, s→ms, FLOP/s→TFLOP/s.
    None, NaN and ±inf show as NOT_A_NUMBER ("—")."""
    if value is None:
        return NOT_A_NUMBER
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if not math.isfinite(value):
        return NOT_A_NUMBER
    if unit == "bytes":
        if abs(value) >= 1e8:
            return f"{value / 1e9:,.2f} GB"
        return f"{value / 1e6:,.2f} MB" if abs(value) >= 1e6 else f"{value / 1e3:,.1f} KB"
    if unit == "s":
        return f"{value * 1e3:,.2f} ms" if abs(value) < 10 else f"{value:,.1f} s"
    if unit == "bytes/s":
        return f"{value / 1e9:,.1f} GB/s"
    if unit == "FLOP/s":
        return f"{value / 1e12:,.1f} TFLOP/s"
    if unit == "fraction":
        return f"{value * 100:.1f}%"
    if unit == "USD":
        return f"${value:,.4g}" if abs(value) < 1 else f"${value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"


def _unit_of(key: str) -> str:
    last = key.rsplit(".", 1)[-1]
    if last.endswith("bytes_per_s"):
        return "bytes/s"
    if last.endswith("flops_per_s"):
        return "FLOP/s"
    if last.endswith("_bytes") or last.endswith("bytes_per_token") or last.endswith("bytes_per_sequence") or last.endswith("bytes_per_gpu") or last.endswith("bytes_per_token_per_gpu"):
        return "bytes"
    if last.endswith("_s") and not last.endswith("tok_s") and not last.endswith("req_s"):
        return "s"
    if last in {"mbu", "mfu"} or last.endswith("_rate") or last.endswith("utilization") or last.endswith("efficiency"):
        return "fraction"
    if last.startswith("usd"):
        return "USD"
    return ""


def format_value(key: str, value: Any) -> str:
    """Human form of a flattened plan value, its unit read from the key's suffix;
    "—" for a value that does not exist (None, NaN, inf)."""
    return human(value, _unit_of(key))
