"""Scores smart-turn variants on gen27_smartturn.py's held-out features: the
turn-end decision (p > 0.5) against FP32's, the probabilities' mean and
largest difference, and ONNX Runtime CPU latency at one thread (10
interleaved rounds).

    python bench/unseen_families/score27_smartturn.py HELD_DIR FP32.onnx NAME=VARIANT.onnx...
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from real_int8 import held_npz, latency, variant_sessions  # noqa: E402


def main():
    held_dir, fp32, *variants = sys.argv[1:]
    held = held_npz(held_dir)
    models, sessions = variant_sessions(fp32, variants)
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
