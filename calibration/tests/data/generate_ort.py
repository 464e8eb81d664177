"""Writes the ONNX Runtime calibration tables read by tests/formats.rs.

Run with a Python that has onnxruntime (and onnx, flatbuffers) installed:
    python calibration/tests/data/generate_ort.py
It calls onnxruntime.quantization's own write_calibration_table, so the files are exactly
what ORT users bring (calibration.json, calibration.cache, calibration.flatbuffers).
"""

import os

import numpy as np
from onnxruntime.quantization.calibrate import TensorData
from onnxruntime.quantization.quant_utils import write_calibration_table

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort")
os.makedirs(here, exist_ok=True)
table = {
    # numpy scalars, as ORT's MinMax calibrator produces them
    "conv1_out": TensorData(
        lowest=np.array(-1.25, dtype=np.float32), highest=np.array(3.5, dtype=np.float32)
    ),
    # plain floats, with histogram fields that a range reader must skip
    "relu:0": TensorData(
        lowest=np.float32(0.0),
        highest=np.float32(0.123456789),
        hist=np.array([5, 3, 1]),
        hist_edges=np.array([0.0, 0.05, 0.1, 0.15], dtype=np.float32),
    ),
    # all-negative tensor: ORT's text formats store max(highest, lowest) = -0.5
    "neg": TensorData(lowest=np.float32(-2.0), highest=np.float32(-0.5)),
}
write_calibration_table(table, here)
import onnxruntime

print("wrote", sorted(os.listdir(here)), "with onnxruntime", onnxruntime.__version__)
