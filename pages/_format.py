"""Page display helpers: a number that does not exist (an infeasible plan's NaN,
an unreachable TTFT's inf, a missing value) is shown as "—", never "nan"/"inf";
every other number has three significant figures and its unit (``planner.human``)."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

from planner import SloCheck, derivation_value, human, label_for, readable
from planner.io.formatting import markdown_code, markdown_text, one_line

__all__ = ["MISSING", "check_line", "code", "derivation_md", "is_number", "md", "plain", "readable", "round3",
           "sequences", "shown", "usd", "web_url"]

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


def sequences(value: Any) -> str:
    """A count of whole sequences ("12" where 12.7 fit: a 13th does not), or "—"."""
    return f"{math.floor(float(value)):,}" if is_number(value) else MISSING


def round3(value: float) -> float:
    """``value`` rounded to three significant figures (whole numbers from 100 up), for tables
    whose cells stay numbers: 26.63 → 26.6, 8166.2 → 8166, 0.03821 → 0.0382."""
    if not is_number(value) or value == 0:
        return value
    if abs(value) >= 100:
        return float(round(value))
    return round(float(value), 2 - math.floor(math.log10(abs(value))))


def usd(value: Any, per: str = "") -> str:
    """``$2.07`` (``$2.07/Mtok`` with ``per="/Mtok"``), or "—"."""
    return shown(value, "USD") + per if is_number(value) else MISSING


def md(text: str) -> str:
    """Text for a markdown element (a message, a help tooltip, an expander label) with each
    ``$`` escaped: two dollar amounts in one line would otherwise be typeset as LaTeX."""
    return text.replace("$", "\\$")


def plain(text: str) -> str:
    """A stranger's text (a link parameter, a stored scenario's name, description or
    tag, a file's contents, an endpoint's reply) for any element that renders Markdown
    (st.error/warning/info/success, st.table cells, captions, help): shown as typed, on
    one line, never a link, image or markup (``planner.io.formatting.markdown_text``)."""
    return markdown_text(str(text))


def code(text: str) -> str:
    """A stranger's text as an inline code span (a slug, an echoed value): literal, one line."""
    return markdown_code(str(text))


def web_url(text: str) -> str | None:
    """``text`` when it is an http(s) address (a link column may draw it), else None: a
    stranger's ``javascript:`` or ``data:`` URL (an inline spec's source_url) is no link."""
    value = str(text or "").strip()
    return value if value.lower().startswith(("https://", "http://")) and one_line(value) == value else None


def derivation_md(dv: Any, *, reason: str | None = None, name: bool = False) -> str:
    """A derivation as markdown: its reader's name, formula, substituted values (SI
    prefixes, never scientific notation) and result with its unit, or the formula and
    "—" with ``reason`` when the result is not a finite number."""
    formula = readable(dv.formula, powers_of_ten=True)
    head = f"**{md(label_for(dv.name))}** = `{formula}`" if name else f"`{formula}`"
    if not is_number(dv.value):
        return f"{head}  \n= {MISSING} ({reason or 'not defined for this scenario'})"
    value = derivation_value(float(dv.value), dv.unit)
    return f"{head}  \n= `{readable(dv.substituted)}` = **{md(value)}** · *{dv.origin}*"


def check_line(check: SloCheck) -> str:
    """``TTFT p90 · queueing included: 713 ms ≤ 1.00 s target ✓ pass`` (or ✗ fail, or "—" and why),
    the mark drawn with Streamlit's own icon font (no emoji font needed)."""
    value = shown(check.value_s, "s")
    target = human(check.target_s, "s")
    if check.passed is None:
        return f"{check.label}: {MISSING} ({check.why_missing or 'no operating point'}) · target {target}"
    mark = ":green[:material/check_circle: **pass**]" if check.passed else ":red[:material/cancel: **fail**]"
    sign = "≤" if check.passed else ">"
    return f"{check.label}: {value} {sign} {target} target {mark}"
