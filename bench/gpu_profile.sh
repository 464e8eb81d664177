# Where a float16 model's GPU time goes, op type by op type, next to FP32's.
#
# Sourced by gpu_bench.sh as its AFTER hook (INFOPT, W, OUT, EP and the CUDA
# libraries are set up there):
#
#   AFTER=$PWD/bench/gpu_profile.sh PROFILE_MODELS=resnet50,efficientnet_b0 \
#     PROFILE_VARIANTS="fp32 fp16g" bash bench/gpu_bench.sh PKG WORK OUT
#
# Each model and variant runs once more in `infopt bench` at the large batch
# with ONNX Runtime's own profile on (INFOPT_ORT_PROFILE_DIR) and
# CUDA_LAUNCH_BLOCKING=1: every kernel launch then waits for the kernel, so a
# node's duration in the profile is its GPU time plus one launch, not the
# launch alone (ONNX Runtime's release builds record no GPU timestamps).
# Absolute times are inflated by the synchronisation; the op-type shares and
# the FP16/FP32 ratios per op type are what this is for. Rows with and
# without cuDNN's NHWC kernels (tags nchw, nhwc). bench/ort_profile_table.py
# turns the profiles into $OUT/gpu_profile.md.
PROFILE_MODELS=${PROFILE_MODELS:-resnet50,efficientnet_b0,yolov5s}
PROFILE_VARIANTS=${PROFILE_VARIANTS:-fp32 fp16g}
PROFILE_RUNS=${PROFILE_RUNS:-10}
PROFILE_WARMUP=${PROFILE_WARMUP:-3}
log "op-type profile ($PROFILE_MODELS: $PROFILE_VARIANTS)"
mkdir -p "$OUT/prof"
while IFS='|' read -r name _ bn big; do
    case ",$PROFILE_MODELS," in *",$name,"*) ;; *) continue ;; esac
    d=$W/models/$name
    sargs=(); for s in $bn; do sargs+=(--input-shape "$s"); done
    for v in $PROFILE_VARIANTS; do
        [ -f "$d/$v.onnx" ] || continue
        for tag in nchw nhwc; do
            late && { echo "  $name/$v $tag: profile skipped (deadline)"; continue; }
            epopt=(); [ "$tag" = nhwc ] && epopt=(--ep-option cuda:prefer_nhwc=1)
            p=$OUT/prof/${name}_b${big}_${v}_$tag
            rm -rf "$p"
            timeout 120 env CUDA_LAUNCH_BLOCKING=1 INFOPT_ORT_PROFILE_DIR="$p" "$INFOPT" bench "$d/$v.onnx" \
                --backend ort --ep "$EP" "${epopt[@]}" --io-binding "${sargs[@]}" --vocab 1000 \
                --warmup "$PROFILE_WARMUP" --runs "$PROFILE_RUNS" --json > "$p.bench.json" 2> "$p.log"
            echo "  $name/$v $tag: profile exit $?"
        done
    done
done < "$W/models.txt"
python3 "$HERE/ort_profile_table.py" "$OUT/prof" --skip-runs "$PROFILE_WARMUP" > "$OUT/gpu_profile.md" \
    && cat "$OUT/gpu_profile.md"
