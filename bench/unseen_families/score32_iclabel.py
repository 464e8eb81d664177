# Task scores and one-thread latency of session 32's ICLabel runs (gen32_iclabel.py makes the data):
#   python score32_iclabel.py DATA_DIR FP32.onnx CAND.onnx [CAND.onnx ...]
# Every held-out recording's components are labelled as mne-icalabel labels them (the argmax of the
# seven class probabilities); each candidate against FP32: top-1 agreement over the components,
# the artifact decision a cleaning script makes (argmax muscle, eye, heart, line or channel noise:
# the component is removed), and the mean and largest |d probability|.
# Latency: median of 20 runs at one intra-op thread, every model once per round (interleaved), on
# the recording with the most components, after 3 warm-up rounds.
import glob, os, sys

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from photos32 import loaded, print_latency, session  # noqa: E402

ort.set_default_logger_severity(3)  # old exports list their initializers as inputs: a warning each

data, fp32 = sys.argv[1:3]
cands = sys.argv[3:]
ARTIFACT = {1, 2, 3, 4, 5}



feeds = [dict(np.load(f)) for f in sorted(glob.glob(os.path.join(data, "held", "*.npz")))]
ref = session(fp32, threads=2)
ref_out = [ref.run(None, f)[0] for f in feeds]
labels = np.concatenate([r.argmax(1) for r in ref_out])
print("held-out recordings %d, components %d; FP32's labels: %s" % (
    len(feeds), len(labels), np.bincount(labels, minlength=7).tolist()))
for c, s in loaded(cands):
    out = [s.run(None, f)[0] for f in feeds]
    got = np.concatenate([o.argmax(1) for o in out])
    d = np.concatenate([np.abs(o - r).ravel() for o, r in zip(out, ref_out)])
    art = np.mean([(a in ARTIFACT) == (b in ARTIFACT) for a, b in zip(got, labels)])
    print("%s: top-1 agreement %.4f (%d of %d), artifact decision %.4f, mean |dp| %.5f, largest %.4f, non-finite %d"
          % (os.path.basename(c), np.mean(got == labels), np.sum(got == labels), len(labels), art, d.mean(),
             d.max(), int(np.sum(~np.isfinite(d)))))

biggest = max(range(len(feeds)), key=lambda i: feeds[i]["topo"].shape[0])
print_latency([fp32] + cands, feeds[biggest], label=", batch %d" % feeds[biggest]["topo"].shape[0])
