#!/usr/bin/env bash
# Does the latency gate flip on this machine? (figures, not a test)
#   1. the same passing gate N times: MODEL against itself (true ratio 1) under
#      max_latency_ratio=THRESHOLD; counts the runs that failed (goal: 0);
#   2. a slowed copy of MODEL (bench/slowed_model.py, extra work of COLS columns) against
#      MODEL, N times: counts the runs that caught it (exit 5).
#
#   bash bench/latency_gate_stability.sh [N] [MODEL] [THRESHOLD] [COLS]
# INFOPT names the binary (default: infopt on PATH); PYTHON needs onnx (default .venv).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n="${1:-20}"
model="${2:-fixtures/models/cnn_bn_relu.onnx}"
threshold="${3:-1.05}"
cols="${4:-256}"
infopt="${INFOPT:-infopt}"
python="${PYTHON:-.venv/bin/python}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$python" bench/slowed_model.py "$model" "$tmp/slow.onnx" --cols "$cols" > /dev/null

run() {  # run LABEL CANDIDATE: N gate runs, one line each, then the count of exit 5
    local label="$1" candidate="$2" fails=0 i rc verdict
    for i in $(seq 1 "$n"); do
        "$infopt" bench "$model" --compare "$candidate" --gate "max_latency_ratio=$threshold" \
            --warmup 5 --report "$tmp/r.json" > /dev/null 2> "$tmp/err"
        rc=$?
        verdict=$("$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['gates']['latency']['verdict'] + ', runs ' + str(json.load(open(sys.argv[1]))['gates']['latency']['runs']))" "$tmp/r.json" 2>/dev/null)
        echo "$label #$i exit $rc: $verdict"
        [ "$rc" -eq 5 ] && fails=$((fails + 1))
        [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ] && cat "$tmp/err"
    done
    echo "$label: $fails of $n runs exited 5 (gate failed)"
}
run same "$model"
run slowed "$tmp/slow.onnx"
