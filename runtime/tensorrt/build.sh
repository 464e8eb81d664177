#!/usr/bin/env bash
# Builds libinfopt_trt_shim.so on a machine with TensorRT's headers (10.x or 11.x) and the
# CUDA runtime headers. The result links against nothing but libdl: TensorRT and CUDA are
# opened at run time. See docs/tensorrt.md.
#
# usage: runtime/tensorrt/build.sh [-o OUTPUT.so] [-I TENSORRT_INCLUDE_DIR] [-c CUDA_INCLUDE_DIR]
#   defaults: TENSORRT_INCLUDE (env), then $TENSORRT_ROOT/include, /usr/include/x86_64-linux-gnu,
#             /usr/include; CUDA_INCLUDE (env), then $CUDA_HOME/include, /usr/local/cuda/include,
#             the include folder of a pip-installed nvidia-cuda-runtime-cu12 or nvidia-cuda-runtime (13).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/build/libinfopt_trt_shim.so"
trt_inc="${TENSORRT_INCLUDE:-}"
cuda_inc="${CUDA_INCLUDE:-}"

while getopts "o:I:c:h" opt; do
    case "$opt" in
    o) out="$OPTARG" ;;
    I) trt_inc="$OPTARG" ;;
    c) cuda_inc="$OPTARG" ;;
    *) sed -n '2,10p' "$0"; exit 2 ;;
    esac
done

first_with() { # file dir...
    local file="$1"; shift
    local dir
    for dir in "$@"; do
        if [ -n "$dir" ] && [ -f "$dir/$file" ]; then echo "$dir"; return 0; fi
    done
    return 1
}

if [ -z "$trt_inc" ]; then
    trt_inc="$(first_with NvInfer.h "${TENSORRT_ROOT:+$TENSORRT_ROOT/include}" /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu /usr/include)" || {
        echo "build.sh: NvInfer.h not found; pass -I DIR (the include folder of the TensorRT tarball) or set TENSORRT_ROOT" >&2
        exit 1
    }
fi
if [ -z "$cuda_inc" ]; then
    pip_cuda=""
    if command -v python3 >/dev/null; then
        # nvidia-cuda-runtime-cu12 installs nvidia/cuda_runtime/include, nvidia-cuda-runtime 13 nvidia/cu13/include.
        pip_cuda="$(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "include") for p in nvidia.__path__ for d in ("cuda_runtime", "cu13")))' 2>/dev/null || true)"
    fi
    # shellcheck disable=SC2086 # pip_cuda is a list of folders without spaces
    cuda_inc="$(first_with cuda_runtime_api.h "${CUDA_HOME:+$CUDA_HOME/include}" /usr/local/cuda/include $pip_cuda /usr/include)" || {
        echo "build.sh: cuda_runtime_api.h not found; pass -c DIR (CUDA toolkit include folder) or pip install nvidia-cuda-runtime-cu12 (CUDA 12) / nvidia-cuda-runtime (CUDA 13)" >&2
        exit 1
    }
fi

mkdir -p "$(dirname "$out")"
(
    set -x
    "${CXX:-g++}" -std=c++17 -O2 -shared -fPIC -Wall -Wextra \
        -isystem "$trt_inc" -isystem "$cuda_inc" -I"$here" \
        "$here/infopt_trt_shim.cpp" -o "$out" -ldl
)
# The preprocessor resolves NV_TENSORRT_MAJOR (a macro of a macro in TensorRT 11).
major="$(echo NV_TENSORRT_MAJOR | "${CXX:-g++}" -E -P -x c++ -include "$trt_inc/NvInferVersion.h" - 2>/dev/null | tr -d '[:space:]' || true)"
echo "built $out${major:+ for TensorRT $major}"
echo "infopt finds it with --trt-shim $out, INFOPT_TRT_SHIM=$out, or next to the infopt executable"
