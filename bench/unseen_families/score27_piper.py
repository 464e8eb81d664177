"""Scores variants of piper's text models on gen27_piper.py's held-out
sentences: per character, whether every output's argmax (the diacritic;
Nakdimon's niqqud, dagesh and sin) is FP32's, the sentences left
identical, and ONNX Runtime CPU latency at one thread (15 interleaved
rounds).

    python bench/unseen_families/score27_piper.py HELD_DIR FP32.onnx NAME=VARIANT.onnx...
"""
import glob
import sys
import time

import numpy as np
import onnxruntime as ort

ort.set_default_logger_severity(3)


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    held_dir, fp32, *variants = sys.argv[1:]
    held = [dict(np.load(f)) for f in sorted(glob.glob(f"{held_dir}/*.npz"))]
    models = {"fp32": fp32, **dict(v.split("=", 1) for v in variants)}
    sessions = {k: session(p) for k, p in models.items()}
    # Every float output of a [1, seq, classes] shape is a per-character decision.
    marks = {k: [[o[0].argmax(-1) for o in s.run(None, h) if o.dtype.kind == "f" and o.ndim == 3]
                 for h in held] for k, s in sessions.items()}
    times = {k: [] for k in sessions}
    for r in range(15):
        for k, s in sessions.items():
            t = time.perf_counter()
            s.run(None, held[r])
            times[k].append(time.perf_counter() - t)
    base = np.median(times["fp32"])
    print("| variant | characters with FP32's marks | sentences identical | ms, 1 thread |")
    print("|---|---|---|---|")
    for k in models:
        pairs = list(zip(marks[k], marks["fp32"]))
        chars = np.mean(np.concatenate([np.all([x == y for x, y in zip(a, b)], axis=0) for a, b in pairs]))
        same = np.mean([all(np.array_equal(x, y) for x, y in zip(a, b)) for a, b in pairs])
        ms = np.median(times[k])
        print(f"| {k} | {chars:.2%} | {same:.2%} | {1000 * ms:.2f} ({base / ms:.2f}x) |")


if __name__ == "__main__":
    main()
