#!/usr/bin/env bash
# GPU latency of infopt's outputs through ONNX Runtime's CUDA execution provider.
#
# Not a test. One command on a machine with an NVIDIA GPU, python3 with torch,
# torchvision, transformers and the nvidia-* CUDA 13 pip packages (cublas,
# cudnn-cu13, cuda-runtime, curand, cufft), and no Rust:
#
#   bash bench/gpu_bench.sh PKG_DIR [WORK_DIR] [OUT_DIR]
#
# PKG_DIR holds what the machine lacks:
#   infopt or infopt.xz       an x86-64 build (cargo build --release)
#   ortcuda.tar.xz|.zst       libonnxruntime.so.*, libonnxruntime_providers_shared.so and
#                             libonnxruntime_providers_cuda.so from onnxruntime-gpu
#                             (bench/strip_ort_cuda.py cuts them to one GPU architecture)
#   ocr/*.onnx                PP-OCRv4 det and rec (the rapidocr-onnxruntime wheel's models)
# and, for the scripts, gpu_models.py and gpu_table.py beside this file.
#
# Steps: environment check (GPU, CUDA libraries the EP links, `infopt doctor`);
# FP32 exports (bench/gpu_models.py, random weights); per model `infopt optimize`
# variants on the CPU (VARIANTS, below); per model and batch one `infopt bench
# --backend ort --ep cuda` process timing FP32 and every variant interleaved
# (--compare); per variant `infopt compare` against FP32 on the GPU at the large
# batch; then one table (gpu_table.py) on stdout and in OUT_DIR/gpu_bench.md.
# A variant name other than opt/fp16/fp16p/int8 takes its optimize flags from
# the environment variable of that name, e.g. the float16 pipeline for the
# CUDA provider: export fp16c="-c $PKG/configs/onnxruntime-cuda-fp16.yaml --ep cuda"
# VARIANTS="opt fp16 fp16p fp16c". bench/results/gpu_bench.md has the exact runs.
# Environment knobs: MODELS, VARIANTS, RUNS, WARMUP, JOBS, DEADLINE (seconds:
# past it no new timing or comparison starts, so the table still comes out
# inside a 10-minute call). Re-running with the same WORK_DIR resumes: models,
# variants, timings and comparisons already there are kept.
set -uo pipefail

PKG=$(realpath "${1:?usage: gpu_bench.sh PKG_DIR [WORK_DIR] [OUT_DIR]}")
W=$(realpath -m "${2:-/tmp/gpu_bench}")
OUT=$(realpath -m "${3:-$W/out}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODELS=${MODELS:-resnet50,efficientnet_b0,vit_b_16,yolov5s,bert_base,gpt2,ppocr_v4_det,ppocr_v4_rec}
# opt: --target onnxruntime (ORT's contrib fusions); fp16/int8 on top of it;
# fp16p: --fp16 with the portable target (standard ops only).
VARIANTS=${VARIANTS:-opt fp16 fp16p int8}
RUNS=${RUNS:-60}
WARMUP=${WARMUP:-20}
JOBS=${JOBS:-8}
EP=${EP:-cuda}
DEADLINE=${DEADLINE:-540}
# Models whose FP32 and FP16 are also timed with cuDNN's NHWC kernels
# (--ep-option cuda:prefer_nhwc=1) at the large batch.
NHWC_MODELS=${NHWC_MODELS-resnet50,efficientnet_b0,yolov5s,ppocr_v4_det,ppocr_v4_rec}
# The provider option of those extra rows and their tag (e.g. cuda:use_tf32=0
# and notf32: FP32 without TF32 tensor cores, ONNX Runtime's default being on).
NHWC_OPTION=${NHWC_OPTION:-cuda:prefer_nhwc=1}
NHWC_TAG=${NHWC_TAG:-nhwc}
# Models timed once more at the large batch with glibc's malloc kept off mmap
# (MALLOC_MMAP_MAX_=0, no trimming): each run's copy of the outputs then
# reuses heap pages instead of faulting in fresh ones (rows `... heap`).
HEAP_MODELS=${HEAP_MODELS-}
# Main rows device-resident (--io-binding) unless TIMING=host-to-host; models
# timed once more host to host at the large batch (rows `... h2h`), and with
# TF32 off (rows `... notf32`).
TIMING=${TIMING:-device-resident}
H2H_MODELS=${H2H_MODELS-$MODELS}
NOTF32_MODELS=${NOTF32_MODELS-}
# Models timed once more at the large batch with ONNX Runtime's CUDA graphs
# (--ep-option cuda:enable_cuda_graph=1, device-resident): the whole run is one
# graph launch, so the per-kernel launch cost that hides float16's gain at
# these batch sizes is gone. Rows `... graph`; a model whose original cannot be
# captured (a node left on the CPU provider) is timed from `opt` on (rows
# `... graphopt`, speed-up over the optimized FP32).
GRAPH_MODELS=${GRAPH_MODELS-}
# Graph rows once more with cuDNN's NHWC kernels as well (rows `... graphnhwc`).
GRAPH_NHWC_MODELS=${GRAPH_NHWC_MODELS-}
export CUDA_MODULE_LOADING=LAZY
START=$(date +%s)
late() { [ $(($(date +%s) - START)) -ge "$DEADLINE" ]; }
mkdir -p "$W/models" "$OUT"
log() { echo "[$(date -u +%T)] $*"; }

# ---------------------------------------------------------------- environment
log "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
python3 -c 'import onnxruntime as o, torch; print("python onnxruntime", o.__version__, o.get_available_providers(), "| torch", torch.__version__, torch.cuda.is_available())'
nproc
if [ -x "$PKG/infopt" ]; then
    INFOPT=$PKG/infopt
else
    xz -d -c "$PKG/infopt.xz" > "$W/infopt" && chmod +x "$W/infopt"
    INFOPT=$W/infopt
fi
mkdir -p "$W/ort"
for a in "$PKG"/ortcuda.tar.*; do
    case $a in
        *.xz) tar -C "$W/ort" -xJf "$a" ;;
    esac
