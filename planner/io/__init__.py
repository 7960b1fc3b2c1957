"""Leaf helpers: display formatting, flat exports (CSV), size-capped JSON file reading.
Imports only ``planner.errors``.
"""

from planner.io.atomic import (
    write_bytes_atomic,
)
from planner.io.csvtext import (
    CSV_FIELD_CHARS,
    csv_number,
    csv_rows,
)
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
    SI_PREFIXES,
    derivation_value,
    format_value,
    human,
    is_number,
    markdown_code,
    markdown_text,
    one_line,
    readable,
    sig3,
)
from planner.io.jsonfile import (
    MAX_JSON_DEPTH,
    MAX_JSON_FILE_BYTES,
    SURROGATE_MESSAGE,
    lone_surrogate_path,
    parse_json,
    read_json,
    read_text_file,
)
from planner.io.output import (
    OUTPUT_CHUNK_BYTES,
    OUTPUT_STALL_S,
    OutputError,
    flush_stream,
    whole_stdout,
    write_all,
    write_text,
)
from planner.io.pdf import (
    CHROMIUM_PATH,
    MAX_CONCURRENT_PDF_RENDERS,
    PDF_MAX_HTML_BYTES,
    PDF_QUEUE_WAIT_S,
    PDF_SLOT_DIR_ENV,
    PDF_TIMEOUT_S,
    chromium_path,
    html_to_pdf,
    no_chromium_message,
    render_slot,
)
from planner.io.slots import (
    try_lock_slot,
)

__all__ = [
    "CSV_FIELD_CHARS",
    "csv_number",
    "csv_rows",
    "CHROMIUM_PATH",
    "MAX_JSON_DEPTH",
    "MAX_JSON_FILE_BYTES",
    "NOT_A_NUMBER",
    "OUTPUT_STALL_S",
    "OutputError",
    "PDF_MAX_HTML_BYTES",
    "PDF_TIMEOUT_S",
    "REASON_COLUMN",
    "SI_PREFIXES",
    "chromium_path",
    "csv_text",
    "derivation_value",
    "finite_row",
    "flatten",
    "format_value",
    "html_to_pdf",
    "human",
    "is_number",
    "neutralize_cell",
    "no_chromium_message",
    "parse_json",
    "plan_infeasible_reason",
    "plan_row",
    "read_json",
    "read_text_file",
    "readable",
    "sig3",
    "unit_column",
    "write_all",
    "write_bytes_atomic",
    "markdown_code",
    "markdown_text",
    "one_line",
    "SURROGATE_MESSAGE",
    "lone_surrogate_path",
    "OUTPUT_CHUNK_BYTES",
    "flush_stream",
    "whole_stdout",
    "write_text",
    "MAX_CONCURRENT_PDF_RENDERS",
    "PDF_QUEUE_WAIT_S",
    "PDF_SLOT_DIR_ENV",
    "render_slot",
    "try_lock_slot",
]
