#!/bin/bash
# Session 32's unseen families (gen32_nsnet.py / gen32_iclabel.py make the data, score32_*.py score): the default
# float command, the default INT8 command on both targets, ORT quantize_static MinMax (ortq.py), and
# FP16 without and with the user's data (--inputs the first held-out sample); rc and wall times in
# $OUT/summary.txt.
# usage: run32.sh INFOPT MODEL DATA_DIR OUT [PYTHON [NAME]]    (set ORT_DYLIB_PATH for infopt's ORT backend)
B=$1; M=$2; D=$3; OUT=$4; PY=${5:-python3}; N=${6:-nsnet}
H=$(dirname "$0")
. "$H/int8_runs.sh"
mkdir -p "$OUT"
timed "$OUT/summary.txt" "float" sh -c "'$B' optimize '$M' -o '$OUT/float.onnx' --report '$OUT/float.json' > '$OUT/float.out' 2> '$OUT/float.err'"
int8_runs "$N" "$M" "$D/calib" "$OUT" "$OUT/summary.txt" "$B" "$PY"
timed "$OUT/summary.txt" "fp16" sh -c "'$B' optimize '$M' --fp16 -o '$OUT/fp16.onnx' --report '$OUT/fp16.json' > '$OUT/fp16.out' 2> '$OUT/fp16.err'"
timed "$OUT/summary.txt" "fp16 --inputs" sh -c "'$B' optimize '$M' --fp16 --inputs '$D/held/0000.npz' -o '$OUT/fp16_data.onnx' --report '$OUT/fp16_data.json' > '$OUT/fp16_data.out' 2> '$OUT/fp16_data.err'"
