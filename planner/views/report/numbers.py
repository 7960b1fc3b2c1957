"""Numbers for a reader: three significant figures, SI prefixes, thousands
separators, never scientific notation, and "—" with the reason where a value
does not exist (an infeasible plan's NaN, an unreachable TTFT's inf)."""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from numbers import Real
from typing import Any

__all__ = ["MISSING", "SIG_FIGS", "count", "is_number", "missing", "percent", "quantity", "readable_text", "sig", "usd"]

MISSING = "—"
SIG_FIGS = 3  # what a review reads; the CLI's JSON keeps full precision
# Prefixes for a unit that takes them (bytes, FLOP/s, bytes/s, seconds below 1 s).
_UP = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_DOWN = ((1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
# A number in scientific notation inside a text (a derivation's substituted values: 7.055e+10).
_SCIENTIFIC = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?)[eE]([+-]?\d+)(?![\w.])")
_NON_FINITE = re.compile(r"\b(?:nan|NaN|inf|Infinity)\b")


def is_number(value: Any) -> bool:
    """A finite real number (bool is not a number here)."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


def missing(reason: str = "") -> str:
    """The text for a value that does not exist: "—" and why."""
    return f"{MISSING} ({reason})" if reason else MISSING


def sig(x: float, figures: int = SIG_FIGS, *, whole: bool = True) -> str:
    """``x`` to ``figures`` significant figures in positional notation with
    thousands separators, halves rounded up as a person would (the shortest
    decimal that reads back as ``x``, not its binary value): 2.074 → "2.07",
    70.55 → "70.6", 6204 → "6,200", 0.0003111 → "0.000311"; a whole number
    below 10¹⁵ is shown exactly (32 → "32", 2300 → "2,300") unless ``whole`` is False."""
    if x == 0:
        return "0"
    d = Decimal(repr(float(x)))
    if whole and d == d.to_integral_value() and abs(d) < Decimal(10) ** 15:
        return f"{int(d):,}"
    magnitude = d.adjusted()
    rounded = d.quantize(Decimal(1).scaleb(magnitude - figures + 1), rounding=ROUND_HALF_UP)
    if rounded.adjusted() > magnitude:  # 999.6 → 1,000: one place fewer
        rounded = d.quantize(Decimal(1).scaleb(magnitude - figures + 2), rounding=ROUND_HALF_UP)
    return f"{rounded:,f}"


def count(x: Any, reason: str = "") -> str:
    """A whole count (GPUs, replicas, tokens): exact, with separators."""
    if not is_number(x):
        return missing(reason)
    return f"{round(float(x)):,}"


def percent(x: Any, reason: str = "") -> str:
    """A fraction as a percentage: 0.688 → "68.8%"."""
    return f"{sig(float(x) * 100)}%" if is_number(x) else missing(reason)


def usd(x: Any, reason: str = "", per: str = "") -> str:
    """Dollars to three significant figures ("$2.07", "$112", "$0.311"), with ``/per``."""
    if not is_number(x):
        return missing(reason)
    text = f"-${sig(-float(x), whole=False)}" if x < 0 else f"${sig(float(x), whole=False)}"
    return f"{text}/{per}" if per else text


def quantity(x: Any, unit: str, reason: str = "") -> str:
    """A value in SI base units for a reader: bytes → "70.6 GB", s → "38.2 ms" /
    "17.6 s", FLOP/s → "1.98 PFLOP/s"; a unit without prefixes (req/s, tok/s)
    keeps the plain number with separators."""
    if not is_number(x):
        return missing(reason)
    value = float(x)
    if unit == "s":
        if abs(value) >= 1 - 5e-4 or value == 0:  # 0.99996 s reads as 1.00 s, not 1,000 ms
            return f"{sig(value)} s"
        return _prefixed(value, "s", _DOWN)
    if unit in ("bytes", "bytes/s", "FLOP/s", "B", "B/s"):
        label = {"bytes": "B", "bytes/s": "B/s"}.get(unit, unit)
        return _prefixed(value, label, _UP) if abs(value) >= 1e3 else f"{sig(value)} {label}"
    if unit in ("fraction", "%"):
        return percent(value)
    if unit.startswith("USD"):
        return usd(value, per=unit.removeprefix("USD").lstrip("/"))
    return f"{sig(value)} {unit}".rstrip()


def _prefixed(value: float, unit: str, table: tuple[tuple[float, str], ...]) -> str:
    for scale, prefix in table:
        if abs(value) >= scale * (1 - 5e-4):  # 999.96 MB reads as 1.00 GB, not 1,000 MB
            return f"{sig(value / scale)} {prefix}{unit}"
    scale, prefix = table[-1]
    return f"{sig(value / scale)} {prefix}{unit}"


def _scientific(match: re.Match[str]) -> str:
    mantissa, exponent = float(match.group(1)), int(match.group(2))
    if abs(mantissa) == 1.0:  # a power of ten in a formula: 1e6 → 10⁶
        return ("-" if mantissa < 0 else "") + "10" + str(exponent).translate(_SUPERSCRIPT)
    value = mantissa * 10.0**exponent
    for scale, prefix in _UP + _DOWN:
        if abs(value) >= scale * (1 - 5e-4):
            return f"{sig(value / scale)} {prefix}"
    return sig(value)


def readable_text(text: str) -> str:
    """A derivation's text for a reader: every number in scientific notation
    becomes positional with an SI prefix (7.055e+10 → "70.6 G", 1e6 → "10⁶"),
    and "nan"/"inf" become "—"."""
    return _NON_FINITE.sub(MISSING, _SCIENTIFIC.sub(_scientific, text))
