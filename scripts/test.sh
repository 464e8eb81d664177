#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. Python venv with pinned onnx / onnxruntime (interop tests, ORT backend)
#   2. formatting and clippy with warnings as errors
#   3. cargo test for the whole workspace
#   4. the TensorRT shim compiled against TensorRT 11.4's and TensorRT-RTX 1.3-1.7's real
#      headers (fetched from the trtx-sys crate by cargo; no TensorRT library needed),
#      and real TensorRT-RTX engine builds (tests/trt_rtx.rs) with the libraries
#      setup-venv installs
#   5. interop tests against the real onnx checker and ONNX Runtime
#   6. the Python API (tests/python) on a debug build of the module
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup-venv.sh
# The ORT backend loads the library from the venv's onnxruntime package.
ORT_DYLIB_PATH="$(ls "$PWD"/.venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so* | head -n1)"
export ORT_DYLIB_PATH

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
bash scripts/check-trt-shim.sh
# The shim's Rust-side tests compile it against stand-in libraries: never skip.
export INFOPT_REQUIRE_TRT_SHIM_TEST=1
# TensorRT-RTX is in the venv: its engine builds must run, not skip.
export INFOPT_REQUIRE_TRT_RTX=1
# The build must carry the built-in shims (tests/cli_doctor.rs fails without them).
export INFOPT_REQUIRE_TRT_SHIMS=1
cargo test --workspace --quiet
INFOPT_BIN="$PWD/target/debug/infopt" .venv/bin/python -m pytest -q tests/interop
# The Python module, debug: the dependencies are the ones cargo test just built.
bash scripts/python-dev.sh
.venv/bin/python -m pytest -q tests/python
