"""INT8 on real-weight models with real inputs, scored on their tasks.

    /work/venvs/int8/bin/python bench/real_int8.py INFOPT_BIN [--models rec,det,magika,...]
        [--work DIR] [--calib 64] [--held-out 300] [--runs 30]
        [--silero DIR] [--ddddocr DIR] [--modelopt-python PY]

Models come from PyPI packages installed in the running interpreter:
`rapidocr-onnxruntime` (PP-OCRv4 rec and det, .onnx in the package),
`magika` (its model in the package), nudenet (320n.onnx, found in any venv
under /work/venvs), and from unpacked wheels: `--silero DIR` (silero-vad,
`pip download --no-deps silero-vad` unzipped) and `--ddddocr DIR` (ddddocr,
the same way). Inputs are made here:

- rec: text lines rendered with PIL (DejaVu fonts) in the model's layout
  (3x48x320, (x/255-0.5)/0.5, right-padded); scored by exact match of the
  greedy CTC decoding with the dictionary in the model's metadata;
- det: pages of rendered text (3x640x640, ImageNet normalization); scored by
  the IoU of the binarized probability map (> 0.3) with FP32's;
- nudenet (320n, YOLOv8n): drawn people (faces, shoulders) at 320x320;
  scored by the FP32 detections (score > 0.25 after
  per-class NMS at IoU 0.45, nudenet's thresholds) found again with the same
  class at IoU >= 0.5; the anchor-level count (anchors above 0.25 that keep
  their class above 0.25) is in the notes;
- silero (silero-vad 16k, opset 15, state in and out): streams of synthetic
  audio (voiced syllables, pauses, noise) in 512-sample chunks, each variant
  run through the stream with its own state; calibration samples are chunks
  with the FP32 state before them; scored by the chunks whose speech
  decision (p > 0.5) is FP32's;
- ddddocr (common.onnx, CTC over 8210 classes): rendered captcha-like
  strings, grayscale 64x192 in [0, 1]; scored by exact match of the
  collapsed argmax sequence with FP32's;
- ddddet (ddddocr's common_det.onnx, YOLOX at 416x416, raw 0..255 pixels):
  pages of scattered characters; scored like nudenet (obj x class > 0.1,
  class-agnostic NMS at 0.45, ddddocr's thresholds);
- magika: files of this machine (/usr/share, /usr/lib/python3*), features as
  magika extracts them (1024 bytes from the stripped start and end); scored
  by top-1 agreement with FP32.

For each model: FP32, infopt INT8 with the default command
(`optimize M --int8 --calib-data DIR --target onnxruntime`, calibration
samples only in DIR) and ONNX Runtime's `quantize_static` (QDQ, per-channel
weights, MinMax and Entropy; Entropy skipped on det, whose 640x640 pages
took ORT's calibrator to 20 GB) and, with --modelopt-python, ModelOpt's
`modelopt.onnx.quantization.quantize` (INT8, its default calibration, CPU
provider, the same calibration samples), scored on the held-out samples, and latency
interleaved in one process in ONNX Runtime CPU at 1 and 2 threads. Prints a
Markdown table.
"""
import argparse
import glob
import os
import random
import string
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

ort.set_default_logger_severity(3)  # ddddocr declares [1, seqlen] and returns [T, 1, C]

