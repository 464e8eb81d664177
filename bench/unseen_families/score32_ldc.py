# Task scores and one-thread latency of session 32's LDC runs (gen32_ldc.py makes the data):
#   python score32_ldc.py DATA_DIR FP32.onnx CAND.onnx [CAND.onnx ...]
# The fused edge map (the last output) as the demo reads it, sigmoid of the logits: edge pixels at
# 0.5, F1 against FP32's edge pixels (pooled over the held-out views), exact and with a 2-pixel
# tolerance (an edge pixel counts as found when the other map has one within 2 pixels, as edge
# benchmarks match boundaries within a distance); the share of pixels whose
# decision agrees; the mean and largest |d probability| over the five maps; non-finite outputs.
# Latency: median of 20 runs at one intra-op thread, every model once per round (interleaved),
# on the first held-out view, after 3 warm-up rounds.
import glob, os, sys

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from photos32 import loaded, print_latency, session  # noqa: E402

ort.set_default_logger_severity(3)

data, fp32 = sys.argv[1:3]
cands = sys.argv[3:]



def near(m, r=2):
    """`m` dilated by a (2r+1)-square: pixels within r of a marked one."""
    out = m.copy()
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            out |= np.roll(np.roll(m, dy, axis=-2), dx, axis=-1)
    return out


def sigmoid(x):
    return 1 / (1 + np.exp(-np.clip(x, -60, 60)))


feeds = [dict(np.load(f)) for f in sorted(glob.glob(os.path.join(data, "held", "*.npz")))]
ref = session(fp32, threads=2)
ref_out = [[sigmoid(o) for o in ref.run(None, f)] for f in feeds]
print("held-out views %d; FP32's fused map marks %.4f of the pixels as edges" % (
    len(feeds), np.mean([(r[-1] > 0.5).mean() for r in ref_out])))
for c, s in loaded(cands):
    tp = fp = fn = agree = n = 0; dsum = dmax = 0.0; bad = 0
    t_prec = t_rec = t_a = t_b = 0
    for f, r in zip(feeds, ref_out):
        raw = s.run(None, f)
        bad += int(sum(np.sum(~np.isfinite(o)) for o in raw))
        o = [sigmoid(np.nan_to_num(x)) for x in raw]
        a, b = o[-1] > 0.5, r[-1] > 0.5
        tp += np.sum(a & b); fp += np.sum(a & ~b); fn += np.sum(~a & b)
        t_prec += np.sum(a & near(b)); t_a += np.sum(a)
        t_rec += np.sum(b & near(a)); t_b += np.sum(b)
        agree += np.sum(a == b); n += a.size
        d = [np.abs(x - y) for x, y in zip(o, r)]
        dsum += np.mean([x.mean() for x in d]); dmax = max(dmax, max(float(x.max()) for x in d))
    f1 = 2 * tp / max(2 * tp + fp + fn, 1)
    tp_, tr_ = t_prec / max(t_a, 1), t_rec / max(t_b, 1)
    tf1 = 2 * tp_ * tr_ / max(tp_ + tr_, 1e-12)
    print("%s: edge F1 against FP32 %.4f exact, %.4f within 2 px, pixels agreeing %.5f, mean |dp| %.5f, largest %.4f, non-finite %d"
          % (os.path.basename(c), f1, tf1, agree / n, dsum / len(feeds), dmax, bad))

print_latency([fp32] + cands, feeds[0])
