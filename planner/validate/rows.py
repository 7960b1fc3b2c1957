"""Published measurement rows: the file schema and its loader.

A file is either ``{"measurements": [row, ...], ...}`` (the shape of
``shared/data/published_calibration.json``) or a bare list of rows.  Every row
is validated into a frozen :class:`MeasurementRow`; a malformed row raises
:class:`~planner.errors.ScenarioError` naming the row (its id, else its index)
and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from planner.errors import ScenarioError
from planner.io.jsonfile import read_json

__all__ = ["MAX_MEASUREMENT_ROWS", "METRICS", "MeasurementRow", "load_measurements", "parse_measurements"]

# Rows one validation run predicts: the published file has 164 and takes ~1 s;
# 5,000 rows take well under a minute on a 2-core machine.
MAX_MEASUREMENT_ROWS = 5_000
_SHOWN_CHARS = 60  # how much of a bad value a message repeats

# Metrics a row may carry and their units (SI inside the planner; the file's
# own units are milliseconds for TTFT/ITL/TPOT and seconds for E2E).
METRICS: dict[str, str] = {
    "output_tok_s_total": "tok/s",
    "output_tok_s_per_gpu": "tok/s",
    "ttft_ms": "ms",
    "itl_ms": "ms",
    "tpot_ms": "ms",
    "e2e_s": "s",
}

PosInt = Annotated[int, Field(ge=1)]
PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class MeasurementRow(BaseModel):
    """One published measurement with its setup (extra keys such as
    ``source`` or ``params_b`` are kept out; they do not change a prediction)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: Annotated[str, Field(min_length=1)]
    engine: Annotated[str, Field(min_length=1)]
    model: Annotated[str, Field(min_length=1)]
    precision: Annotated[str, Field(min_length=1)]
    gpu: Annotated[str, Field(min_length=1)]
    n_gpus: PosInt
    tp: PosInt | None = None
    pp: PosInt | None = None
    isl: PosInt | None = None
    osl: PosInt | None = None
    concurrency: PosFloat | None = None
    request_rate: PosFloat | None = None
    metric: Annotated[str, Field(min_length=1)]
    value: PosFloat
    trust: str | None = None
    notes: str | None = None


_ROW = TypeAdapter(MeasurementRow)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."


def _label(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"]:
        return f"row {index} (id {_shown(raw['id'])})"
    return f"row {index}"


def parse_measurements(data: Any) -> tuple[MeasurementRow, ...]:
    """Validate every row; the first bad one raises naming row and field."""
    rows = data.get("measurements") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise ScenarioError("measurements: expected a list of rows (or an object with a 'measurements' list)")
    if len(rows) > MAX_MEASUREMENT_ROWS:
        raise ScenarioError(f"measurements: {len(rows):,} rows is over the limit of {MAX_MEASUREMENT_ROWS:,}")
    out: list[MeasurementRow] = []
    seen: set[str] = set()
    for i, raw in enumerate(rows):
        if not isinstance(raw, dict):
            raise ScenarioError(f"measurements {_label(raw, i)}: expected an object")
        try:
            row = _ROW.validate_python(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "row"
            msg = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "missing":
                msg = "missing"
            raise ScenarioError(f"measurements {_label(raw, i)}: {field}: {msg} (got {_shown(err.get('input'))})"
                                if err["type"] != "missing" else
                                f"measurements {_label(raw, i)}: {field}: missing") from None
        if row.id in seen:
            raise ScenarioError(f"measurements {_label(raw, i)}: id: duplicate id {_shown(row.id)}")
        seen.add(row.id)
        out.append(row)
    return tuple(out)


def load_measurements(path: str | Path) -> tuple[MeasurementRow, ...]:
    """Read and validate a measurement file (JSON)."""
    return parse_measurements(read_json(path, want_object=False))
