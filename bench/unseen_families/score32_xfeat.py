# Task scores and one-thread latency of session 32's XFeat runs (gen32_xfeat.py makes the data):
#   python score32_xfeat.py DATA_DIR FP32.onnx CAND.onnx [CAND.onnx ...]
# Keypoints as the repository's xfeat_onnx.py finds them (softmax over the 65 logits, the 64 cells
# unfolded to full resolution, 5x5 non-maximum suppression above 0.05, ranked by score times
# reliability, the best 512), descriptors L2-normalized and read at each keypoint's cell (the
# repository interpolates them bicubically; the cell is a coarser read of the same map), and
# matches between views 2k and 2k+1 (the same photo) as mutual nearest neighbours by cosine.
# Against FP32: keypoints found at the same pixel (F1), descriptor cosine at FP32's keypoints, and
# the share of FP32's matches (pairs of keypoint positions) the candidate also makes.
import glob, os, sys

import numpy as np
import onnxruntime as ort

ort.set_default_logger_severity(3)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from photos32 import loaded, print_latency, session  # noqa: E402

data, fp32 = sys.argv[1:3]
cands = sys.argv[3:]
TOP_K = 512


def features(outs):
    m1, k1, h1 = outs
    m1 = m1 / np.linalg.norm(m1, axis=1, keepdims=True)
    e = np.exp(k1 - k1.max(axis=1, keepdims=True))
    s = (e / e.sum(axis=1, keepdims=True))[:, :64]
    _, _, H, W = s.shape
    heat = s.transpose(0, 2, 3, 1).reshape(1, H, W, 8, 8).transpose(0, 1, 3, 2, 4).reshape(H * 8, W * 8)
    pad = np.pad(heat, 2, constant_values=-1)
    local = np.max([pad[dy:dy + H * 8, dx:dx + W * 8] for dy in range(5) for dx in range(5)], axis=0)
    ys, xs = np.nonzero((heat == local) & (heat > 0.05))
    score = heat[ys, xs] * h1[0, 0, ys // 8, xs // 8]
    order = np.argsort(-score, kind="stable")[:TOP_K]
    ys, xs = ys[order], xs[order]
    desc = m1[0][:, ys // 8, xs // 8].T
    return np.stack([xs, ys], 1), desc


def mutual(d1, d2):
    if len(d1) == 0 or len(d2) == 0:
        return set()
    sim = d1 @ d2.T
    a, b = sim.argmax(1), sim.argmax(0)
    return {(i, int(a[i])) for i in range(len(d1)) if b[a[i]] == i}


feeds = [dict(np.load(f)) for f in sorted(glob.glob(os.path.join(data, "held", "*.npz")))]
ref = session(fp32, threads=2)
ref_feat = [features(ref.run(None, f)) for f in feeds]


def matches(feat):
    out = []
    for k in range(0, len(feat) - 1, 2):
        (p1, d1), (p2, d2) = feat[k], feat[k + 1]
        out.append({(tuple(p1[i]), tuple(p2[j])) for i, j in mutual(d1, d2)})
    return out


ref_matches = matches(ref_feat)
print("held-out views %d (%d pairs); FP32: %.0f keypoints a view, %.0f matches a pair" % (
    len(feeds), len(ref_matches), np.mean([len(p) for p, _ in ref_feat]), np.mean([len(m) for m in ref_matches])))
for c, s in loaded(cands):
    feat = [features([np.nan_to_num(x) for x in s.run(None, f)]) for f in feeds]
    same = found = total = 0; cos = []
    for (pr, dr), (pc, dc) in zip(ref_feat, feat):
        a = {tuple(p) for p in pr}; b = {tuple(p) for p in pc}
        same += len(a & b); found += len(b); total += len(a)
        # descriptors of the candidate's map read at FP32's keypoints
    for f, (pr, dr) in zip(feeds, ref_feat):
        m1 = s.run(None, f)[0]
        m1 = m1 / np.linalg.norm(m1, axis=1, keepdims=True)
        dc = m1[0][:, pr[:, 1] // 8, pr[:, 0] // 8].T
        cos.append(np.mean(np.sum(dr * dc, axis=1)))
    kept = [len(r & m) / max(len(r), 1) for r, m in zip(ref_matches, matches(feat))]
    f1 = 2 * same / max(found + total, 1)
    print("%s: keypoint F1 against FP32 %.4f, descriptor cosine at FP32's keypoints %.5f, FP32's matches kept %.4f (lowest pair %.4f)"
          % (os.path.basename(c), f1, np.mean(cos), np.mean(kept), np.min(kept)))

print_latency([fp32] + cands, feeds[0], runs=5)