SITE = os.path.dirname(os.path.dirname(ort.__file__))
REC = os.path.join(SITE, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx")
DET = os.path.join(SITE, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx")
MAGIKA = os.path.join(SITE, "magika/models/standard_v3_3/model.onnx")
# nudenet's wheel carries its YOLOv8n detector; --nudenet points elsewhere.
NUDENET = next(iter(glob.glob(os.path.join(SITE, "nudenet/320n.onnx"))
                    + glob.glob("/work/venvs/*/lib/python3*/site-packages/nudenet/320n.onnx")), None)
FONTS = sorted(glob.glob("/usr/share/fonts/truetype/dejavu/*.ttf"))


# ---------------------------------------------------------------- inputs
def rec_dictionary(path):
    m = onnx.load(path, load_external_data=False)
    chars = next(p.value for p in m.metadata_props if p.key == "character").splitlines()
    return ["blank"] + chars + [" "]


def render_line(rng, text):
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(rng.choice(FONTS), rng.randint(22, 34))
    box = font.getbbox(text)
    w, h = box[2] - box[0] + 16, box[3] - box[1] + 12
    bg = rng.randint(200, 255)
    fg = rng.randint(0, 70)
    img = Image.new("RGB", (w, h), (bg, bg, bg))
    ImageDraw.Draw(img).text((8 - box[0], 6 - box[1]), text, font=font, fill=(fg, fg, fg))
    return img


def rec_tensor(img):
    """rapidocr's rec preprocessing for a 3x48x320 input."""
    from PIL import Image

    h, w = 48, 320
    ratio = img.width / img.height
    rw = min(w, int(np.ceil(h * ratio)))
    x = np.asarray(img.resize((rw, h), Image.BILINEAR), dtype=np.float32)
    x = (x / 255.0 - 0.5) / 0.5
    out = np.zeros((3, h, w), dtype=np.float32)
    out[:, :, :rw] = x.transpose(2, 0, 1)
    return out[None]


def rec_samples(n, seed, dictionary):
    rng = random.Random(seed)
    # Glyphs that look alike in DejaVu (0/O/o, 1/l/I, c/C, ...) are left out:
    # an FP32 misreading of those says nothing about quantization.
    alike = set("0Oo1lIiJjcCsSuUvVwWxXzZkKpP")
    alphabet = [c for c in string.ascii_letters + string.digits + ":-/%" if c in dictionary and c not in alike]
    words = []
    for _ in range(n):
        k = rng.randint(1, 3)
        parts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 7))) for _ in range(k)]
        words.append(" ".join(parts))
    return [({"x": rec_tensor(render_line(rng, t))}, t) for t in words]


def ctc_decode(probs, dictionary):
    ids = probs[0].argmax(-1)
    out, prev = [], 0
    for i in ids:
        if i != prev and i != 0:
            out.append(dictionary[i] if i < len(dictionary) else "")
        prev = i
    return "".join(out).strip()


def det_samples(n, seed):
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        bg = tuple(rng.randint(170, 255) for _ in range(3))
        img = Image.new("RGB", (640, 640), bg)
        d = ImageDraw.Draw(img)
        for _ in range(rng.randint(3, 9)):
            font = ImageFont.truetype(rng.choice(FONTS), rng.randint(16, 44))
            text = " ".join(
                "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(2, 8)))
                for _ in range(rng.randint(1, 4))
            )
            fg = tuple(rng.randint(0, 90) for _ in range(3))
            d.text((rng.randint(0, 400), rng.randint(0, 600)), text, font=font, fill=fg)
        x = np.asarray(img, dtype=np.float32) / 255.0
        mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
        std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
        x = ((x - mean) / std).transpose(2, 0, 1)[None].astype(np.float32)
        out.append(({"x": x}, None))
    return out