done
ORT_DYLIB_PATH=$(ls "$W"/ort/libonnxruntime.so.* | head -1)
export ORT_DYLIB_PATH
NVLIBS=$(python3 - <<'EOF'
import glob, os, site
dirs = set()
for base in site.getsitepackages():
    for p in glob.glob(os.path.join(base, "nvidia", "**", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(p))
print(":".join(sorted(dirs)))
EOF
)
export LD_LIBRARY_PATH="$W/ort:$NVLIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "CUDA EP links:"; ldd "$W/ort/libonnxruntime_providers_cuda.so" | grep -E 'cu|not found'
for l in libcudnn.so.9 libcufft.so.12 libcufft.so.11 libnvrtc.so.13; do
    f=$(IFS=:; for d in $NVLIBS; do [ -e "$d/$l" ] && echo "$d/$l"; done | head -1)
    echo "dlopen candidate $l: ${f:-absent}"
done
"$INFOPT" --version
"$INFOPT" doctor

# ---------------------------------------------------------------- FP32 models
log "exporting FP32 models ($MODELS)"
echo "$MODELS" | tr , '\n' | xargs -P "$JOBS" -I{} sh -c \
    '[ -s "$1/models/{}.line" ] && exit 0; python3 "$0/gpu_models.py" "$1/models" --ocr "$2/ocr" --only {} > "$1/models/{}.export.log" 2>&1; grep -E "^\[(model|skip)\]" "$1/models/{}.export.log"' \
    "$HERE" "$W" "$PKG"
cat "$W"/models/*.line > "$W/models.txt"
cat "$W/models.txt"

# ---------------------------------------------------------------- variants (CPU)
variant() { # MODEL VARIANT
    local d=$W/models/$1 v=$2 flags
    case $v in
        opt) flags="--target onnxruntime" ;;
        fp16) flags="--target onnxruntime --fp16" ;;
        fp16p) flags="--fp16" ;;
        int8) flags="--target onnxruntime --int8 --calib-data $d/calib.npz --calib-samples 16 --held-out 8" ;;
        *) flags=${!v} ;; # VARIANT=name whose flags are in $name
    esac
    [ -f "$d/$v.onnx" ] && return 0
    local t0=$SECONDS rc
    # shellcheck disable=SC2086
    "$INFOPT" optimize "$d/fp32.onnx" -o "$d/$v.onnx" $flags --backend ort --threads 2 \
        --report "$d/$v.report.json" > "$d/$v.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        # The table still shows the variant, marked unverified.
        # shellcheck disable=SC2086
        "$INFOPT" optimize "$d/fp32.onnx" -o "$d/$v.onnx" $flags --backend ort --threads 2 --no-verify \
            --report "$d/$v.report.json" >> "$d/$v.log" 2>&1 && echo "$rc" > "$d/$v.unverified"
    fi
    echo "  $1/$v: exit $rc in $((SECONDS - t0)) s; $(grep -m1 '^error' "$d/$v.log")"
}
export -f variant
export INFOPT W DEADLINE START
log "making variants ($VARIANTS)"
while IFS='|' read -r name _ _ _; do
    for v in $VARIANTS; do echo "$name $v"; done
done < "$W/models.txt" | xargs -P "$JOBS" -L1 bash -c 'variant "$0" "$1"'

# ---------------------------------------------------------------- GPU timing
log "timing on the GPU (ep $EP, warmup $WARMUP, runs $RUNS)"
nvidia-smi dmon -s pucm -d 2 > "$OUT/dmon.txt" 2>&1 &
DMON=$!
bench_one() { # NAME BATCH SHAPES TAG MODELS... : one interleaved process; exit status
    local name=$1 b=$2 shapes=$3 tag=$4; shift 4
    local d=$W/models/$name sargs=() first=$1 t0=$SECONDS rc
    shift
    for s in $shapes; do sargs+=(--input-shape "$s"); done
    local cmp=(); for m in "$@"; do cmp+=(--compare "$m"); done
    [ -s "$d/bench_$tag.json" ] && return 0
    timeout 90 env "${BENCH_ENV[@]}" "$INFOPT" bench "$first" "${cmp[@]}" --backend ort --ep "$EP" "${EPOPT[@]}" "${IOBARG[@]}" "${sargs[@]}" \
        --vocab 1000 --warmup "$WARMUP" --runs "$RUNS" --json > "$d/bench_$tag.json" 2> "$d/bench_$tag.log"
    rc=$?
    [ $rc -eq 0 ] || rm -f "$d/bench_$tag.json"
    echo "  $name $tag: exit $rc in $((SECONDS - t0)) s $(grep -m1 '^error' "$d/bench_$tag.log")"
    return $rc
}
EPOPT=()
BENCH_ENV=()
# Main rows: device-resident (--io-binding), as people deploy on a GPU.
# TIMING=host-to-host gives the old rows instead.
IOBARG=(--io-binding)
[ "$TIMING" = host-to-host ] && IOBARG=()
while IFS='|' read -r name b1 bn big; do
    d=$W/models/$name
    vs=(); for v in $VARIANTS; do [ -f "$d/$v.onnx" ] && vs+=("$d/$v.onnx"); done
    for b in 1 "$big"; do
        late && { echo "  $name batch $b: skipped (deadline)"; continue; }
        shapes=$b1; [ "$b" = 1 ] || shapes=$bn
        if ! bench_one "$name" "$b" "$shapes" "b$b" "$d/fp32.onnx" "${vs[@]}"; then
            # One variant that does not load stops the whole process: time each
            # variant against FP32 alone (bench_b<B>_<variant>.json).
            for m in "${vs[@]}"; do
                late || bench_one "$name" "$b" "$shapes" "b${b}_$(basename "$m" .onnx)" "$d/fp32.onnx" "$m"
            done
        fi
    done
done < "$W/models.txt"
# Extra rows at the large batch, one process per model: MODELS_CSV TAG VARIANT_GLOB,
# under the EPOPT / IOBARG / BENCH_ENV set by the caller.
extra_rows() {
    local only=$1 tag=$2 glob=$3 name bn big d vs v
    while IFS='|' read -r name _ bn big; do
        case ",$only," in *",$name,"*) ;; *) continue ;; esac
        d=$W/models/$name
        late && { echo "  $name $tag: skipped (deadline)"; continue; }
        vs=(); for v in $VARIANTS; do
            # shellcheck disable=SC2254
            case $v in $glob) [ -f "$d/$v.onnx" ] && vs+=("$d/$v.onnx") ;; esac
        done
        bench_one "$name" "$big" "$bn" "${tag}_b$big" "$d/fp32.onnx" "${vs[@]}"
    done < "$W/models.txt"
}
EPOPT=(--ep-option "$NHWC_OPTION")
extra_rows "$NHWC_MODELS" "$NHWC_TAG" 'fp16*'
EPOPT=()
# The same models and variants host to host (inputs in and outputs out on
# every run): rows `... h2h`.
if [ "$TIMING" != host-to-host ]; then
    IOBARG=()
    extra_rows "$H2H_MODELS" h2h '*'
    IOBARG=(--io-binding)
fi
# FP32 as specified (no TF32 tensor cores) against the variants: rows `... notf32`.
EPOPT=(--ep-option cuda:use_tf32=0)
extra_rows "$NOTF32_MODELS" notf32 '*'
EPOPT=()
# CUDA graphs: every variant against FP32 in one process; when FP32 (or any
# variant) cannot be captured, the optimized FP32 against the variants.
EPOPT=(--ep-option cuda:enable_cuda_graph=1)
graph_rows() { # MODELS_CSV TAG
    local only=$1 tag=$2 name bn big d vs v
    while IFS='|' read -r name _ bn big; do
        case ",$only," in *",$name,"*) ;; *) continue ;; esac
        d=$W/models/$name
        late && { echo "  $name graph: skipped (deadline)"; continue; }
        vs=(); for v in $VARIANTS; do [ -f "$d/$v.onnx" ] && vs+=("$d/$v.onnx"); done
        bench_one "$name" "$big" "$bn" "${tag}_b$big" "$d/fp32.onnx" "${vs[@]}" && continue
        [ -f "$d/opt.onnx" ] || continue
        vs=(); for v in $VARIANTS; do [ "$v" != opt ] && [ -f "$d/$v.onnx" ] && vs+=("$d/$v.onnx"); done
        bench_one "$name" "$big" "$bn" "${tag}opt_b$big" "$d/opt.onnx" "${vs[@]}"
    done < "$W/models.txt"
}
graph_rows "$GRAPH_MODELS" graph
EPOPT=(--ep-option cuda:enable_cuda_graph=1 --ep-option cuda:prefer_nhwc=1)
graph_rows "$GRAPH_NHWC_MODELS" graphnhwc
EPOPT=()
BENCH_ENV=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=1073741824)
extra_rows "$HEAP_MODELS" heap '*'
BENCH_ENV=()
# CPU reference for one model: is the GPU really in use?
name=resnet50; d=$W/models/$name
if [ -f "$d/fp32.onnx" ] && [ ! -s "$d/bench_cpu_b1.json" ]; then
    "$INFOPT" bench "$d/fp32.onnx" --backend ort --input-shape input:1x3x224x224 --warmup 5 --runs 20 --json \
        > "$d/bench_cpu_b1.json" 2> "$d/bench_cpu_b1.log"
    echo "  resnet50 batch 1 on the CPU EP: exit $?"
fi
kill "$DMON" 2>/dev/null

# ---------------------------------------------------------------- agreement (GPU)
log "agreement with FP32 on the GPU (large batch)"
while IFS='|' read -r name _ bn _; do
    for v in $VARIANTS; do echo "$name $v $bn"; done
done < "$W/models.txt" | xargs -P 4 -L1 bash -c '
    name=$0; v=$1; shift 2
    d=$W/models/$name
    [ -f "$d/$v.onnx" ] || exit 0
    [ -s "$d/compare_$v.json" ] && exit 0
    [ $(($(date +%s) - START)) -ge "$DEADLINE" ] && { echo "  $name/$v: compare skipped (deadline)"; exit 0; }
    sargs=(); for s in "$@"; do sargs+=(--input-shape "$s"); done
    # Real-weight models compare on inputs of their task (gpu_models.py REAL_INPUTS),
    # the recognizer also on its per-timestep character (top-1 agreement).
    [ -f "$d/real.npz" ] && sargs=(--inputs "$d/real.npz")
    [ "$name" = ppocr_v4_rec ] && sargs+=(--gate min_topk_agreement=0.0)
    "$INFOPT" compare "$d/fp32.onnx" "$d/$v.onnx" --backend ort --ep '"$EP"' "${sargs[@]}" --vocab 1000 --json \
        > "$d/compare_$v.json" 2> "$d/compare_$v.log"
    echo "  $name/$v: compare exit $?"'

# ---------------------------------------------------------------- extra checks
# AFTER=FILE: a bash file sourced here, with INFOPT, W, OUT, EP and the CUDA
# libraries set up (e.g. bench/gpu_iobinding_check.sh).
if [ -n "${AFTER:-}" ]; then
    log "extra checks ($AFTER)"
    # shellcheck disable=SC1090
    source "$AFTER"
fi

# ---------------------------------------------------------------- table
log "table"
python3 "$HERE/gpu_table.py" "$W" --variants "$VARIANTS" | tee "$OUT/gpu_bench.md"
# Reports, logs and bench JSON for later reading (no models).
tar -C "$W" -cf - models.txt $(cd "$W" && ls models/*/*.json models/*/*.log models/*.line models/*/*.unverified 2>/dev/null) \
    | xz -6 > "$OUT/reports.tar.xz"
log "done"
