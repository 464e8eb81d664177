# Task scores and one-thread latency of session 32's segmentation runs (gen32_seg.py makes the data):
#   python score32_seg.py DATA_DIR FP32.onnx CAND.onnx [CAND.onnx ...]
# Each class's mask at the demo's 0.5 threshold (skin, clothes, hair) against FP32's: IoU over the
# held-out images (pixels pooled), the share of pixels whose three decisions all agree, the mean and
# largest |d probability|, non-finite outputs.
# Latency: median of 20 runs at one intra-op thread, every model once per round (interleaved), on
# the first held-out image, after 3 warm-up rounds.
import glob, os, sys

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from photos32 import loaded, print_latency, session  # noqa: E402

ort.set_default_logger_severity(3)

data, fp32 = sys.argv[1:3]
cands = sys.argv[3:]



feeds = [dict(np.load(f)) for f in sorted(glob.glob(os.path.join(data, "held", "*.npz")))]
ref = session(fp32, threads=2)
ref_out = [ref.run(None, f)[0] for f in feeds]
share = np.mean([(r > 0.5).mean(axis=(0, 2, 3)) for r in ref_out], axis=0)
print("held-out images %d; FP32's masks cover skin %.3f, clothes %.3f, hair %.3f of the pixels" % (len(feeds), *share))
for c, s in loaded(cands):
    inter = np.zeros(3); union = np.zeros(3); agree = n = 0; dsum = dmax = 0.0; bad = 0
    for f, r in zip(feeds, ref_out):
        o = s.run(None, f)[0]
        bad += int(np.sum(~np.isfinite(o)))
        o = np.nan_to_num(o)
        a, b = o > 0.5, r > 0.5
        inter += np.sum(a & b, axis=(0, 2, 3)); union += np.sum(a | b, axis=(0, 2, 3))
        agree += np.sum(np.all(a == b, axis=1)); n += a.shape[2] * a.shape[3]
        d = np.abs(o - r); dsum += d.mean(); dmax = max(dmax, float(d.max()))
    # A class neither model finds (no pixel above 0.5) has no IoU: left out of the mean.
    iou = [i / u if u else float("nan") for i, u in zip(inter, union)]
    print("%s: mask IoU against FP32 skin %.4f clothes %.4f hair %.4f (mean of the found %.4f), pixels agreeing %.4f, mean |dp| %.5f, largest %.4f, non-finite %d"
          % (os.path.basename(c), *iou, np.nanmean(iou), agree / n, dsum / len(feeds), dmax, bad))

print_latency([fp32] + cands, feeds[0])
