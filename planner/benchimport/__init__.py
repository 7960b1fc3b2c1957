"""Bring your own benchmark: read the result files of vLLM, SGLang, GuideLLM, AIPerf,
MLPerf LoadGen and llm-d, map them onto the planner with the setup the user gives,
set them beside the prediction, store them as probe runs are stored, and calibrate
the efficiencies on them (one code path for the CLI, the Calibrate page and the Live
probe page).  No Streamlit here.
"""

from planner.benchimport.aiperf import read_aiperf
from planner.benchimport.calibrate import (
    CALIBRATION_METRICS,
    FIT_BOUNDS,
    BenchCalibration,
    CalibrationRow,
    calibrate_runs,
    calibrated_from_scenario,
)
from planner.benchimport.guidellm import read_guidellm
from planner.benchimport.limits import (
    MAX_BENCH_FILE_BYTES,
    MAX_BENCH_FILES,
    MAX_BENCH_LEVELS,
    MAX_BENCH_READ_S,
    MAX_BENCH_ROWS,
    MAX_BENCH_TEXT_CHARS,
    Deadline,
)
from planner.benchimport.llmd import load_yaml_or_json, read_llmd
from planner.benchimport.mlperf import read_mlperf
from planner.benchimport.model import (
    BENCH_TOOLS,
    BenchLevel,
    BenchRun,
    BenchTool,
    LatencyStats,
    capped_list,
    check_levels,
    number,
    optional_number,
    text,
)
from planner.benchimport.predict import compare_rows, row_setup, scenario_efficiency
from planner.benchimport.read import (
    READERS,
    TOOL_CHOICES,
    detect_tool,
    parse_bench,
    read_bench_file,
    read_bench_files,
)
from planner.benchimport.setup import (
    BENCH_SET_KEYS,
    LENGTH_TOLERANCE,
    BenchSetup,
    bench_setup,
    check_run,
    level_rows,
    run_rows,
)
from planner.benchimport.sglang import read_sglang
from planner.benchimport.store import (
    IMPORT_SOURCE,
    bench_run_from_probe,
    bench_run_from_summary,
    save_bench_run,
    to_probe_run,
)
from planner.benchimport.views import (
    CHART_METRICS,
    calibration_chart_rows,
    comparison_chart_rows,
    comparison_table,
    page_setup,
    scenario_setup,
)
from planner.benchimport.vllm import read_vllm, serve_level

__all__ = [
    "BENCH_SET_KEYS", "BENCH_TOOLS", "BenchCalibration", "BenchLevel", "BenchRun", "BenchSetup", "BenchTool",
    "CALIBRATION_METRICS", "CalibrationRow", "Deadline", "FIT_BOUNDS", "IMPORT_SOURCE", "LENGTH_TOLERANCE",
    "LatencyStats", "MAX_BENCH_FILES", "MAX_BENCH_FILE_BYTES", "MAX_BENCH_LEVELS", "MAX_BENCH_READ_S",
    "MAX_BENCH_ROWS", "MAX_BENCH_TEXT_CHARS", "READERS", "TOOL_CHOICES", "bench_run_from_probe",
    "bench_run_from_summary", "bench_setup", "calibrate_runs", "calibrated_from_scenario", "capped_list",
    "check_levels", "check_run", "compare_rows", "detect_tool", "level_rows", "number", "optional_number",
    "parse_bench", "read_bench_file", "read_bench_files", "row_setup", "run_rows", "save_bench_run",
    "scenario_efficiency", "text", "to_probe_run", "read_aiperf", "read_guidellm", "read_llmd", "read_mlperf",
    "read_sglang", "read_vllm", "serve_level", "load_yaml_or_json", "CHART_METRICS", "calibration_chart_rows",
    "comparison_chart_rows", "comparison_table", "page_setup", "scenario_setup",
]
