"""Calibration time and peak memory: infopt calibrate vs ONNX Runtime's
calibrators (onnxruntime.quantization), same model, same samples, same
machine, one after the other.

    python bench/calib_bench.py INFOPT_BIN MODEL.onnx [--samples 64] [--method minmax|entropy]

Samples are seeded random float32 arrays of the model's input shape (batch 1),
written once as a stacked .npz for infopt and fed to ORT through a
CalibrationDataReader. Prints wall time and peak RSS of each.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def run_infopt(binary, model, npz, method, backend):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ranges.json")
        cmd = ["/usr/bin/time", "-f", "%M", binary, "calibrate", model, "--data", npz,
               "--method", method, "-o", out, "--backend", backend]
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if p.returncode != 0:
            sys.exit(f"infopt failed: {p.stderr}")
        rss_kb = int(p.stderr.strip().splitlines()[-1])
        return wall, rss_kb / 1024


ORT_CHILD = r'''
import sys, time, resource, numpy as np, onnxruntime as ort
from onnxruntime.quantization import calibrate as C
model, npz, method, out = sys.argv[1:5]
data = np.load(npz)
name = data.files[0]
arr = data[name]
class Reader(C.CalibrationDataReader):
    def __init__(self):
        self.i = 0
    def get_next(self):
        if self.i >= len(arr):
            return None
        self.i += 1
        return {name: arr[self.i - 1]}
m = {"minmax": C.CalibrationMethod.MinMax, "entropy": C.CalibrationMethod.Entropy,
     "percentile": C.CalibrationMethod.Percentile}[method]
t = time.perf_counter()
cal = C.create_calibrator(model, [], augmented_model_path=out, calibrate_method=m)
cal.collect_data(Reader())
cal.compute_data()
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
'''


def run_ort(model, npz, method):
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([sys.executable, "-c", ORT_CHILD, model, npz, method,
                            os.path.join(d, "aug.onnx")], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"ORT failed: {p.stderr[-2000:]}")
        wall, rss = p.stdout.split()
        return float(wall), float(rss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("model")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--method", default="minmax")
    ap.add_argument("--backend", default="ort")
    ap.add_argument("--shape", default="1,3,224,224")
    a = ap.parse_args()
    import onnx
    m = onnx.load(a.model, load_external_data=False)
    name = m.graph.input[0].name
    shape = [int(x) for x in a.shape.split(",")]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        npz = os.path.join(d, "calib.npz")
        np.savez(npz, **{name: rng.standard_normal([a.samples] + shape).astype(np.float32)})
        iw, ir = run_infopt(a.infopt, a.model, npz, a.method, a.backend)
        ow, orr = run_ort(a.model, npz, a.method)
    print(f"model {os.path.basename(a.model)} samples {a.samples} method {a.method}")
    print(f"infopt calibrate ({a.backend}): {iw:.2f} s wall, peak RSS {ir:.0f} MB")
    print(f"onnxruntime calibrator:        {ow:.2f} s, peak RSS {orr:.0f} MB")
    print(f"time ratio infopt/ORT: {iw / ow:.2f}")


if __name__ == "__main__":
    main()
