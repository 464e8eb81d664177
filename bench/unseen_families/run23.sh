#!/bin/bash
# Session 23's unseen families (gen23.py makes the data, score23.py scores): a new user's default
# commands, each with rc and wall time in $OUT/summary.txt:
#   inspect; optimize (no flags); optimize --fp16 (no data) and --fp16 --inputs first-held-sample;
#   optimize --int8 --calib-data on both targets; build-engine --fp16 (plain, then with --trt-lib
#   and, for dynamic inputs, --shapes from the first held-out sample)
# usage: run23.sh INFOPT DATA_DIR MODELS_DIR OUT [ONLY] [TRT_LIB_DIR]
# MODELS_DIR holds NAME.onnx copied out of the packages (see gen23.py for where each comes from):
#   captcha.onnx anr_enc.onnx anr_dec.onnx seizure.onnx spindle.onnx leader.onnx
# Set ORT_DYLIB_PATH for infopt's ORT backend.
B=$1; D=$2; MD=$3; OUT=$4; ONLY=${5:-"captcha anr_enc anr_dec seizure spindle leader"}; TRT=$6
mkdir -p "$OUT"
t() {  # t NAME STEP infopt-args...
  local n=$1 k=$2; shift 2
  local s=$(date +%s.%N); timeout 900 $B "$@" > $OUT/$n/$k.out 2> $OUT/$n/$k.err; local rc=$?; local e=$(date +%s.%N)
  echo "$n $k rc=$rc wall=$(echo "$e-$s"|bc)" | tee -a $OUT/summary.txt
}
for N in $ONLY; do
  M=$MD/$N.onnx; O=$OUT/$N; mkdir -p $O
  S=$(ls $D/$N/held/*.npz | head -1)
  t $N inspect inspect $M
  t $N opt optimize $M -o $O/opt.onnx --report $O/opt.json
  t $N fp16 optimize $M --fp16 -o $O/fp16.onnx --report $O/fp16.json
  t $N fp16_inputs optimize $M --fp16 --inputs $S -o $O/fp16_inputs.onnx --report $O/fp16_inputs.json
  for tg in portable onnxruntime; do
    t $N int8_$tg optimize $M --int8 --calib-data $D/$N/calib --target $tg -o $O/int8_$tg.onnx --report $O/int8_$tg.json
  done
  t $N trt build-engine $M --fp16 -o $O/engine.plan
  if [ -n "$TRT" ]; then
    SH=$(${PY:-python3} -c "
import numpy as np,sys; z=np.load(sys.argv[1]); print(' '.join('--shapes %s:%s/%s/%s' % (k, *(['x'.join(map(str, v.shape))]*3)) for k, v in z.items()))" $S)
    t $N trt_lib build-engine $M --fp16 --trt-lib $TRT -o $O/engine.plan
    t $N trt_shapes build-engine $M --fp16 --trt-lib $TRT $SH -o $O/engine_s.plan
  fi
done
