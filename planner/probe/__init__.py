"""The live probe: load a real OpenAI-compatible endpoint, read its counters,
set the measurement beside the planner's prediction, and calibrate from it.

No Streamlit here; the CLI (``python -m planner probe``) and the page adapt it.
"""

from planner.probe.calibrate import (
    KV_FULL_USAGE,
    Calibration,
    CalibrationResidual,
    KvCapacityCheck,
    LevelPrediction,
    calibrate,
    calibrated_scenario,
    kv_capacity_check,
    level_is_kv_full,
    measured_vs_predicted,
    predict_level,
    with_prediction,
)
from planner.probe.client import (
    Endpoint,
    RequestRecord,
    endpoint_path,
    make_client,
    stream_request,
)
from planner.probe.load import (
    arrival_offsets_s,
    make_prompt,
    new_run_id,
    request_body,
    run_probe,
    run_probe_sync,
)
from planner.probe.metrics import (
    METRIC_NAMES,
    EngineDelta,
    EngineSnapshot,
    engine_delta,
    parse_metrics,
)
from planner.probe.persist import (
    save_run,
)
from planner.probe.safety import (
    ALLOWED_HOSTS_ENV,
    allowed_hosts,
    api_key_from,
    check_url_allowed,
)
from planner.probe.settings import (
    MAX_CONCURRENCY,
    MAX_DURATION_S,
    MAX_REQUESTS,
    ProbeSettings,
    base_url,
    probe_settings,
)
from planner.probe.summary import (
    LevelSummary,
    ProbeRun,
    RequestSample,
    Stats,
    stats,
    summarize_level,
)

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "Calibration",
    "CalibrationResidual",
    "Endpoint",
    "EngineDelta",
    "EngineSnapshot",
    "KV_FULL_USAGE",
    "KvCapacityCheck",
    "LevelPrediction",
    "LevelSummary",
    "MAX_CONCURRENCY",
    "MAX_DURATION_S",
    "MAX_REQUESTS",
    "METRIC_NAMES",
    "ProbeRun",
    "ProbeSettings",
    "RequestRecord",
    "RequestSample",
    "Stats",
    "allowed_hosts",
    "api_key_from",
    "arrival_offsets_s",
    "base_url",
    "calibrate",
    "calibrated_scenario",
    "check_url_allowed",
    "endpoint_path",
    "engine_delta",
    "kv_capacity_check",
    "level_is_kv_full",
    "make_client",
    "make_prompt",
    "measured_vs_predicted",
    "new_run_id",
    "parse_metrics",
    "predict_level",
    "probe_settings",
    "request_body",
    "run_probe",
    "run_probe_sync",
    "save_run",
    "stats",
    "stream_request",
    "summarize_level",
    "with_prediction",
]
