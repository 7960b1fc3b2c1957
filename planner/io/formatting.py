"""Human units for display: the one place SI values become GB, ms, tok/s, $.

Pages and the CLI's table output call these; the core never does.  Every number a
person reads has three significant figures (whole numbers of 100 and more are shown
whole, with thousands separators), SI prefixes instead of scientific notation, and
its unit: ``38.2 ms``, ``8.03 s``, ``70.6 GB``, ``4.80 TB/s``, ``64.8%``, ``$2.07``.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["NOT_A_NUMBER", "SI_PREFIXES", "derivation_value", "format_value", "human", "is_number", "markdown_code",
           "markdown_text", "one_line", "readable", "sig3"]

# What a table or page shows where a value does not exist (an infeasible
# plan's cost, a queue that never drains): never "nan" or "inf".
NOT_A_NUMBER = "—"


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool): something a reader can use as a number."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

# Decimal SI prefixes from 1e-9 to 1e18 (k lower case, as SI writes it).
SI_PREFIXES: tuple[tuple[float, str], ...] = (
    (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"),
    (1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"),
)
MINUTE_S = 60.0
HOUR_S = 3600.0


def sig3(value: float) -> str:
    """Three significant figures without scientific notation: 0.0382, 4.80, 38.2,
    and whole numbers from 100 up (6,204; 1,250,000) with thousands separators."""
    x = float(value)
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 99.95:
        return f"{x:,.0f}"
    decimals = max(0, 2 - math.floor(math.log10(ax)))
    text = f"{x:.{decimals}f}"
    if abs(float(text)) >= 10 ** (3 - decimals) and decimals > 0:  # rounding carried a digit (9.995 → 10.00)
        text = f"{x:.{decimals - 1}f}"
    return text


def _si(value: float, unit: str) -> str:
    """``value`` with the SI prefix that leaves 1 ≤ mantissa < 1000: 70.6 GB, 328 kB."""
    ax = abs(value)
    if ax == 0:
        return f"0 {unit}".strip()
    for scale, prefix in SI_PREFIXES:
        if ax >= scale * 0.9995:
            return f"{sig3(value / scale)} {prefix}{unit}".strip()
    return f"{sig3(value / 1e-9)} n{unit}".strip()


def _seconds(value: float) -> str:
    ax = abs(value)
    if ax == 0:
        return "0 s"
    if ax < 1e-3:
        return f"{sig3(value * 1e6)} µs"
    if ax < 0.9995:
        return f"{sig3(value * 1e3)} ms"
    if ax < 10 * MINUTE_S:
        return f"{sig3(value)} s"
    if ax < 2 * HOUR_S:
        return f"{sig3(value / MINUTE_S)} min"
    return f"{sig3(value / HOUR_S)} h"


def _usd(value: float) -> str:
    ax = abs(value)
    if ax >= 99.95:
        return f"${value:,.0f}"
    if ax >= 1:
        return f"${value:,.2f}"
    return f"${sig3(value)}"


def human(value: Any, unit: str) -> str:
    """Format an SI value with its unit for people: bytes → GB, s → ms, FLOP/s →
    TFLOP/s, fraction → %, USD → $; other units follow the number (``20.7 req/s``).
    None, NaN and ±inf show as NOT_A_NUMBER ("—")."""
    if value is None:
        return NOT_A_NUMBER
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if not math.isfinite(value):
        return NOT_A_NUMBER
    if unit == "bytes":
        return _si(value, "B")
    if unit == "s":
        return _seconds(value)
    if unit == "bytes/s":
        return _si(value, "B/s")
    if unit == "FLOP/s":
        return _si(value, "FLOP/s")
    if unit == "fraction":
        return f"{sig3(value * 100)}%"
    if unit == "USD":
        return _usd(value)
    return f"{_count_or_sig3(value)} {unit}".strip()


def _count_or_sig3(value: float) -> str:
    """A whole number in full (``32``, ``1,250``), anything else to three significant figures."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return sig3(value)


_USD_UNIT = re.compile(r"^USD(/.+)?$")


