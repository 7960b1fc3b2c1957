#!/usr/bin/env bash
# Build llama.cpp's native llama-server from the llama-cpp-python sdist on PyPI
# and cache the binary outside the clone; skip when the cached binary exists.
# Needs cmake and a C++ compiler. About 10 minutes on 2 cores the first time.
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE_DIR="${RIDGELINE_CACHE_DIR:-$HOME/.cache/ridgeline}/llama-server-${VERSION}"
BIN="$CACHE_DIR/llama-server"
JOBS="${LLAMA_BUILD_JOBS:-2}"
PYTHON="${PYTHON:-python3}"

if [ -x "$BIN" ]; then
    echo "llama-server ${VERSION}: cached at $BIN"
    exit 0
fi
mkdir -p "$CACHE_DIR"
# One build at a time on this machine; a second caller waits, then finds the binary.
exec 9>"$CACHE_DIR/.build.lock"
flock 9
if [ -x "$BIN" ]; then
    echo "llama-server ${VERSION}: cached at $BIN"
    exit 0
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/llama-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "llama-server ${VERSION}: building in $WORK"
"$PYTHON" -m pip download -q --no-binary :all: --no-deps "llama-cpp-python==${VERSION}" -d "$WORK"
tar -xzf "$WORK"/llama_cpp_python-"${VERSION}".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-${VERSION}/vendor/llama.cpp"
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF > "$WORK/cmake.log" 2>&1 \
    || { tail -40 "$WORK/cmake.log"; exit 1; }
cmake --build "$WORK/build" --target llama-server -j"$JOBS" > "$WORK/build.log" 2>&1 \
    || { tail -40 "$WORK/build.log"; exit 1; }
install -m 0755 "$WORK/build/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
echo "llama-server ${VERSION}: built $BIN"
