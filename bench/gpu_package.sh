#!/usr/bin/env bash
# Builds the folder bench/gpu_bench.sh needs on a GPU machine that has no
# Rust, no network and no onnxruntime-gpu, small enough for one device call
# (the device tool carries at most 64 MiB a call).
#
#   bash bench/gpu_package.sh PKG_DIR [INFOPT_BINARY] [OCR_MODELS_DIR]
#
# - INFOPT_BINARY (default target/release/infopt): stripped, xz -9 (the GPU
#   machine has xz, not zstd).
# - onnxruntime-gpu 1.31.1 from PyPI (pip download, once, into $ORT_WHEEL_DIR,
#   default /tmp/ortgpu), cut to sm_90 cubins by bench/strip_ort_cuda.py and
#   packed as ortcuda.tar.xz (about 40 MB).
# - OCR_MODELS_DIR: PP-OCRv4 det and rec ONNX files (the rapidocr-onnxruntime
#   wheel's `models/` folder; default: found in a venv under /work/venvs).
# - gpu_bench.sh, gpu_models.py, gpu_table.py copied beside them, and
#   configs/onnxruntime-cuda-fp16.yaml (the fp16c variant, see gpu_bench.sh).
# Then on the GPU machine: bash PKG_DIR/bench/gpu_bench.sh PKG_DIR WORK OUT.
set -euo pipefail
PKG=${1:?usage: gpu_package.sh PKG_DIR [INFOPT] [OCR_DIR]}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${2:-$HERE/../target/release/infopt}
OCR=${3:-$(dirname "$(ls /work/venvs/*/lib/python3*/site-packages/rapidocr_onnxruntime/models/*det*.onnx 2>/dev/null | head -1)")}
WHEELS=${ORT_WHEEL_DIR:-/tmp/ortgpu}
mkdir -p "$PKG/bench" "$PKG/ocr" "$WHEELS"

if [ ! -f "$PKG/infopt.xz" ] || [ "$BIN" -nt "$PKG/infopt.xz" ]; then
    strip -o "$PKG/infopt" "$BIN"
    xz -9 -T2 -f "$PKG/infopt"
fi
if [ ! -f "$PKG/ortcuda.tar.xz" ]; then
    wheel=$(ls "$WHEELS"/onnxruntime_gpu-1.31.1-*.whl 2>/dev/null | head -1)
    if [ -z "$wheel" ]; then
        python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
            -d "$WHEELS" onnxruntime-gpu==1.31.1
        wheel=$(ls "$WHEELS"/onnxruntime_gpu-1.31.1-*.whl | head -1)
    fi
    tmp=$(mktemp -d)
    python3 "$HERE/strip_ort_cuda.py" "$wheel" "$tmp" --keep 90
    tar -C "$tmp" -cf - . | xz -9 -T2 > "$PKG/ortcuda.tar.xz"
    rm -rf "$tmp"
fi
cp "$OCR"/*PP-OCRv4_det*.onnx "$OCR"/*PP-OCRv4_rec*.onnx "$PKG/ocr/"
cp "$HERE/gpu_bench.sh" "$HERE/gpu_models.py" "$HERE/gpu_table.py" "$PKG/bench/"
# For the fp16c variant: export fp16c="-c $PKG/configs/onnxruntime-cuda-fp16.yaml --ep cuda"
mkdir -p "$PKG/configs" && cp "$HERE/../configs/onnxruntime-cuda-fp16.yaml" "$PKG/configs/"
du -ab "$PKG" | sort -n | tail -8
