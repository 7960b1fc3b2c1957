"""Check the planner against published measurements (``python -m planner validate``)."""

from planner.validate.names import (
    ENGINE_FAMILIES,
    PRECISIONS,
    EngineFamily,
    engine_family,
    precision_dtypes,
    resolve_gpu_name,
    resolve_model_name,
)
from planner.validate.predict import (
    ENGINE_MAX_BATCH,
    ENGINE_MEMORY_UTILIZATION,
    EfficiencySet,
    LoadPoint,
    RowSetup,
    efficiency_for,
    operating_point,
    predict_row,
    setup_row,
)
from planner.validate.report import (
    MetricSummary,
    RowResult,
    summarize,
    validate_rows,
    validation_payload,
)
from planner.validate.rows import (
    MAX_MEASUREMENT_ROWS,
    METRICS,
    MeasurementRow,
    load_measurements,
    parse_measurements,
)

__all__ = [
    "ENGINE_FAMILIES",
    "ENGINE_MAX_BATCH",
    "ENGINE_MEMORY_UTILIZATION",
    "EfficiencySet",
    "EngineFamily",
    "LoadPoint",
    "MAX_MEASUREMENT_ROWS",
    "METRICS",
    "MeasurementRow",
    "MetricSummary",
    "PRECISIONS",
    "RowResult",
    "RowSetup",
    "efficiency_for",
    "engine_family",
    "load_measurements",
    "operating_point",
    "parse_measurements",
    "precision_dtypes",
    "predict_row",
    "resolve_gpu_name",
    "resolve_model_name",
    "setup_row",
    "summarize",
    "validate_rows",
    "validation_payload",
]
