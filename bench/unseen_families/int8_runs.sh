# Sourced by run19.sh, run21.sh and run22.sh: the runs each family gets.
# int8_runs NAME MODEL CALIB_DIR OUT_DIR SUMMARY INFOPT PYTHON
#   the default INT8 command on both targets, then ORT quantize_static
#   MinMax (ortq.py), each with its rc and wall time appended to SUMMARY.
timed() {  # timed SUMMARY LABEL CMD...: runs CMD, appends "LABEL rc=.. wall=.."
  local sum=$1 label=$2; shift 2
  local s e rc
  s=$(date +%s.%N); "$@"; rc=$?; e=$(date +%s.%N)
  echo "$label rc=$rc wall=$(echo "$e-$s" | bc)" | tee -a "$sum"
}
int8_runs() {
  local N=$1 M=$2 C=$3 O=$4 SUM=$5 B=$6 PY=$7 t
  mkdir -p "$O"
  for t in portable onnxruntime; do
    timed "$SUM" "$N $t" sh -c "'$B' optimize '$M' --int8 --calib-data '$C' --target $t -o '$O/int8_$t.onnx' --report '$O/int8_$t.json' > '$O/int8_$t.out' 2> '$O/int8_$t.err'"
  done
  timed "$SUM" "$N ortq" sh -c "'$PY' '$(dirname "${BASH_SOURCE[0]}")/ortq.py' '$M' '$C' '$O/ortq.onnx' > '$O/ortq.log' 2>&1"
}
