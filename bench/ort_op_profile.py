"""Where ONNX Runtime CPU spends a model's time, per op type, at one thread.

    python bench/ort_op_profile.py MODEL.onnx SAMPLES_DIR [--runs 30] [--threads 1]

Runs the model on the first .npz sample of SAMPLES_DIR (the calibration data's
layout) with ORT's profiler on, and prints each op type's milliseconds per run,
its share and its node count, as ORT ran it (after its own graph rewrites:
QLinearConv, QuickGelu, the Transposes its NHWC layout adds). Session 30 found
with it the Transposes around EfficientNet-B0's squeeze-excite blocks in INT8
and ORT's slow PRelu (half of MediaPipe's palm detector).
"""
import argparse
import collections
import glob
import json
import os
import shutil
import tempfile

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("samples")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    feeds = dict(np.load(sorted(glob.glob(a.samples + "/*.npz"))[0]))
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.enable_profiling = True
    scratch = tempfile.mkdtemp()
    so.profile_file_prefix = os.path.join(scratch, "ort")
    so.log_severity_level = 3
    s = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    for _ in range(a.runs):
        s.run(None, feeds)
    with open(s.end_profiling()) as f:
        events = json.load(f)
    shutil.rmtree(scratch)
    us = collections.defaultdict(float)
    nodes = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"].get("op_name")
            us[op] += e["dur"]
            nodes[op] += 1
    total = sum(us.values()) or 1.0
    for op, t in sorted(us.items(), key=lambda kv: -kv[1]):
        print(f"{op:28s} {t / a.runs / 1e3:7.3f} ms/run {100 * t / total:5.1f}%  n={nodes[op] // a.runs}")


if __name__ == "__main__":
    main()
