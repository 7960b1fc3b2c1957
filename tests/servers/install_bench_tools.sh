#!/usr/bin/env bash
# Install the load clients whose result files `python -m planner import-bench` reads,
# each in its own virtual environment cached outside the clone (keyed by version);
# skip a tool whose environment is already complete.  PyPI only.
#   GuideLLM 0.8.1: requires torch; the CPU wheel first keeps ~15 CUDA wheels out (~1.5 GB).
#   AIPerf 0.13.0: no torch (~1.2 GB).
#   inference-perf: not on the package index here, so it is not installed (its
#   results reach Ridgeline through llm-d's Benchmark Report, read from fixtures).
set -euo pipefail
ROOT="${RIDGELINE_CACHE_DIR:-$HOME/.cache/ridgeline}/bench-tools"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
GUIDELLM_VERSION="${GUIDELLM_VERSION:-0.8.1}"
AIPERF_VERSION="${AIPERF_VERSION:-0.13.0}"
TORCH_CPU="${TORCH_CPU:-2.13.0+cpu}"
mkdir -p "$ROOT"

install_tool() {  # name version pip-args...
    local name="$1" version="$2"; shift 2
    local dir="$ROOT/$name-$version"
    if [ -f "$dir/.complete" ]; then
        echo "$name $version: cached at $dir"
        return 0
    fi
    exec 9>"$ROOT/.$name.lock"
    flock 9
    if [ -f "$dir/.complete" ]; then
        echo "$name $version: cached at $dir"
        return 0
    fi
    rm -rf "$dir"
    echo "$name $version: installing into $dir"
    "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip
    for spec in "$@"; do
        # shellcheck disable=SC2086
        "$dir/bin/python" -m pip install -q $spec
    done
    touch "$dir/.complete"
    echo "$name $version: installed"
}

install_tool guidellm "$GUIDELLM_VERSION" "torch==$TORCH_CPU" "guidellm==$GUIDELLM_VERSION"
install_tool aiperf "$AIPERF_VERSION" "aiperf==$AIPERF_VERSION"
