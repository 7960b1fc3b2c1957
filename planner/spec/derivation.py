"""Derivations: a headline number together with the work that produced it.

Every result the planner shows carries a :class:`Derivation`: the formula as the
seeds write it, the same formula with the values substituted, the result, its
unit and its origin (datasheet, assumed default, calibrated, measured, derived).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["Derivation", "Origin", "fmt_num", "put_derivation"]

Origin = Literal[
    "datasheet",
    "default",
    "default (fitted on published data)",
    "calibrated",
    "measured",
    "derived",
    "input",
]


def fmt_num(x: float) -> str:
    """Compact human form for substituted values: 3.35e+12, 0.8, 131,072; "—"
    for NaN or ±inf (a value that does not exist is never printed as a number)."""
    if not math.isfinite(x):
        return "—"
    ax = abs(x)
    if ax != 0 and (ax >= 1e7 or ax < 1e-3):
        return f"{x:.4g}"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.4g}"


class Derivation(BaseModel):
    """How one number was computed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    formula: str
    substituted: str
    value: float
    unit: str
    origin: Origin = "derived"

    def text(self) -> str:
        """One line: ``name = formula = substituted = value unit [origin]``."""
        return (
            f"{self.name} = {self.formula} = {self.substituted} = "
            f"{fmt_num(self.value)} {self.unit} [{self.origin}]"
        )


def put_derivation(out: dict[str, Derivation], key: str, formula: str, substituted: str, value: float, unit: str,
                   origin: Origin = "derived") -> None:
    """Record one derivation row under ``key`` (its name): the sections' one way to add a row."""
    out[key] = Derivation(name=key, formula=formula, substituted=substituted, value=float(value), unit=unit,
                          origin=origin)
