# Per-sample largest |x| of named intermediate tensors, on the samples of one or more folders of
# .npz: how far data the calibration did not see takes activations past the calibration's range
# (session 32's PAN: two tensors reach 3-5x the calibration maxima on two of four held-out photos).
# usage: python permax33.py MODEL.onnx DIR[,DIR...] TENSOR[,TENSOR...]
import glob
import sys

import numpy as np
import onnx
import onnxruntime as ort

m = onnx.load(sys.argv[1])
names = sys.argv[3].split(",")
for n in names:
    m.graph.output.append(onnx.helper.make_empty_tensor_value_info(n))
s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
for d in sys.argv[2].split(","):
    rows = [[float(np.abs(o).max()) for o in s.run(names, dict(np.load(f)))]
            for f in sorted(glob.glob(d + "/*.npz"))]
    print(d, "per-sample max|x| of", names)
    print(np.round(np.array(rows).T, 2))
