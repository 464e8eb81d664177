#!/bin/bash
# Session 24's classical-ML family (gen24_sklearn.py makes the models and data): optimize (--bench),
# --fp16 and --int8 on both targets for every model; rc, wall time and the last line in $OUT/summary.txt,
# then score24_sklearn.py (held-out labels / R^2 against FP32).
# usage: run24_sklearn.sh INFOPT DIR OUT [PYTHON]   (set ORT_DYLIB_PATH for infopt's ORT backend)
B=$1; D=$2; OUT=$3; PY=${4:-python3}
mkdir -p "$OUT"
for n in rf rf_zm logreg logreg_zm mlp mlp_zm svc svc_zm mlp_str mlp_str_zm lgbm gbr ridge64 pca_mlp; do
  calib=$D/calib; [ $n = lgbm ] && calib=$D/calib_lgbm; [ $n = ridge64 ] && calib=$D/calib64
  for k in opt fp16 int8_portable int8_onnxruntime; do
    case $k in
      opt) a="--bench";; fp16) a="--fp16";;
      int8_portable) a="--int8 --calib-data $calib";; int8_onnxruntime) a="--int8 --calib-data $calib --target onnxruntime";;
    esac
    s=$(date +%s.%N); timeout 600 $B optimize $D/$n.onnx $a -o $OUT/${n}_$k.onnx > $OUT/${n}_$k.out 2> $OUT/${n}_$k.err
    rc=$?; e=$(date +%s.%N)
    echo "$n $k rc=$rc wall=$(echo "$e-$s" | bc) | $(tail -1 $OUT/${n}_$k.err | cut -c1-160)" | tee -a $OUT/summary.txt
  done
done
$PY "$(dirname "$0")/score24_sklearn.py" $D $OUT | tee $OUT/scores.md
