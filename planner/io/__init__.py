"""Leaf helpers: display formatting, flat exports (CSV), size-capped JSON file reading.
Imports only ``planner.errors``.
"""

from __future__ import annotations

from planner.io.export import (
    csv_text,
    flatten,
    neutralize_cell,
    plan_row,
    unit_column,
)
from planner.io.formatting import (
    format_value,
    human,
)
from planner.io.jsonfile import (
    read_json,
)

__all__ = [
    "csv_text",
    "flatten",
    "format_value",
    "human",
    "neutralize_cell",
    "plan_row",
    "read_json",
    "unit_column",
]
