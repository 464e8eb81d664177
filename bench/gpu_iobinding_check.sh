# Sourced by bench/gpu_bench.sh (AFTER=...): --io-binding through every command that
# times, on the GPU, after the table's models exist in $W/models. Not a test: prints
# exit codes and the latency lines, and leaves the JSON in $W/iob/.
mkdir -p "$W/iob"
iob_model=${IOB_MODEL:-resnet50}
d=$W/models/$iob_model
shape=$(cut -d'|' -f3 "$W/models/$iob_model.line")
if [ -f "$d/fp32.onnx" ]; then
    # optimize --bench: original against optimized, both device-resident.
    "$INFOPT" optimize "$d/fp32.onnx" -o "$W/iob/opt.onnx" --target onnxruntime --backend ort --ep "$EP" \
        --input-shape "$shape" --bench --io-binding --warmup 10 --runs 40 --report "$W/iob/optimize.json" \
        > "$W/iob/optimize.log" 2>&1
    echo "  optimize --bench --io-binding: exit $?"
    grep -iE "latency|speed|transfer|device" "$W/iob/optimize.log" | head -8
    # compare with a latency gate, device-resident.
    for v in fp16 fp16c; do
        [ -f "$d/$v.onnx" ] || continue
        "$INFOPT" compare "$d/fp32.onnx" "$d/$v.onnx" --backend ort --ep "$EP" --input-shape "$shape" \
            --io-binding --gate max_latency_ratio=1.0 --warmup 10 --runs 40 --json > "$W/iob/compare_$v.json" \
            2> "$W/iob/compare_$v.log"
        echo "  compare fp32 $v --io-binding --gate max_latency_ratio=1.0: exit $?"
        python3 - "$W/iob/compare_$v.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
lat = (j.get("gates") or {}).get("latency") or {}
print("   backend.transfer:", j.get("backend", {}).get("transfer"),
      "| reference median", lat.get("reference_median_ms"), "candidate median", lat.get("candidate_median_ms"),
      "| verdict:", lat.get("verdict"))
PY
    done
    # bench with the same gate, and host-to-host for contrast.
    for mode in --io-binding ""; do
        "$INFOPT" bench "$d/fp32.onnx" --compare "$d/opt.onnx" --backend ort --ep "$EP" --input-shape "$shape" \
            $mode --gate max_latency_ratio=1.05 --runs 40 --json > "$W/iob/bench_gate${mode:+_iob}.json" 2>/dev/null
        echo "  bench --gate max_latency_ratio=1.05 ${mode:-(host to host)}: exit $?"
    done
fi
