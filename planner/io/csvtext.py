"""CSV text read from strangers (traces, traffic profiles): rows with their line numbers, and
one numeric field at a time, each failure one ScenarioError naming the file kind, the column
and the line.  Text only: the callers cap its size before it gets here."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator

from planner.errors import ScenarioError

__all__ = ["CSV_FIELD_CHARS", "csv_number", "csv_rows"]

# A number longer than this is not one (and float() of a 100 kB digit string is slow).
CSV_FIELD_CHARS = 200


def csv_rows(text: str, what: str, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) of CSV text whose header has ``columns``; a missing
    column or a malformed file (a field over the csv module's 128 KB limit, a
    NUL ...) is one ScenarioError naming ``what`` and the line."""
    reader = csv.DictReader(io.StringIO(text))
    try:
        fields = reader.fieldnames or []
        missing = [c for c in columns if c not in fields]
        if missing:
            raise ScenarioError(f"{what}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")
        yield from enumerate(reader, start=2)  # line 1 is the header
    except csv.Error as exc:
        raise ScenarioError(f"{what}: malformed CSV at line {reader.line_num}: {exc}") from None


def csv_number(row: dict[str, str], column: str, *, what: str, line: int, max_chars: int = CSV_FIELD_CHARS) -> float:
    """The finite number in ``row[column]``, or one ScenarioError: ``{what}.{column}: not a
    number at line N`` (also for a field over ``max_chars``) or ``... not finite at line N``."""
    raw = (row.get(column) or "").strip()
    try:
        if len(raw) > max_chars:
            raise ValueError(raw)
        value = float(raw)
    except ValueError:
        raise ScenarioError(f"{what}.{column}: not a number at line {line}: {raw[:40]!r}") from None
    if not math.isfinite(value):
        raise ScenarioError(f"{what}.{column}: not finite at line {line}")
    return value
