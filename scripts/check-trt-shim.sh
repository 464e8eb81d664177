#!/usr/bin/env bash
# Compile-checks the TensorRT shim (runtime/tensorrt/infopt_trt_shim.cpp) against
# TensorRT's real 11.4 headers and TensorRT-RTX's 1.3 to 1.7 headers (every header folder
# of the flavour table, runtime/src/tensorrt/flavor_table.rs), without TensorRT or CUDA.
#
# The headers (with a cuda_runtime_api.h stand-in) ship inside the source of the
# `trtx-sys` crate on crates.io; this script fetches that crate through cargo into
# $CARGO_HOME (nothing is copied into the repository) and then:
#   1. checks that the headers are what we think they are (a canary that must compile
#      and one that must NOT: TensorRT 11 removed BuilderFlag::kFP16),
#   2. compiles the shim with -Wall -Wextra -Werror to an object, for 11.4 and for each
#      TensorRT-RTX 1.x (whose headers call themselves major 1 and deprecate the timing
#      cache: the RTX branches must be taken, and compile cleanly),
#   3. checks the object needs no TensorRT or CUDA symbol (everything goes through dlsym),
#   4. links it as a shared library with --no-undefined and checks it exports exactly the
#      C ABI that runtime/src/tensorrt/ffi.rs loads.
# Any failure exits non-zero.
#
# Environment:
#   INFOPT_TRT_HEADERS      a TensorRT include folder to use instead of fetching trtx-sys
#   INFOPT_TRT_EXTRA_HEADERS colon-separated TensorRT include folders (e.g. a TensorRT 10
#                            install) to compile the shim against as well
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shim_dir="$here/runtime/tensorrt"
trt_dir_name="TRT-Enterprise-11.4"

