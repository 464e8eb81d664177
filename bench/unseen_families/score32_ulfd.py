# Task scores and one-thread latency of session 32's face detector runs (gen32_ulfd.py makes the data):
#   python score32_ulfd.py DATA_DIR FP32.onnx CAND.onnx [CAND.onnx ...]
# Faces as the project's detect_imgs_onnx.py finds them: class-1 probability above 0.7, hard NMS at
# IoU 0.3. Each candidate's faces are matched one to one to FP32's (IoU >= 0.5, greedy by score):
# precision, recall and F1 against FP32's faces; the mean IoU of the matched pairs; the largest
# score difference; non-finite outputs.
# Latency: median of 20 rounds of 10 runs at one intra-op thread, every model once per round
# (interleaved), on the first held-out image, after 3 warm-up rounds.
import glob, os, sys

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from photos32 import loaded, print_latency, session  # noqa: E402

ort.set_default_logger_severity(3)  # old exports list their initializers as inputs: a warning each

data, fp32 = sys.argv[1:3]
cands = sys.argv[3:]
THRESHOLD, NMS_IOU, MATCH_IOU = 0.7, 0.3, 0.5



def iou(a, b):
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:4], b[None, :, 2:4])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    area = lambda x: np.prod(np.clip(x[:, 2:4] - x[:, :2], 0, None), axis=1)
    return inter / (area(a)[:, None] + area(b)[None, :] - inter + 1e-9)


def faces(scores, boxes):
    p = scores[0][:, 1]
    keep = p > THRESHOLD
    b, p = boxes[0][keep], p[keep]
    order = np.argsort(-p)
    picked = []
    while len(order):
        i = order[0]
        picked.append(i)
        if len(order) == 1:
            break
        rest = order[1:]
        order = rest[iou(b[[i]], b[rest])[0] <= NMS_IOU]
    return np.concatenate([b[picked], p[picked, None]], axis=1) if picked else np.zeros((0, 5))


def match(ref, got):
    if len(ref) == 0 or len(got) == 0:
        return 0, []
    m = iou(ref, got)
    pairs, used_r, used_g = [], set(), set()
    for r, g in sorted(((r, g) for r in range(len(ref)) for g in range(len(got)) if m[r, g] >= MATCH_IOU),
                       key=lambda rg: -m[rg]):
        if r not in used_r and g not in used_g:
            used_r.add(r); used_g.add(g); pairs.append(m[r, g])
    return len(pairs), pairs


feeds = [dict(np.load(f)) for f in sorted(glob.glob(os.path.join(data, "held", "*.npz")))]
ref = session(fp32, threads=2)
ref_out = [ref.run(None, f) for f in feeds]
ref_faces = [faces(*o) for o in ref_out]
total = sum(len(f) for f in ref_faces)
print("held-out images %d, FP32 finds %d faces" % (len(feeds), total))
for c, s in loaded(cands):
    tp = found = 0; ious = []; dscore = 0.0; bad = 0
    for f, o_ref, fr in zip(feeds, ref_out, ref_faces):
        o = s.run(None, f)
        bad += int(sum(np.sum(~np.isfinite(x)) for x in o))
        dscore = max(dscore, float(np.max(np.abs(np.nan_to_num(o[0]) - o_ref[0]))))
        fg = faces(*[np.nan_to_num(x) for x in o])
        n, pairs = match(fr, fg)
        tp += n; found += len(fg); ious += pairs
    prec = tp / found if found else 1.0
    rec = tp / total if total else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    print("%s: %d faces, F1 against FP32 %.4f (precision %.4f, recall %.4f), matched IoU mean %.4f, largest |d score| %.4f, non-finite %d"
          % (os.path.basename(c), found, f1, prec, rec, np.mean(ious) if ious else float("nan"), dscore, bad))

print_latency([fp32] + cands, feeds[0], runs=10)
