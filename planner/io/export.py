"""Flat exports: dotted keys, units in the column names, CSV safe for spreadsheets.

The CLI's ``--format csv`` and the UI's download share :func:`csv_text`.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

__all__ = [
    "REASON_COLUMN",
    "csv_text",
    "finite_row",
    "flatten",
    "neutralize_cell",
    "plan_infeasible_reason",
    "plan_row",
    "unit_column",
]

# The column that says why a row's empty cells are empty (NaN/inf in the core).
REASON_COLUMN = "infeasible_reason"

_INJECTION_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def flatten(data: Mapping[str, Any], prefix: str = "", *, skip: Iterable[str] = ("derivations",)) -> dict[str, Any]:
    """Nested dict → {dotted.key: scalar}; lists become JSON text."""
    skip = set(skip)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in skip and not prefix:
            continue
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten(value, dotted, skip=()))
        elif isinstance(value, (list, tuple)):
            out[dotted] = json.dumps(list(value))
        else:
            out[dotted] = value
    return out


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def plan_infeasible_reason(plan_json: Mapping[str, Any]) -> str | None:
    """Why some of a plan's numbers do not exist, or None when all of them do."""
    if not any(_non_finite(v) for v in flatten(plan_json, skip=()).values()):
        return None
    op = plan_json.get("operating_point") or {}
    fleet = plan_json.get("fleet") or {}
    if op.get("feasible") is False:
        return str(fleet.get("verdict") or op.get("reason") or "no operating point meets the SLO")
    return "not defined for this scenario (no finite value)"


def finite_row(row: Mapping[str, Any], reason: str | None = None) -> dict[str, Any]:
    """A flat row with every NaN/inf made None (an empty CSV cell, "—" in a
    table).  When a value was dropped the row gets :data:`REASON_COLUMN` (``reason``,
    else a generic one) unless it already has that column."""
    out = {k: (None if _non_finite(v) else v) for k, v in row.items()}
    if out.get(REASON_COLUMN) is None and any(_non_finite(v) for v in row.values()):
        out[REASON_COLUMN] = reason or "not defined (no finite value)"
    return out


def neutralize_cell(value: Any) -> Any:
    """Prefix a text cell starting with = + - @ (or tab/CR) with a quote so a
    spreadsheet shows it as text instead of running it.  Numbers pass through."""
    if isinstance(value, str) and value.startswith(_INJECTION_PREFIXES):
        return "'" + value
    return value


def unit_column(key: str) -> str:
    """Column name with its unit: SI keys already carry it (``step_s``,
    ``weight_bytes``); the name is the dotted key itself."""
    return key


def _one_line_break(value: Any) -> Any:
    """A bare CR inside a cell is not quoted by the csv module when rows end in
    LF, so it would split the row (and start an un-neutralized cell); make it LF,
    which the writer quotes."""
    if isinstance(value, str) and "\r" in value:
        return value.replace("\r\n", "\n").replace("\r", "\n")
    return value


def _empty(value: Any) -> bool:
    return value is None or _non_finite(value)  # NaN/inf are never written as numbers


def csv_text(rows: Iterable[Mapping[str, Any]], *, columns: list[str] | None = None) -> str:
    """CSV of flat rows with a stable column order (first row's order, then new
    keys as they appear, unless ``columns`` is given); every cell neutralized."""
    rows = list(rows)
    if columns is None:
        columns = []
        seen: set[str] = set()
        for row in rows:
            for k in row:
                if k not in seen:
                    seen.add(k)
                    columns.append(k)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([unit_column(c) for c in columns])
    for row in rows:
        writer.writerow([_one_line_break(neutralize_cell("" if _empty(row.get(c)) else row.get(c))) for c in columns])
    return buf.getvalue()


def plan_row(scenario: BaseModel, plan_json: dict[str, Any]) -> dict[str, Any]:
    """One flat CSV row: every input (``scenario.*``) then every output."""
    data = scenario.model_dump(mode="json")
    # Inline specs export as their id so the column set never depends on them.
    for key in ("gpu", "model"):
        if isinstance(data[key], dict):
            data[key] = f"inline:{data[key]['id']}"
    row = flatten({"scenario": data})
    row.update(flatten(plan_json))
    reason = plan_infeasible_reason(plan_json)
    row[REASON_COLUMN] = reason  # always a column (empty when every number exists)
    return finite_row(row, reason)


_UNIT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("usd_per_mtok", "USD/Mtok"), ("usd_per_gpu_hour", "USD/GPU-hour"), ("usd_per_hour", "USD/hour"),
    ("usd_per_1k_requests", "USD/1k requests"), ("usd_per_kwh", "USD/kWh"),
)
_UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("bytes_per_s", "bytes/s"), ("flops_per_s", "FLOP/s"), ("flop_per_byte", "FLOP/byte"), ("tok_s_per_sequence", "tokens/s"),
    ("tok_s_per_replica", "tokens/s"), ("tok_s_per_gpu", "tokens/s"), ("tok_s", "tokens/s"), ("req_s_per_replica", "requests/s"),
    ("req_s", "requests/s"), ("requests_per_s", "requests/s"), ("_bytes", "bytes"), ("bytes_per_token", "bytes"),
    ("bytes_per_token_per_gpu", "bytes"), ("bytes_per_sequence", "bytes"), ("bytes_per_gpu", "bytes"), ("_s", "s"),
    ("_tokens", "tokens"), ("gpus_total", "GPUs"), ("gpus_per_replica", "GPUs"), ("colocated_gpus", "GPUs"),
    ("disaggregated_gpus", "GPUs"), ("mbu", "fraction"), ("mfu", "fraction"), ("utilization", "fraction"),
    ("_rate", "fraction"), ("acceptance", "fraction"), ("efficiency", "fraction"), ("max_sequences", "sequences"),
)
CSV_SIGNIFICANT_DIGITS = 6  # what a CSV keeps of a float: past the model's precision, short enough to read


def column_unit(key: str) -> str:
    """The unit of a flattened plan or scenario column, read from its key's suffix ("" when none)."""
    last = key.rsplit(".", 1)[-1]
    for prefix, unit in _UNIT_PREFIXES:
        if last.startswith(prefix):
            return unit
    for suffix, unit in _UNIT_SUFFIXES:
        if last.endswith(suffix):
            return unit
    return ""


def review_csv_text(row: Mapping[str, Any]) -> str:
    """One plan row (``plan_row``) as a CSV for people: the header, a units row, then the
    values with floats to CSV_SIGNIFICANT_DIGITS significant digits; the scenario's name first."""
    columns = ["scenario.name", *[k for k in row if k != "scenario.name"]]

    def cell(value: Any) -> Any:
        if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
            return float(f"{value:.{CSV_SIGNIFICANT_DIGITS}g}")
        return value

    units = {c: column_unit(c) for c in columns}
    units["scenario.name"] = "units:"
    return csv_text([units, {k: cell(v) for k, v in row.items()}], columns=columns)
