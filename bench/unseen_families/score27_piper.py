"""Scores variants of piper's text models on gen27_piper.py's held-out
sentences: per character, whether every output's argmax (the diacritic;
Nakdimon's niqqud, dagesh and sin) is FP32's, the sentences left
identical, and ONNX Runtime CPU latency at one thread (15 interleaved
rounds).

    python bench/unseen_families/score27_piper.py HELD_DIR FP32.onnx NAME=VARIANT.onnx...
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
    # Every float output of a [1, seq, classes] shape is a per-character decision.
    marks = {k: [[o[0].argmax(-1) for o in s.run(None, h) if o.dtype.kind == "f" and o.ndim == 3]
                 for h in held] for k, s in sessions.items()}
    ms = latency(models, held[:15], 1, 15)
    print("| variant | characters with FP32's marks | sentences identical | ms, 1 thread |")
    print("|---|---|---|---|")
    for k in models:
        pairs = list(zip(marks[k], marks["fp32"]))
        chars = np.mean(np.concatenate([np.all([x == y for x, y in zip(a, b)], axis=0) for a, b in pairs]))
        same = np.mean([all(np.array_equal(x, y) for x, y in zip(a, b)) for a, b in pairs])
        print(f"| {k} | {chars:.2%} | {same:.2%} | {ms[k]:.2f} ({ms['fp32'] / ms[k]:.2f}x) |")


if __name__ == "__main__":
    main()