def face_scene(rng, size=320):
    """One to three drawn people (face with eyes, brows, nose, mouth, hair;
    neck and shoulders) on a plain background, blurred, with noise: nudenet
    finds faces in these with scores up to 0.8, where bench/fp16_real.py's
    skin-toned ellipses gave only detections at 0.25..0.5 that any error
    moves across the threshold."""
    from PIL import Image, ImageDraw, ImageFilter

    img = Image.new("RGB", (size, size), tuple(int(v) for v in rng.integers(40, 220, 3)))
    d = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(1, 4))):
        w = int(rng.integers(50, 130))
        h = int(w * rng.uniform(1.15, 1.4))
        x, y = int(rng.integers(0, size - w)), int(rng.integers(0, size - h))
        skin = tuple(int(min(255, v)) for v in np.array([224, 172, 138]) * rng.uniform(0.55, 1.1))
        hair = tuple(int(v) for v in rng.integers(10, 90, 3))
        d.rectangle([x + w * 0.35, y + h * 0.9, x + w * 0.65, y + h * 1.2], fill=skin)
        d.ellipse([x - w * 0.4, y + h * 1.1, x + w * 1.4, y + h * 2.2], fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
        d.ellipse([x - w * 0.05, y - h * 0.08, x + w * 1.05, y + h * 0.55], fill=hair)
        d.ellipse([x, y, x + w, y + h], fill=skin)
        for ex in (0.3, 0.7):
            cx, cy = x + w * ex, y + h * 0.42
            d.ellipse([cx - w * 0.11, cy - h * 0.045, cx + w * 0.11, cy + h * 0.045], fill=(250, 250, 250))
            d.ellipse([cx - w * 0.05, cy - h * 0.04, cx + w * 0.05, cy + h * 0.04], fill=(60, 40, 20))
            d.line([cx - w * 0.12, cy - h * 0.09, cx + w * 0.12, cy - h * 0.1], fill=hair, width=max(2, w // 25))
        d.line([x + w * 0.5, y + h * 0.45, x + w * 0.46, y + h * 0.62, x + w * 0.52, y + h * 0.63],
               fill=tuple(int(v * 0.8) for v in skin), width=2)
        d.chord([x + w * 0.33, y + h * 0.68, x + w * 0.67, y + h * 0.82], 0, 180, fill=(170, 60, 60))
    a = np.asarray(img.filter(ImageFilter.GaussianBlur(1.0)), dtype=np.float32) / 255.0
    a = a + rng.normal(0, 0.02, a.shape).astype(np.float32)
    return np.clip(a, 0, 1).transpose(2, 0, 1)[None].astype(np.float32)


def nudenet_samples(n, seed):
    """Drawn people at 320x320 (see face_scene), RGB in [0, 1]."""
    rng = np.random.default_rng(seed)
    return [({"images": face_scene(rng)}, None) for _ in range(n)]


def magika_features(path, beg=1024, end=1024, block=4096, pad=256):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        n = min(block, size)
        head = f.read(n)
        f.seek(size - n)
        tail = f.read(n)
    head = list(head.lstrip()[:beg])
    head += [pad] * (beg - len(head))
    tail = list(tail.rstrip()[-end:]) if end else []
    tail = [pad] * (end - len(tail)) + tail
    return np.array([head + tail], dtype=np.int32)


def magika_samples(n, seed):
    files = []
    for pattern in ["/usr/share/**/*", "/usr/lib/python3*/**/*"]:
        files += [p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p) and not os.path.islink(p)]
    files = sorted(f for f in files if os.path.getsize(f) >= 64)
    rng = random.Random(seed)
    # Spread over file kinds: sample by extension first.
    by_ext = {}
    for f in files:
        by_ext.setdefault(os.path.splitext(f)[1], []).append(f)
    picked = []
    exts = sorted(by_ext)
    while len(picked) < n and exts:
        for e in list(exts):
            if not by_ext[e]:
                exts.remove(e)
                continue
            picked.append(by_ext[e].pop(rng.randrange(len(by_ext[e]))))
            if len(picked) == n:
                break
    rng.shuffle(picked)
    return [({"bytes": magika_features(p)}, p) for p in picked]


def syllable(rng, n, sr=16000):
    """A voiced syllable: harmonics of a gliding pitch under a smooth envelope."""
    t = np.arange(n) / sr
    f0 = rng.uniform(90, 240) * (1 + rng.uniform(-0.15, 0.15) * t / max(t[-1], 1e-3))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    x = sum((0.7 / k) * np.sin(k * phase + rng.uniform(0, 6.28)) for k in range(1, 14))
    return x * np.sin(np.pi * np.arange(n) / n) ** 2


def audio_stream(rng, chunks, sr=16000):
    """Pauses, voiced syllables and noise bursts, `chunks` x 512 samples."""
    out = np.zeros(chunks * 512, dtype=np.float64)
    i = 0
    while i < len(out):
        kind = rng.choice(["pause", "speech", "speech", "noise"])
        n = int(rng.integers(1500, 9000))
        seg = np.zeros(min(n, len(out) - i))
        if kind == "speech":
            j = 0
            while j < len(seg):
                m = int(rng.integers(1200, 4000))
                piece = syllable(rng, min(m, len(seg) - j))
                seg[j:j + len(piece)] = piece * rng.uniform(0.1, 0.5) / (np.abs(piece).max() + 1e-9)
                j += m + int(rng.integers(0, 800))
        elif kind == "noise":
            seg = rng.normal(0, rng.uniform(0.01, 0.08), len(seg))
        out[i:i + len(seg)] = seg + rng.normal(0, 0.002, len(seg))
        i += len(seg)
    return out.astype(np.float32).reshape(chunks, 1, 512)


def pitch_clip(rng, n=43844, sr=22050):
    """A clip of synthesized notes for basic-pitch: harmonic tones at MIDI
    pitches 40..84, overlapping, with attack/decay envelopes, at the
    amplitudes of real recordings (peaks 0.3..0.9), plus a little noise."""
    t = np.arange(n) / sr
    x = np.zeros(n)
    for _ in range(int(rng.integers(3, 9))):
        midi = rng.integers(40, 85)
        f0 = 440.0 * 2 ** ((midi - 69) / 12)
        start = int(rng.integers(0, n - 2000))
        length = int(rng.integers(2000, n - start + 1))
        env = np.zeros(n)
        seg = np.arange(length) / sr
        env[start:start + length] = np.minimum(seg / 0.01, 1.0) * np.exp(-seg * rng.uniform(1, 4))
        x += env * sum((0.6 / k) * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 6.28)) for k in range(1, 6))
    x = x / (np.abs(x).max() + 1e-9) * rng.uniform(0.3, 0.9) + rng.normal(0, 0.003, n)
    return x.astype(np.float32).reshape(1, n, 1)


