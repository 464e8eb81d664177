#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. Python venv with pinned onnx / onnxruntime (interop tests, ORT backend)
#   2. formatting and clippy with warnings as errors
#   3. cargo test for the whole workspace
#   4. interop tests against the real onnx checker and ONNX Runtime
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup-venv.sh
# The ORT backend loads the library from the venv's onnxruntime package.
ORT_DYLIB_PATH="$(ls "$PWD"/.venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so* | head -n1)"
export ORT_DYLIB_PATH

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace --quiet
INFOPT_BIN="$PWD/target/debug/infopt" .venv/bin/python -m pytest -q tests/interop
