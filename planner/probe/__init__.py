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
    measured_vs_predicted,
    predict_level,
    with_prediction,
)
from planner.probe.client import RequestRecord, make_client, stream_request
from planner.probe.job import ProbeJob
from planner.probe.load import arrival_offsets_s, make_prompt, new_run_id, run_probe, run_probe_sync
from planner.probe.metrics import METRIC_NAMES, EngineDelta, EngineSnapshot, engine_delta, parse_metrics
from planner.probe.redact import check_api_key, check_url_secrets, redact
from planner.probe.safety import (
    ALLOWED_HOSTS_ENV,
    PinnedResolver,
    api_key_from,
    check_url_allowed,
    normalise_address,
    resolve_allowed,
)
from planner.probe.settings import ProbeSettings, base_url, probe_settings
from planner.probe.summary import LevelSummary, ProbeRun, RequestSample, Stats, stats, summarize_level

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "KV_FULL_USAGE",
    "METRIC_NAMES",
    "Calibration",
    "CalibrationResidual",
    "EngineDelta",
    "EngineSnapshot",
    "KvCapacityCheck",
    "LevelPrediction",
    "LevelSummary",
    "PinnedResolver",
    "ProbeJob",
    "ProbeRun",
    "ProbeSettings",
    "RequestRecord",
    "RequestSample",
    "Stats",
    "api_key_from",
    "arrival_offsets_s",
    "base_url",
    "calibrate",
    "calibrated_scenario",
    "check_api_key",
    "check_url_allowed",
    "check_url_secrets",
    "engine_delta",
    "kv_capacity_check",
    "make_client",
    "make_prompt",
    "measured_vs_predicted",
    "new_run_id",
    "normalise_address",
    "parse_metrics",
    "predict_level",
    "probe_settings",
    "redact",
    "resolve_allowed",
    "run_probe",
    "run_probe_sync",
    "stats",
    "stream_request",
    "summarize_level",
    "with_prediction",
]
