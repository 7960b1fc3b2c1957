"""Readable column headers, display units and "—" for flat result rows (the probe's
per-level table, its client table, a calibration's residuals).

A row from :meth:`planner.probe.ProbeRun.csv_rows` keys its columns the way the CSV
does (``ttft_s.p50``, ``client.loop_lag_p99_s``, ``predicted.output_tok_s``); a reader
sees ``TTFT p50 (ms)``, ``Client loop lag p99 (ms)``, ``Predicted output (tok/s)``.
Seconds are shown in ms and bytes in GB (the header says so), shares stay fractions
unless a column says %, and a value that does not exist (None, NaN) is ``"—"``.  The
CSV download keeps the raw keys: they are its public contract.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from planner.views.report.numbers import MISSING  # the one "—" of every view
from planner.views.vocabulary import FIELD_LABELS, label_for

__all__ = ["MISSING", "RESIDUAL_METRICS", "display_column", "display_rows", "residual_rows"]

STATS = ("mean", "p50", "p90", "p99", "count", "max", "min")
# (suffix of a key's last part, shown unit, factor from the SI value): the longest suffix first.
_UNITS: tuple[tuple[str, str, float], ...] = (
    ("_bytes_per_s", "GB/s", 1e-9),
    ("_tok_s", "tok/s", 1.0),
    ("_req_s", "req/s", 1.0),
    ("_bytes", "GB", 1e-9),
    ("_s", "ms", 1e3),
)
_WHOLE_RATES = {"tok_s": ("Tokens", "tok/s"), "req_s": ("Requests", "req/s")}
# Words of a probe row that read better spelled out (the rest: label_for's acronyms).
_NAMES = {
    "ttft_sent_s": ("TTFT from send", "ms", 1e3),
    "output_tokens_total": ("Output tokens, total", "", 1.0),
    "prompt_tokens_mean": ("Prompt tokens, mean", "", 1.0),
    "rate_req_s": ("Offered rate", "req/s", 1.0),
    "goodput_req_s": ("Goodput", "req/s", 1.0),
    "req_s": ("Throughput", "req/s", 1.0),
    "output_tok_s": ("Output", "tok/s", 1.0),
    "duration_s": ("Duration", "s", 1.0),
    "run_id": ("Run", "", 1.0),
    "url": ("URL", "", 1.0),
    "batch_size": ("Batch", "", 1.0),
    "engine": ("", "", 1.0),  # engine.engine: the engine's name, under the section's own word
    "cpu_share": ("CPU", "cores", 1.0),  # summed over the client's processes
    "cpu_share_max_worker": ("CPU, busiest process", "cores", 1.0),
    "rel_error": ("Error", "%", 100.0),
}
_SECTIONS = {"predicted": "Predicted", "engine": "Engine", "client": "Client", "failures": "Failures:"}


def _base(part: str) -> tuple[str, str, float]:
    """A key's part as (words, unit, factor): ``loop_lag_p99_s`` → ("Loop lag p99", "ms", 1000)."""
    if part in _NAMES:
        return _NAMES[part]
    if part in _WHOLE_RATES:
        name, unit = _WHOLE_RATES[part]
        return name, unit, 1.0
    unit, factor = "", 1.0
    for suffix, shown_unit, k in _UNITS:
        if part.endswith(suffix) and len(part) > len(suffix):
            unit, factor = shown_unit, k
            break
    return label_for(f"row.{part}"), unit, factor  # never FIELD_LABELS' plan-level meaning of a bare key


def display_column(key: str) -> tuple[str, float]:
    """The header a reader sees for ``key`` and the factor its SI values are multiplied by."""
    if key in FIELD_LABELS:
        words, unit, factor = FIELD_LABELS[key], *_base(key.rsplit(".", 1)[-1])[1:]
        return (f"{words} ({unit})" if unit else words), factor
    parts = key.split(".")
    section = ""
    if len(parts) > 1 and parts[0] in _SECTIONS:
        section = _SECTIONS[parts[0]]
        parts = parts[1:]
        if section == "Failures:":  # failures.<reason>: the reason is the probe's own word, kept
            return f"Failures: {'.'.join(parts)}", 1.0
    stat = ""
    if len(parts) > 1 and parts[-1] in STATS:
        stat = parts.pop()
    words, unit, factor = _base(".".join(parts) if len(parts) > 1 else parts[0])
    if stat == "count":
        stat, unit, factor = "samples", "", 1.0
    head = " ".join(w for w in (section, words, stat) if w)
    if section and words[:1].isupper() and not words[:2].isupper():
        head = " ".join(w for w in (section, words[:1].lower() + words[1:], stat) if w)
    return (f"{head} ({unit})" if unit else head), factor


def _value(value: Any, factor: float) -> Any:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) or (isinstance(value, int) and factor != 1.0):
        return round(value * factor, 3)
    return value


def display_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with readable headers (:func:`display_column`), values in the headers' units and
    "—" where there is no value.  Two keys that would read the same keep the first."""
    out = []
    for row in rows:
        shown: dict[str, Any] = {}
        for key, value in row.items():
            head, factor = display_column(key)
            shown.setdefault(head, _value(value, factor))
        out.append(shown)
    return out


# What a calibration residual's measured value is (planner.probe.calibrate: the level's medians).
RESIDUAL_METRICS = {"itl_p50_s": "ITL p50", "tpot_s": "TPOT p50", "ttft_s": "TTFT p50"}


def residual_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A calibration's residuals (``metric`` names a seconds key such as ``itl_p50_s``; ``measured``
    and ``predicted`` are in seconds) with the metric and its statistic named, both values in ms and
    the error in %."""
    out = []
    for row in rows:
        metric = str(row.get("metric", ""))
        head, factor = display_column(metric)
        name = RESIDUAL_METRICS.get(metric, head.removesuffix(" (ms)"))
        shown = display_rows([{k: v for k, v in row.items() if k not in ("metric", "measured", "predicted",
                                                                           "rel_error")}])[0]
        out.append({**shown, "Metric": name, "Measured (ms)": _value(row.get("measured"), factor),
                    "Predicted (ms)": _value(row.get("predicted"), factor),
                    "Error (%)": _value(row.get("rel_error"), 100.0)})
    return out
