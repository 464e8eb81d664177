#!/usr/bin/env bash
# The model-release pipeline of docs/ci/github-actions.yml and docs/ci/gitlab-ci.yml,
# run locally on a fixture: export -> optimize (+ gates) -> calibrate + quantize -> gate
# (INT8 against the export: accuracy, latency, structure) -> upload.
#
#   bash scripts/release-pipeline-demo.sh [MODEL.onnx] [OUT_DIR]
#
# INFOPT names the binary (default: `infopt` on PATH, else target/release/infopt, else
# target/debug/infopt). Every step writes JSON, Markdown and JUnit reports into OUT_DIR;
# GITHUB_STEP_SUMMARY defaults to OUT_DIR/step-summary.md, as on GitHub Actions. The
# script runs every step, then exits with the first failing step's code (5: a gate).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
model="${1:-fixtures/models/cnn_bn_relu.onnx}"
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
if [ -z "${INFOPT:-}" ]; then
    if command -v infopt > /dev/null; then INFOPT=infopt
    elif [ -x target/release/infopt ]; then INFOPT="$PWD/target/release/infopt"
    else INFOPT="$PWD/target/debug/infopt"; fi
fi
export GITHUB_STEP_SUMMARY="${GITHUB_STEP_SUMMARY:-$out/step-summary.md}"
status=0
step() {  # step NAME COMMAND...: run, report the exit code, remember the first failure
    local name="$1"; shift
    echo "== $name: $*"
    "$@"
    local rc=$?
    echo "== $name: exit $rc"
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
}

# 1. export: in a real pipeline, the training code writes model.onnx (torch.onnx.export,
#    tf2onnx, ...). Here the fixture stands in for it.
step export cp "$model" "$out/model.onnx"

# 2. optimize with the release pipeline (configs/release.yaml: default passes + gates).
step optimize "$INFOPT" optimize "$out/model.onnx" -o "$out/model.opt.onnx" \
    -c configs/release.yaml \
    --report "$out/optimize.json" --report "$out/optimize.md" --report "$out/optimize.xml"

# 3. quantize: `optimize --int8` calibrates the model as it is at the quantize-int8 step
#    (random:24 stands in for real calibration data: a folder of .npz samples or an
#    image folder), places Q/DQ for ONNX Runtime, and reports held-out accuracy. The
#    ranges are also written with `infopt calibrate` for a TensorRT cache.
step calibrate "$INFOPT" calibrate "$out/model.opt.onnx" --data random:16 -o "$out/ranges.json" \
    --trt-cache "$out/calibration.cache"
step quantize "$INFOPT" optimize "$out/model.opt.onnx" -o "$out/model.int8.onnx" \
    --target onnxruntime --int8 --calib-data random:24 --calib-samples 16 --held-out 8 \
    --gate forbid_ops=Loop --gate max_opset=21 \
    --report "$out/quantize.json" --report "$out/quantize.md" --report "$out/quantize.xml"
candidate="$out/model.int8.onnx"

# 4. gate: the candidate against the exported model, on the same inputs (16 rows, so
#    top-1 agreement is a fraction of 16; GATE_SHAPE=NAME:batch=N changes it), in ONNX
#    Runtime when `infopt doctor` finds it (it runs Q/DQ models fused), else tract.
backend=tract
if "$INFOPT" doctor --json | grep -A1 '"name": "ONNX Runtime"' | grep -q '"status": "ok"'; then
    backend=ort
fi
step gate "$INFOPT" compare "$out/model.onnx" "$candidate" --backend "$backend" \
    --input-shape "${GATE_SHAPE:-input:batch=16}" \
    --gate min_cosine=0.99 --gate min_topk_agreement=0.9 --gate max_latency_ratio=1.05 \
    --gate forbid_ops=com.microsoft \
    --report "$out/gate.json" --report "$out/gate.md" --report "$out/gate.xml"

# 5. upload: CI uploads $out as an artifact and posts gate.md as a comment.
echo "== upload: reports in $out:"
ls -1 "$out"
exit "$status"