def pitch_samples(n, seed):
    rng = np.random.default_rng(seed)
    return [({"serving_default_input_2:0": pitch_clip(rng)}, None) for _ in range(n)]


def silero_stream_probs(sess, stream):
    """Speech probability per chunk, the state carried from chunk to chunk,
    each chunk behind the last 64 samples of the one before (as silero-vad's
    own wrapper feeds it: 576 samples); also the input and state of each."""
    state = np.zeros((2, 1, 128), np.float32)
    sr = np.array(16000, np.int64)
    context = np.zeros((1, 64), np.float32)
    probs, feeds = [], []
    for x in stream:
        x = np.concatenate([context, x], 1)
        feeds.append({"input": x, "state": state, "sr": sr})
        p, state = sess.run(None, feeds[-1])
        context = x[:, -64:]
        probs.append(float(p[0, 0]))
    return np.array(probs), feeds


def silero_samples(n, seed, model):
    """n streams of 40 chunks; calibration feeds are built in main()."""
    rng = np.random.default_rng(seed)
    return [(audio_stream(rng, 40), None) for _ in range(n)]


def dddd_string(rng):
    chars = string.ascii_letters + string.digits
    return "".join(rng.choice(chars) for _ in range(rng.randint(4, 6)))


def ddddocr_samples(n, seed):
    """Captcha-like strings: tilted, spaced glyphs on a noisy background,
    grayscale 64x192 in [0, 1] (ddddocr's layout: height 64, x / 255)."""
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = dddd_string(rng)
        img = Image.new("L", (192, 64), rng.randint(190, 255))
        d = ImageDraw.Draw(img)
        for _ in range(rng.randint(0, 4)):
            d.line([(rng.randint(0, 192), rng.randint(0, 64)), (rng.randint(0, 192), rng.randint(0, 64))],
                   fill=rng.randint(80, 180), width=1)
        x = rng.randint(4, 20)
        for c in text:
            font = ImageFont.truetype(rng.choice(FONTS), rng.randint(28, 40))
            glyph = Image.new("L", (48, 60), 0)
            ImageDraw.Draw(glyph).text((6, 4), c, font=font, fill=255)
            glyph = glyph.rotate(rng.uniform(-20, 20), expand=False)
            img.paste(rng.randint(0, 80), (x, rng.randint(-4, 8)), glyph)
            x += rng.randint(22, 32)
        a = np.asarray(img, dtype=np.float32) / 255.0
        out.append(({"input1": a[None, None]}, text))
    return out


def ddddet_samples(n, seed):
    """Pages of scattered characters at 416x416, raw 0..255 pixels (ddddocr's
    detector takes them unnormalized)."""
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        img = Image.new("RGB", (416, 416), tuple(rng.randint(150, 255) for _ in range(3)))
        d = ImageDraw.Draw(img)
        for _ in range(rng.randint(3, 8)):
            font = ImageFont.truetype(rng.choice(FONTS), rng.randint(30, 64))
            d.text((rng.randint(0, 360), rng.randint(0, 350)), rng.choice(string.ascii_letters + string.digits),
                   font=font, fill=tuple(rng.randint(0, 100) for _ in range(3)))
        x = np.asarray(img, dtype=np.float32).transpose(2, 0, 1)[None].copy()
        out.append(({"images": x}, None))
    return out


