# Task scores of session 25's MediaPipe models (gen25.py makes the data):
#   python score25.py NAME FP32.onnx HELD_DIR CAND.onnx [CAND.onnx ...]
# Every candidate is scored against FP32 on the held-out samples:
#   face:     BlazeFace short-range decoded as MediaPipe does (896 anchors: 16x16x2 at stride 8,
#             8x8x6 at stride 16; box = anchor + regressor / 128; score = sigmoid > 0.5;
#             weighted NMS replaced by plain NMS at IoU 0.3): FP32 detections found again with
#             IoU >= 0.5, and detections FP32 does not have
#   hand:     21 landmarks (x, y in 224-px input coordinates): share within 2.24 px (1% of the
#             side) of FP32's; handedness decision (> 0.5) agreement; presence |dp|
#   iris:     71 contour + 5 iris points (64-px input): share within 0.64 px (1% of the side)
#   recrop:   the 4 crop values: share within 2.56 (1% of 256) of FP32's
#   facemesh: 468 points (192-px input): share within 1.92 px; face-flag decision (logit > 0)
#   palm:     BlazePalm decoded like face (2016 anchors: 24x24x2 at stride 8, 12x12x6 at 16;
#             boxes / 192): FP32 detections found again with IoU >= 0.5
#   pose:     the 33 body landmarks (x, y of 39x5, 256-px input): share within 2.56 px; the
#             segmentation mask's pixels (logit > 0) agreeing; presence |dp|
# Plus the worst-sample cosine of every output, and latency: FP32 and every candidate interleaved
# in ONNX Runtime CPU at one thread, 15 rounds on the first held-out sample, median ms.
import glob
import sys
import time

import numpy as np
import onnxruntime as ort

name, fp32, held = sys.argv[1:4]
cands = sys.argv[4:]


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def cos(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def anchors(side=128):
    out = []
    for stride, per in ((8, 2), (16, 6)):
        n = side // stride
        for y in range(n):
            for x in range(n):
                out += [((x + 0.5) / n, (y + 0.5) / n)] * per
    return np.array(out)


ANCHORS = {128: anchors(128), 192: anchors(192)}


def iou(a, b):
    ax0, ay0, ax1, ay1 = a[0] - a[2] / 2, a[1] - a[3] / 2, a[0] + a[2] / 2, a[1] + a[3] / 2
    bx0, by0, bx1, by1 = b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
    iw = max(0.0, min(ax1, bx1) - max(ax0, bx0))
    ih = max(0.0, min(ay1, by1) - max(ay0, by0))
    inter = iw * ih
    return inter / (a[2] * a[3] + b[2] * b[3] - inter + 1e-12)


def faces(outs, side=128):
    reg, cls = outs[0][0], outs[1][0, :, 0]
    p = 1 / (1 + np.exp(-np.clip(cls, -80, 80)))
    boxes = np.concatenate([ANCHORS[side] + reg[:, :2] / side, reg[:, 2:4] / side], 1)
    keep = []
    for i in np.argsort(-p):
        if p[i] <= 0.5:
            break
        if all(iou(boxes[i], boxes[j]) < 0.3 for j in keep):
            keep.append(i)
    return [boxes[i] for i in keep]


def score(ref, got):
    """(task score in %, a note) of one candidate's outputs against FP32's, over the samples."""
    if name in ("face", "palm"):
        side = 128 if name == "face" else 192
        found = total = extra = 0
        for r, g in zip(ref, got):
            a, b = faces(r, side), faces(g, side)
            total += len(a)
            found += sum(any(iou(x, y) >= 0.5 for y in b) for x in a)
            extra += sum(not any(iou(x, y) >= 0.5 for y in a) for x in b)
        return 100.0 * found / max(total, 1), f"{found}/{total} found, {extra} new"
    if name in ("hand", "handfull"):
        d = [np.hypot(*(r[0].reshape(21, 3)[:, :2] - g[0].reshape(21, 3)[:, :2]).T) for r, g in zip(ref, got)]
        pck = 100.0 * np.mean(np.concatenate(d) <= 2.24)
        hand = np.mean([(r[2] > 0.5) == (g[2] > 0.5) for r, g in zip(ref, got)])
        dp = np.mean([abs(float(r[1].ravel()[0]) - float(g[1].ravel()[0])) for r, g in zip(ref, got)])
        return pck, f"mean error {np.mean(np.concatenate(d)):.3f} px, handedness {100 * hand:.1f}%, presence |dp| {dp:.4f}"
    if name == "iris":
        d = [np.hypot(*(np.concatenate([r[0].reshape(71, 3), r[1].reshape(5, 3)])[:, :2]
                        - np.concatenate([g[0].reshape(71, 3), g[1].reshape(5, 3)])[:, :2]).T) for r, g in zip(ref, got)]
        return 100.0 * np.mean(np.concatenate(d) <= 0.64), f"mean error {np.mean(np.concatenate(d)):.3f} px"
    if name == "recrop":
        d = np.concatenate([np.abs(r[0] - g[0]).ravel() for r, g in zip(ref, got)])
        return 100.0 * np.mean(d <= 2.56), f"mean |d| {d.mean():.3f}"
    if name == "facemesh":
        d = [np.hypot(*(r[0].reshape(468, 3)[:, :2] - g[0].reshape(468, 3)[:, :2]).T) for r, g in zip(ref, got)]
        flag = np.mean([(r[1].ravel()[0] > 0) == (g[1].ravel()[0] > 0) for r, g in zip(ref, got)])
        return 100.0 * np.mean(np.concatenate(d) <= 1.92), f"mean error {np.mean(np.concatenate(d)):.3f} px, face flag {100 * flag:.1f}%"
    if name == "pose":
        d = [np.hypot(*(r[0].reshape(39, 5)[:33, :2] - g[0].reshape(39, 5)[:33, :2]).T) for r, g in zip(ref, got)]
        mask = np.mean([np.mean((r[2] > 0) == (g[2] > 0)) for r, g in zip(ref, got)])
        dp = np.mean([abs(float(r[1].ravel()[0]) - float(g[1].ravel()[0])) for r, g in zip(ref, got)])
        return 100.0 * np.mean(np.concatenate(d) <= 2.56), f"mean error {np.mean(np.concatenate(d)):.3f} px, mask {100 * mask:.2f}%, presence |dp| {dp:.4f}"
    raise SystemExit(f"unknown model {name}")


files = sorted(glob.glob(f"{held}/*.npz"))
feeds = [dict(np.load(f)) for f in files]
paths = [fp32] + cands
sessions = [session(p) for p in paths]
outs = [[s.run(None, f) for f in feeds] for s in sessions]
# Latency: every model on the first sample, interleaved, after a warm-up run each.
ms = [[] for _ in sessions]
for s in sessions:
    s.run(None, feeds[0])
for _ in range(15):
    for k, s in enumerate(sessions):
        t = time.perf_counter()
        s.run(None, feeds[0])
        ms[k].append(1e3 * (time.perf_counter() - t))
base = float(np.median(ms[0]))
print(f"| model | variant | task score vs FP32 | note | worst-sample cosine | ms (1 thread) | vs FP32 |")
print("|---|---|---|---|---|---|---|")
for k, p in enumerate(paths):
    s, note = score(outs[0], outs[k])
    worst = min(cos(a, b) for r, g in zip(outs[0], outs[k]) for a, b in zip(r, g))
    med = float(np.median(ms[k]))
    print(f"| {name} | {p.split('/')[-1]} | {s:.2f}% | {note} | {worst:.5f} | {med:.2f} | {base / med:.2f}x |")
