"""Leaf helpers: display formatting, flat exports (CSV), size-capped JSON file reading.
Imports only ``planner.errors``.
"""

from planner.io.export import (
    REASON_COLUMN,
    csv_text,
    finite_row,
    flatten,
    neutralize_cell,
    plan_infeasible_reason,
    plan_row,
    unit_column,
)
from planner.io.formatting import (
    NOT_A_NUMBER,
    format_value,
    human,
    is_number,
)
from planner.io.jsonfile import (
    MAX_JSON_DEPTH,
    MAX_JSON_FILE_BYTES,
    parse_json,
    read_json,
    read_text_file,
)

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_JSON_FILE_BYTES",
    "NOT_A_NUMBER",
    "REASON_COLUMN",
    "csv_text",
    "finite_row",
    "flatten",
    "format_value",
    "human",
    "is_number",
    "neutralize_cell",
    "parse_json",
    "plan_infeasible_reason",
    "plan_row",
    "read_json",
    "read_text_file",
    "unit_column",
]