# ---------------------------------------------------------------- scoring
def score(kind, outputs_fp32, outputs, truth, dictionary):
    if kind == "rec":
        # Spaces are compared out: their width is a rendering choice.
        hits = sum(ctc_decode(o, dictionary).replace(" ", "") == t.replace(" ", "") for o, t in zip(outputs, truth))
        return hits / len(truth), "exact match"
    if kind == "magika":
        a = [o.argmax(-1)[0] for o in outputs]
        b = [o.argmax(-1)[0] for o in outputs_fp32]
        return float(np.mean([x == y for x, y in zip(a, b)])), "top-1 agreement with FP32"
    if kind in ("nudenet", "ddddet"):
        decode = yolov8_detections if kind == "nudenet" else yolox_detections
        kept, total = 0, 0
        for o, r in zip(outputs, outputs_fp32):
            ref = decode(r)
            total += len(ref)
            kept += matched(ref, decode(o))
        return (kept / total if total else 1.0), f"of {total} FP32 detections kept (same class, IoU >= 0.5)"
    if kind == "ddddocr":
        hits = sum(ctc_ids(o) == ctc_ids(r) for o, r in zip(outputs, outputs_fp32))
        return hits / len(outputs), "exact match with FP32's reading"
    if kind == "silero":
        # outputs: per stream, the speech probability of every chunk.
        a, b = np.concatenate(outputs), np.concatenate(outputs_fp32)
        return float(np.mean((a > 0.5) == (b > 0.5))), f"of {len(b)} chunks with FP32's speech decision (mean |dp| {np.abs(a - b).mean():.4f})"
    if kind == "pitch":
        # Frame-level F1 of the first 88-pitch map (> 0.5) against FP32's.
        tp = fp = fn = 0
        for o, r in zip(outputs, outputs_fp32):
            p, q = o > 0.5, r > 0.5
            tp += int(np.logical_and(p, q).sum())
            fp += int(np.logical_and(p, ~q).sum())
            fn += int(np.logical_and(~p, q).sum())
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0
        return f1, f"frame F1 of the note map (> 0.5) against FP32's ({tp + fn} active cells; non-finite outputs {sum(int((~np.isfinite(o)).sum()) for o in outputs)})"
    ious = []
    for o, r in zip(outputs, outputs_fp32):
        p, q = o > 0.3, r > 0.3
        union = np.logical_or(p, q).sum()
        ious.append(np.logical_and(p, q).sum() / union if union else 1.0)
    return float(np.mean(ious)), "mean IoU of the text map with FP32's"