def derivation_value(value: float, unit: str) -> str:
    """A derivation's result with its unit as people read it: ``70.6 GB``,
    ``$2.07/Mtok``, ``38.2 ms``, ``412 FLOP/byte``, ``237 sequences``."""
    m = _USD_UNIT.match(unit)
    if m:
        return _usd(value) + (m.group(1) or "")
    if unit in ("bytes", "s", "bytes/s", "FLOP/s", "fraction"):
        return human(value, unit)
    return f"{_count_or_sig3(value)} {unit}".strip()


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_SCIENTIFIC = re.compile(r"(?<![\w.])([-+]?\d+(?:\.\d+)?)[eE]([-+]?\d+)(?![\w.])")


def readable(text: str, *, powers_of_ten: bool = False) -> str:
    """Text with every number in scientific notation rewritten with an SI prefix
    (``7.055e+10`` → ``70.6 G``, ``3.35e+12`` → ``3.35 T``, ``2e-05`` → ``20.0 µ``);
    with ``powers_of_ten`` (a formula) an exact power stays one: ``1e6`` → ``10⁶``."""

    def one(m: re.Match[str]) -> str:
        try:
            x = float(f"{m.group(1)}e{m.group(2)}")
        except ValueError:
            return m.group(0)
        if not math.isfinite(x):
            return m.group(0)
        written = m.group(2)
        as_typed = powers_of_ten or not (written.startswith(("+", "-0")) or written.startswith("0"))
        if as_typed and m.group(1) == "1":  # an exact power of ten, as a formula writes it: 1e6 → 10⁶
            return "10" + str(int(m.group(2))).translate(_SUPERSCRIPT)
        return _si(x, "")

    return _SCIENTIFIC.sub(one, text)


def _unit_of(key: str) -> str:
    last = key.rsplit(".", 1)[-1]
    if last.endswith("bytes_per_s"):
        return "bytes/s"
    if last.endswith("flops_per_s"):
        return "FLOP/s"
    if last.endswith("_bytes") or last.endswith("bytes_per_token") or last.endswith("bytes_per_sequence") or last.endswith("bytes_per_gpu") or last.endswith("bytes_per_token_per_gpu"):
        return "bytes"
    if last.endswith("_s") and not last.endswith("tok_s") and not last.endswith("req_s") and not last.endswith("per_s"):
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


# Text from strangers (a link parameter, a stored scenario's name, an endpoint's error
# body) inside Markdown that the app renders (st.error, st.table cells, help text).
# A line break or other control character becomes a space (one line: no block can
# start but at its first character, which is escaped when it could); every character
# that can open inline Markdown, HTML or Streamlit markup where it stands is
# backslash-escaped (links and images ``[ ]``, HTML and autolinks ``<``, code spans,
# emphasis ``*`` and non-intraword ``_``, strikethrough ``~``, formulas ``$``, entities
# ``&name;``); and a GFM "autolink literal" (``http://``, ``www.``, ``user@host``),
# which the renderer finds in plain text even after escaping, is broken by an
# invisible U+2060 WORD JOINER, so no link is drawn.
WORD_JOINER = "\u2060"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_MD_INLINE = re.compile(r"[\\`*\[\]<~$]|(?<![^\W_])_|_(?![^\W_])|&(?=#?\w+;)")
_AUTOLINK = re.compile(r"(?i)(?:https?|ftp|mailto|xmpp)(?=:)|www(?=\.)|(?<=[\w.+-])(?=@)")
# A block marker at the start: "1. " list, "- " bullet, "# " heading, "> " quote, "---" rule.
_MD_BLOCK_START = re.compile(r"^(?:\d{1,9}(?=[.)](?:\s|$))|(?=[-+](?:\s|$))|(?=#{1,6}(?:\s|$))|(?=>)|(?=-{3,}\s*$))")


def one_line(text: str) -> str:
    """``text`` with each run of line breaks and control characters as one space."""
    return _CONTROL.sub(" ", text)


def markdown_text(text: str) -> str:
    """A stranger's ``text`` for a Markdown element: shown as typed (one line), never
    a link, image, HTML, code span, emphasis, heading, list or formula."""
    out = _MD_INLINE.sub(lambda m: "\\" + m.group(0), one_line(str(text)))
    out = _AUTOLINK.sub(lambda m: m.group(0) + WORD_JOINER, out)
    return _MD_BLOCK_START.sub(lambda m: m.group(0) + "\\", out, count=1)


def markdown_code(text: str) -> str:
    """A stranger's ``text`` as an inline code span (literal, never a link): one line,
    its backticks shown as ``'`` so the span cannot be closed early."""
    return "`" + (one_line(str(text)).replace("`", "'").strip() or " ") + "`"
