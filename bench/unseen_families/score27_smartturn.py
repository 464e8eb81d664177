"""Scores smart-turn variants on gen27_smartturn.py's held-out features: the
turn-end decision (p > 0.5) against FP32's, the probabilities' mean and
largest difference, and ONNX Runtime CPU latency at one thread (10
interleaved rounds).

    python bench/unseen_families/score27_smartturn.py HELD_DIR FP32.onnx NAME=VARIANT.onnx...
"""
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from real_int8 import latency, session  # noqa: E402


def main():
    held_dir, fp32, *variants = sys.argv[1:]
    held = [dict(np.load(f)) for f in sorted(glob.glob(f"{held_dir}/*.npz"))]
    models = {"fp32": fp32, **dict(v.split("=", 1) for v in variants)}
    sessions = {k: session(p, 1) for k, p in models.items()}
    probs = {k: np.array([s.run(None, h)[0].item() for h in held]) for k, s in sessions.items()}
    ms = latency(models, held[:10], 1, 10)
    print("| variant | turn decision (p > 0.5) = FP32 | mean abs dp | max abs dp | ms, 1 thread |")
    print("|---|---|---|---|---|")
    for k in models:
        d = np.abs(probs[k] - probs["fp32"])
        same = np.mean((probs[k] > 0.5) == (probs["fp32"] > 0.5))
        print(f"| {k} | {same:.2%} | {d.mean():.4f} | {d.max():.4f} | {ms[k]:.1f} ({ms['fp32'] / ms[k]:.2f}x) |")
    print(f"FP32 ends the turn on {int((probs['fp32'] > 0.5).sum())} of {len(held)} clips")


if __name__ == "__main__":
    main()