def box_iou(a, bs):
    if len(bs) == 0:
        return np.zeros(0)
    x1, y1 = np.maximum(a[0], bs[:, 0]), np.maximum(a[1], bs[:, 1])
    x2, y2 = np.minimum(a[2], bs[:, 2]), np.minimum(a[3], bs[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    return inter / (area(a) + area(bs) - inter + 1e-9)


def nms(boxes, scores, classes, iou, per_class=True):
    order, keep = np.argsort(-scores), []
    while len(order):
        i = order[0]
        keep.append((boxes[i], int(classes[i]), float(scores[i])))
        rest = order[1:]
        drop = box_iou(boxes[i], boxes[rest]) > iou
        if per_class:
            drop &= classes[rest] == classes[i]
        order = rest[~drop]
    return keep


def xyxy(cx, cy, w, h):
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)


def yolov8_detections(o, conf=0.25, iou=0.45):
    """[1, 4 + C, N] -> (box, class, score) after per-class NMS (nudenet's thresholds)."""
    o = o[0]
    scores = o[4:]
    cls, sc = scores.argmax(0), scores.max(0)
    k = np.where(sc > conf)[0]
    return nms(xyxy(*o[:4, k]), sc[k], cls[k], iou)


def yolox_detections(o, conf=0.1, iou=0.45, size=416):
    """ddddocr's common_det [1, N, 5 + C]: grid decoding, obj x class, class-agnostic NMS."""
    grids, strides = [], []
    for s in (8, 16, 32):
        n = size // s
        xv, yv = np.meshgrid(np.arange(n), np.arange(n))
        grids.append(np.stack([xv, yv], 2).reshape(-1, 2))
        strides.append(np.full((n * n, 1), s))
    g, st = np.concatenate(grids), np.concatenate(strides)
    p = o[0].astype(np.float64)
    xy = (p[:, :2] + g) * st
    wh = np.exp(np.clip(p[:, 2:4], -20, 20)) * st
    scores = p[:, 4:5] * p[:, 5:]
    cls, sc = scores.argmax(1), scores.max(1)
    k = np.where(sc > conf)[0]
    return nms(xyxy(xy[k, 0], xy[k, 1], wh[k, 0], wh[k, 1]), sc[k], cls[k], iou, per_class=False)


def matched(ref, got, iou=0.5):
    """FP32 detections found again: same class, IoU >= 0.5, each used once."""
    used, hits = set(), 0
    for box, c, _ in ref:
        cand = [j for j, g in enumerate(got) if j not in used and g[1] == c]
        if not cand:
            continue
        ious = box_iou(box, np.stack([got[j][0] for j in cand]))
        j = int(ious.argmax())
        if ious[j] >= iou:
            used.add(cand[j])
            hits += 1
    return hits


def anchors_kept(outputs_fp32, outputs):
    """YOLOv8 anchors FP32 scores above 0.25 that keep their class above 0.25."""
    kept, total = 0, 0
    for o, r in zip(outputs, outputs_fp32):
        so, sr = o[0, 4:], r[0, 4:]
        live = sr.max(0) > 0.25
        total += int(live.sum())
        kept += int((live & (so.max(0) > 0.25) & (so.argmax(0) == sr.argmax(0))).sum())
    return kept, total


def ctc_ids(o):
    """The collapsed argmax sequence of a [T, 1, C] CTC output (blank 0)."""
    ids = o.reshape(o.shape[0], -1).argmax(-1)
    out, prev = [], 0
    for i in ids:
        if i != prev and i != 0:
            out.append(int(i))
        prev = i
    return out


def session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def variant_sessions(fp32, variants, threads=1):
    """The score scripts' models, FP32 first then each `NAME=PATH` of the command line,
    and a session of each at `threads`."""
    models = {"fp32": fp32, **dict(v.split("=", 1) for v in variants)}
    return models, {k: session(p, threads) for k, p in models.items()}


def held_npz(folder):
    """Every `.npz` sample of `folder`, in name order, as dicts of arrays."""
    return [dict(np.load(f)) for f in sorted(glob.glob(f"{folder}/*.npz"))]


def run_all(path, samples, kind):
    s = session(path, 2)
    if kind == "silero":
        return [silero_stream_probs(s, stream)[0] for stream, _ in samples]
    return [s.run(None, feeds)[0] for feeds, _ in samples]


def latency(paths, feeds, threads, runs):
    """Median ms per model, runs interleaved across the models; `feeds` is
    one input dict, or a list of them taken in turn (one per round)."""
    rounds = feeds if isinstance(feeds, list) else [feeds]
    sessions = {k: session(p, threads) for k, p in paths.items()}
    for s in sessions.values():
        for _ in range(3):
            s.run(None, rounds[0])
    times = {k: [] for k in sessions}
    for r in range(runs):
        for k, s in sessions.items():
            t = time.perf_counter()
            s.run(None, rounds[r % len(rounds)])
            times[k].append(time.perf_counter() - t)
    return {k: float(np.median(v)) * 1e3 for k, v in times.items()}


# ---------------------------------------------------------------- quantizers
def infopt_int8(binary, model, calib_dir, out, log, target="onnxruntime"):
    cmd = [binary, "optimize", model, "--int8", "--calib-data", calib_dir,
           "-o", out, "--report", out + ".json"]
    if target != "portable":
        cmd += ["--target", target]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p.returncode, secs


def ort_int8(model, samples, out, method):
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            x = next(self.it, None)
            return None if x is None else x[0]

    t = time.perf_counter()
    quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=method)
    return time.perf_counter() - t