cxx="${CXX:-g++}"
command -v "$cxx" >/dev/null || { echo "check-trt-shim: $cxx not found (install g++)" >&2; exit 1; }
command -v nm >/dev/null || { echo "check-trt-shim: nm not found (install binutils)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ -n "${INFOPT_TRT_HEADERS:-}" ]; then
    trt_include="$INFOPT_TRT_HEADERS"
    stub_include="$INFOPT_TRT_HEADERS"
else
    # One place fetches the trtx-sys source through cargo and prints its headers folder.
    headers="$(bash "$here/scripts/fetch-trt-headers.sh")"
    [ -f "$headers/$trt_dir_name/NvInfer.h" ] || {
        echo "check-trt-shim: $trt_dir_name headers not found in $headers" >&2
        exit 1
    }
    trt_include="$headers/$trt_dir_name"
    stub_include="$headers"
fi

flags=(-std=c++17 -fPIC -Wall -Wextra -Werror)

# 1. Canaries: the API we rely on exists, and the TensorRT-10-only API does not.
cat >"$work/canary_ok.cpp" <<'EOF'
#include <NvInfer.h>
#include <NvOnnxParser.h>
static_assert(NV_TENSORRT_MAJOR == 11, "expected TensorRT 11 headers");
void canary(nvinfer1::IBuilderConfig& c, nvinfer1::IExecutionContext& x, cudaStream_t s)
{
    c.setMemoryPoolLimit(nvinfer1::MemoryPoolType::kWORKSPACE, 1);
    c.setFlag(nvinfer1::BuilderFlag::kERROR_ON_TIMING_CACHE_MISS);
    (void) x.enqueueV3(s);
}
EOF
cat >"$work/canary_bad.cpp" <<'EOF'
#include <NvInfer.h>
void canary(nvinfer1::IBuilderConfig& c) { c.setFlag(nvinfer1::BuilderFlag::kFP16); }
EOF
"$cxx" "${flags[@]}" -fsyntax-only -isystem "$trt_include" -isystem "$stub_include" "$work/canary_ok.cpp" || {
    echo "check-trt-shim: the TensorRT headers at $trt_include lack the API the shim uses" >&2
    exit 1
}
if "$cxx" "${flags[@]}" -fsyntax-only -isystem "$trt_include" -isystem "$stub_include" "$work/canary_bad.cpp" 2>/dev/null; then
    echo "check-trt-shim: BuilderFlag::kFP16 compiled against $trt_include: these are not TensorRT 11 headers" >&2
    exit 1
fi

compile() { # include-dir stub-dir output
    "$cxx" "${flags[@]}" -isystem "$1" -isystem "$2" -I"$shim_dir" -c "$shim_dir/infopt_trt_shim.cpp" -o "$3"
}

# 2. The shim itself.
"$cxx" "${flags[@]}" -fsyntax-only -isystem "$trt_include" -isystem "$stub_include" -I"$shim_dir" \
    "$shim_dir/infopt_trt_shim.cpp"
compile "$trt_include" "$stub_include" "$work/shim.o"

# 3. No link-time dependency on TensorRT or CUDA.
if nm -uC "$work/shim.o" | grep -E 'nvinfer1|nvonnxparser|_INTERNAL|getInferLibVersion|cuda' >"$work/undef.txt"; then
    echo "check-trt-shim: the shim references TensorRT/CUDA symbols at link time (must go through dlsym):" >&2
    cat "$work/undef.txt" >&2
    exit 1
fi

# 4. Links alone, and exports exactly the ABI the Rust side loads.
"$cxx" -shared -Wl,--no-undefined -o "$work/libinfopt_trt_shim.so" "$work/shim.o" -ldl
expected="infopt_trt_abi_version infopt_trt_build infopt_trt_close infopt_trt_compiled_flavor infopt_trt_compiled_major infopt_trt_compiled_version infopt_trt_free infopt_trt_free_build_result infopt_trt_library_version infopt_trt_open infopt_trt_time"
exported="$(nm -D --defined-only "$work/libinfopt_trt_shim.so" | awk '$3 ~ /^infopt_trt_/ {print $3}' | sort | tr '\n' ' ' | sed 's/ $//')"
if [ "$exported" != "$expected" ]; then
    echo "check-trt-shim: exported C ABI differs from the one runtime/src/tensorrt/ffi.rs loads" >&2
    echo "  expected: $expected" >&2
    echo "  exported: $exported" >&2
    exit 1
fi

# 5. TensorRT-RTX 1.x: the same -Werror compile, no TensorRT symbol at link time, and the
#    shim reports flavour RTX with the headers' major and minor.
if [ -z "${INFOPT_TRT_HEADERS:-}" ]; then
    for rtx in "$stub_include"/TRT-RTX-1.*; do
        [ -f "$rtx/NvInfer.h" ] || continue
        name="$(basename "$rtx")"
        compile "$rtx" "$stub_include" "$work/rtx.o"
        if nm -uC "$work/rtx.o" | grep -E 'nvinfer1|nvonnxparser|_INTERNAL|getInferLibVersion|cuda' >"$work/undef.txt"; then
            echo "check-trt-shim: the $name shim references TensorRT symbols at link time:" >&2
            cat "$work/undef.txt" >&2
            exit 1
        fi
        "$cxx" -shared -Wl,--no-undefined -o "$work/librtx.so" "$work/rtx.o" -ldl
        cat >"$work/probe.c" <<'PROBE'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
    void* h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    int (*flavor)(void) = (int (*)(void)) dlsym(h, "infopt_trt_compiled_flavor");
    int (*version)(void) = (int (*)(void)) dlsym(h, "infopt_trt_compiled_version");
    if (!flavor || !version) return 1;
    printf("%d %d\n", flavor(), version() / 100);
    return 0;
}
PROBE
        "${CC:-gcc}" -o "$work/probe" "$work/probe.c" -ldl
        want="1 $((100 + ${name##*.}))"
        got="$("$work/probe" "$work/librtx.so")"
        if [ "$got" != "$want" ]; then
            echo "check-trt-shim: the $name shim reports flavour/version '$got', expected '$want'" >&2
            exit 1
        fi
        echo "check-trt-shim: compiles against $name"
    done
fi

# Optional: other TensorRT versions (e.g. 10.x) the caller has headers for.
if [ -n "${INFOPT_TRT_EXTRA_HEADERS:-}" ]; then
    IFS=: read -r -a extra <<<"$INFOPT_TRT_EXTRA_HEADERS"
    for dir in "${extra[@]}"; do
        [ -n "$dir" ] || continue
        compile "$dir" "$stub_include" "$work/extra.o"
        echo "check-trt-shim: compiles against $dir"
    done
fi

echo "check-trt-shim: ok (TensorRT headers: $trt_include)"
