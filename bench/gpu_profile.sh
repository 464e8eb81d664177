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
# without cuDNN's NHWC kernels and with cuDNN's runtime conv+bias(+activation)
# fusion (PROFILE_TAGS: nchw, nhwc, fcb = NHWC + cuda:fuse_conv_bias=1).
# bench/ort_profile_table.py turns the profiles into $OUT/gpu_profile.md.
# Then, per tag, one plain timing process per model (no synchronised
# launches; FP32 and the variants interleaved): $OUT/prof/time_*.json.
PROFILE_MODELS=${PROFILE_MODELS:-resnet50,efficientnet_b0,yolov5s}
PROFILE_VARIANTS=${PROFILE_VARIANTS:-fp32 fp16g}
PROFILE_RUNS=${PROFILE_RUNS:-10}
PROFILE_WARMUP=${PROFILE_WARMUP:-3}
PROFILE_TAGS=${PROFILE_TAGS:-nchw nhwc fcb}
# Tags of the plain timing rows and of the agreement check (cosine vs FP32 under
# the same options): a CUDA graph tag is timed, never profiled.
TIME_TAGS=${TIME_TAGS:-$PROFILE_TAGS}
COMPARE_TAGS=${COMPARE_TAGS:-}
tag_options() { # TAG -> the provider options of its rows
    case $1 in
        nchw) ;;
        nhwc) echo "--ep-option cuda:prefer_nhwc=1" ;;
        fcbnchw) echo "--ep-option cuda:fuse_conv_bias=1" ;;
        fcb) echo "--ep-option cuda:prefer_nhwc=1 --ep-option cuda:fuse_conv_bias=1" ;;
        fcbgraph) echo "--ep-option cuda:prefer_nhwc=1 --ep-option cuda:fuse_conv_bias=1 --ep-option cuda:enable_cuda_graph=1" ;;
        graph) echo "--ep-option cuda:enable_cuda_graph=1" ;;
        *) echo "unknown profile tag $1" >&2; return 1 ;;
    esac
}
log "op-type profile ($PROFILE_MODELS: $PROFILE_VARIANTS)"
mkdir -p "$OUT/prof"
while IFS='|' read -r name _ bn big; do
    case ",$PROFILE_MODELS," in *",$name,"*) ;; *) continue ;; esac
    d=$W/models/$name
    sargs=(); for s in $bn; do sargs+=(--input-shape "$s"); done
    for v in $PROFILE_VARIANTS; do
        [ -f "$d/$v.onnx" ] || continue
        for tag in $PROFILE_TAGS; do
            late && { echo "  $name/$v $tag: profile skipped (deadline)"; continue; }
            read -r -a epopt <<< "$(tag_options "$tag")"
            p=$OUT/prof/${name}_b${big}_${v}_$tag
            rm -rf "$p"
            timeout 120 env CUDA_LAUNCH_BLOCKING=1 INFOPT_ORT_PROFILE_DIR="$p" "$INFOPT" bench "$d/$v.onnx" \
                --backend ort --ep "$EP" "${epopt[@]}" --io-binding "${sargs[@]}" --vocab 1000 \
                --warmup "$PROFILE_WARMUP" --runs "$PROFILE_RUNS" --json > "$p.bench.json" 2> "$p.log"
            echo "  $name/$v $tag: profile exit $?"
        done
    done
done < "$W/models.txt"
# Plain timing per tag: FP32 first, the variants compared with it.
while IFS='|' read -r name _ bn big; do
    case ",$PROFILE_MODELS," in *",$name,"*) ;; *) continue ;; esac
    d=$W/models/$name
    sargs=(); for s in $bn; do sargs+=(--input-shape "$s"); done
    cmp=(); for v in $PROFILE_VARIANTS; do [ "$v" != fp32 ] && [ -f "$d/$v.onnx" ] && cmp+=(--compare "$d/$v.onnx"); done
    for tag in $TIME_TAGS; do
        late && { echo "  $name $tag: timing skipped (deadline)"; continue; }
        read -r -a epopt <<< "$(tag_options "$tag")"
        t=$OUT/prof/time_${name}_b${big}_$tag
        timeout 120 "$INFOPT" bench "$d/fp32.onnx" "${cmp[@]}" --backend ort --ep "$EP" "${epopt[@]}" --io-binding \
            "${sargs[@]}" --vocab 1000 --warmup 15 --runs 50 --json > "$t.json" 2> "$t.log"
        echo "  $name $tag: timing exit $?"
    done
done < "$W/models.txt"
# Agreement under a tag's options: the lowest cosine of each variant vs FP32.
while IFS='|' read -r name _ bn big; do
    case ",$PROFILE_MODELS," in *",$name,"*) ;; *) continue ;; esac
    d=$W/models/$name
    sargs=(); for s in $bn; do sargs+=(--input-shape "$s"); done
    [ -f "$d/real.npz" ] && sargs=(--inputs "$d/real.npz")
    for tag in $COMPARE_TAGS; do
        read -r -a epopt <<< "$(tag_options "$tag")"
        for v in $PROFILE_VARIANTS; do
            [ "$v" != fp32 ] && [ -f "$d/$v.onnx" ] || continue
            late && continue
            c=$OUT/prof/cmp_${name}_b${big}_${v}_$tag
            "$INFOPT" compare "$d/fp32.onnx" "$d/$v.onnx" --backend ort --ep "$EP" "${epopt[@]}" "${sargs[@]}" \
                --vocab 1000 --json > "$c.json" 2> "$c.log"
            echo "  $name/$v $tag: compare exit $?, lowest cosine $(python3 -c 'import json,sys; print(min(o["cosine"] for o in json.load(open(sys.argv[1]))["outputs"]))' "$c.json" 2>/dev/null)"
        done
    done
done < "$W/models.txt"
python3 "$HERE/ort_profile_table.py" "$OUT/prof" --skip-runs "$PROFILE_WARMUP" > "$OUT/gpu_profile.md" \
    && cat "$OUT/gpu_profile.md"