def modelopt_int8(python, model, samples, out):
    """ModelOpt's ONNX INT8 quantization (its default calibration, on the CPU
    provider) in another interpreter, with the same calibration samples."""
    # ModelOpt 0.47 writes its shape inference into the model file it is
    # given (magika's package file gained 94 value_info entries): give it a copy.
    import shutil

    copy = out + ".input.onnx"
    shutil.copyfile(model, copy)
    model = copy
    data = out + ".calib.npz"
    np.savez(data, **{k: np.concatenate([f[k] for f, _ in samples]) for k in samples[0][0]})
    code = ("import sys, numpy as np\nfrom modelopt.onnx.quantization import quantize\n"
            "d = dict(np.load(sys.argv[2]))\n"
            "quantize(sys.argv[1], quantize_mode='int8', calibration_data=d, calibration_eps=['cpu'],"
            " output_path=sys.argv[3], log_level='WARNING')\n")
    t = time.perf_counter()
    p = subprocess.run([python, "-c", code, model, data, out], capture_output=True, text=True)
    os.remove(data)
    os.remove(copy)
    if p.returncode != 0 or not os.path.exists(out):
        raise RuntimeError((p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    return time.perf_counter() - t


def model_paths(a):
    paths = {"rec": REC, "det": DET, "magika": MAGIKA, "nudenet": a.nudenet or NUDENET}
    if a.model_dir:  # another machine: the same files, copied into one folder
        names = {"rec": REC, "det": DET, "magika": MAGIKA, "nudenet": "320n.onnx"}
        paths = {k: os.path.join(a.model_dir, os.path.basename(v)) for k, v in names.items()}
    if a.basic_pitch:
        paths["pitch"] = os.path.join(a.basic_pitch, "basic_pitch/saved_models/icassp_2022/nmp.onnx")
    if a.silero:
        paths["silero"] = os.path.join(a.silero, "silero_vad/data/silero_vad_16k_op15.onnx")
    if a.ddddocr:
        paths["ddddocr"] = os.path.join(a.ddddocr, "ddddocr/common.onnx")
        paths["ddddet"] = os.path.join(a.ddddocr, "ddddocr/common_det.onnx")
    return paths


def make_samples(kind, a, model, dictionary):
    """(calibration feeds, held-out samples): every calibration sample is a
    dict of inputs; a held-out sample is (feeds, truth), or for silero
    (a stream of chunks, None)."""
    if kind == "silero":
        streams = silero_samples(4 + max(1, a.held_out // 40), 5, model)
        fp = session(model, 2)
        calib = []
        for stream, _ in streams[:4]:
            _, feeds = silero_stream_probs(fp, stream)
            for c in np.linspace(0, len(stream) - 1, a.calib // 4).astype(int):
                calib.append((feeds[c], None))
        return calib, streams[4:]
    # det pages are 640x640: fewer of them, so that ORT's calibrators
    # (20 GB resident on 32 pages with entropy) stay within memory.
    held = a.held_out if kind not in ("det", "ddddet") else min(a.held_out, 40 if kind == "ddddet" else 20)
    ncalib = a.calib if kind != "det" else min(a.calib, 16)
    total = ncalib + held
    make = {
        "rec": lambda: rec_samples(total, 1, dictionary),
        "det": lambda: det_samples(total, 2),
        "nudenet": lambda: nudenet_samples(total, 4),
        "magika": lambda: magika_samples(total, 3),
        "ddddocr": lambda: ddddocr_samples(total, 6),
        "ddddet": lambda: ddddet_samples(total, 7),
        "pitch": lambda: pitch_samples(total, 8),
    }[kind]
    cache = os.path.join(a.samples_cache, kind + ".npz") if a.samples_cache else None
    if cache and os.path.exists(cache):
        samples = load_samples(cache)
    else:
        samples = make()
        if cache:
            save_samples(cache, samples)
    return samples[:ncalib], samples[ncalib:]


def save_samples(path, samples):
    """Samples made here for another machine (other fonts, other files):
    inputs stacked per name, truths as one string array."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    arrays = {f"in_{k}": np.stack([f[k] for f, _ in samples]) for k in samples[0][0]}
    arrays["truth"] = np.array(["" if t is None else str(t) for _, t in samples])
    np.savez_compressed(path, **arrays)


def load_samples(path):
    d = np.load(path)
    # Each d[key] decompresses the whole array again: read each once.
    arrays = {k[3:]: d[k] for k in d.files if k.startswith("in_")}
    truth = list(d["truth"])
    return [({n: a[i] for n, a in arrays.items()}, str(truth[i])) for i in range(len(truth))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("--models", default="rec,magika,det")
    ap.add_argument("--work", default="/tmp/real_int8")
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--held-out", type=int, default=300)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--no-ort-quant", action="store_true")
    ap.add_argument("--ort-minmax-only", action="store_true", help="skip ORT's Entropy calibration")
    ap.add_argument("--nudenet", help="nudenet's 320n.onnx (default: found in the venvs)")
    ap.add_argument("--silero", help="silero-vad's wheel, unzipped")
    ap.add_argument("--basic-pitch", help="basic-pitch's wheel, unzipped (kind pitch)")
    ap.add_argument("--target", default="onnxruntime",
                    help="infopt's --target (portable: the default command, no --target)")
    ap.add_argument("--ddddocr", help="ddddocr's wheel, unzipped")
    ap.add_argument("--model-dir", help="the models' files in one folder (default: the installed packages)")
    ap.add_argument("--variant", action="append", default=[],
                    help="KIND=LABEL=PATH: a model quantized elsewhere, scored and timed beside the others")
    ap.add_argument("--samples-cache", help="save the samples made to DIR/KIND.npz, or load them from there")
    ap.add_argument("--modelopt-python", help="an interpreter with nvidia-modelopt[onnx] (adds a ModelOpt column)")
    a = ap.parse_args()
    from onnxruntime.quantization import CalibrationMethod

    os.makedirs(a.work, exist_ok=True)
    paths = model_paths(a)
    rows = []
    for kind in a.models.split(","):
        model = paths[kind]
        dictionary = rec_dictionary(model) if kind == "rec" else None
        calib, test = make_samples(kind, a, model, dictionary)
        d = os.path.join(a.work, kind)
        cdir = os.path.join(d, "calib")
        os.makedirs(cdir, exist_ok=True)
        for f in glob.glob(os.path.join(cdir, "*.npz")):
            os.remove(f)
        for i, (feeds, _) in enumerate(calib):
            np.savez(os.path.join(cdir, f"{i:04d}.npz"), **feeds)
        variants = {"fp32": model}
        notes = {}
        out = os.path.join(d, "infopt_int8.onnx")
        rc, secs = infopt_int8(a.infopt, model, cdir, out, out + ".log", a.target)
        notes["infopt"] = f"exit {rc}, {secs:.1f} s"
        if rc == 0:
            variants["infopt int8"] = out
        if not a.no_ort_quant:
            methods = [("ort minmax", CalibrationMethod.MinMax), ("ort entropy", CalibrationMethod.Entropy)]
            if a.ort_minmax_only:
                methods = methods[:1]
            if kind == "det":
                methods = methods[:1]
                notes["ort minmax"] = "entropy skipped on det (memory)"
            for label, m in methods:
                o = os.path.join(d, label.replace(" ", "_") + ".onnx")
                try:
                    secs = ort_int8(model, calib, o, m)
                    variants[label] = o
                    notes[label] = (notes.get(label, "") + f" {secs:.1f} s").strip()
                except Exception as e:  # a peer failing is a result too
                    notes[label] = f"failed: {str(e).splitlines()[0][:120]}"
        for v in a.variant:  # made elsewhere (ModelOpt where it is installed), timed here
            k, label, path = v.split("=", 2)
            if k == kind:
                variants[label] = path
        if a.modelopt_python:
            o = os.path.join(d, "modelopt_int8.onnx")
            try:
                secs = modelopt_int8(a.modelopt_python, model, calib, o)
                variants["modelopt int8"] = o
                notes["modelopt int8"] = f"{secs:.1f} s"
            except Exception as e:
                notes["modelopt int8"] = f"failed: {str(e)[:120]}"
        # A variant ONNX Runtime cannot load (ORT's own quantize_static on
        # basic-pitch) is a result too: noted and left out of the table.
        for label in list(variants):
            try:
                session(variants[label], 1)
            except Exception as e:
                notes[label] = (notes.get(label, "") + f"; does not load: {str(e).splitlines()[0][:120]}").strip("; ")
                del variants[label]
                rows.append((kind, label, "-", "-", "-", "-", notes[label]))
        truth = [t for _, t in test]
        ref = run_all(model, test, kind)
        feeds = calib[0][0] if kind == "silero" else test[0][0]
        lat1 = latency(variants, feeds, 1, a.runs)
        lat2 = latency(variants, feeds, 2, a.runs)
        for label, path in variants.items():
            outs = ref if label == "fp32" else run_all(path, test, kind)
            s, what = score(kind, ref, outs, truth, dictionary)
            cos = np.mean([
                float(np.dot(o.ravel(), r.ravel()) / (np.linalg.norm(o) * np.linalg.norm(r) + 1e-30))
                for o, r in zip(outs, ref)
            ])
            note = notes.get(label.split()[0] if label.startswith("infopt") else label, "")
            if kind == "nudenet":
                k, t = anchors_kept(ref, outs)
                note = (note + f"; anchors: {k}/{t}").strip("; ")
            rows.append((kind, label, f"{s * 100:.2f}% {what}", f"{cos:.4f}",
                         f"{lat1[label]:.2f} ({lat1['fp32'] / lat1[label]:.2f}x)",
                         f"{lat2[label]:.2f} ({lat2['fp32'] / lat2[label]:.2f}x)", note))
        print(f"{kind}: {len(calib)} calibration, {len(test)} held out; {notes}", file=sys.stderr)
        with open(os.path.join(a.work, "partial.md"), "w") as f:  # rows so far
            f.write("\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n")
    print("| model | variant | task score (held out) | mean cosine vs FP32 | ms 1 thread | ms 2 threads | notes |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
