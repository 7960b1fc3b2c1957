"""Page display helpers: a number that does not exist (an infeasible plan's NaN,
an unreachable TTFT's inf, a missing value) is shown as "—", never "nan"/"inf"."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

from planner import human

__all__ = ["MISSING", "derivation_md", "is_number", "plain", "shown"]

MISSING = "—"


def is_number(value: Any) -> bool:
    """A finite real number, numpy's included (bool is not a number here)."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def shown(value: Any, unit: str = "", fmt: str | None = None) -> str:
    """``human(value, unit)`` (or ``format(value, fmt)``), or "—" when there is no
    finite number (None, NaN, ±inf); text passes through as ``human`` gives it."""
    if isinstance(value, bool) or (value is not None and not isinstance(value, Real)):
        return human(value, unit)
    if not is_number(value):
        return MISSING
    number = int(value) if isinstance(value, Integral) else float(value)
    return format(number, fmt) if fmt is not None else human(number, unit)


_MARKDOWN_LINKS = str.maketrans({c: "\\" + c for c in "[]<>`\\"})


def plain(text: str) -> str:
    """A message that may repeat a stranger's text (a link parameter, a file's
    contents), for st.error/st.warning: link, HTML and code markup escaped, so
    ``[click here](https://…)`` shows as typed instead of as a disguised link."""
    return text.translate(_MARKDOWN_LINKS)


def derivation_md(dv: Any, *, reason: str | None = None, name: bool = False) -> str:
    """A derivation as markdown: formula, substituted values and result, or the
    formula and "—" with ``reason`` when the result is not a finite number (the
    substituted line would only repeat the NaN)."""
    head = f"**{dv.name}** = `{dv.formula}`" if name else f"`{dv.formula}`"
    if not is_number(dv.value):
        return f"{head}  \n= {MISSING} ({reason or 'not defined for this scenario'})"
    return f"{head}  \n= `{dv.substituted}` = **{dv.value:.6g} {dv.unit}** · *{dv.origin}*"
