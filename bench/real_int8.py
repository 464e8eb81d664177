"""INT8 on real-weight models with real inputs, scored on their tasks.

    /work/venvs/int8/bin/python bench/real_int8.py INFOPT_BIN [--models rec,det,magika]
        [--work DIR] [--calib 64] [--held-out 300] [--runs 30]

Models come from PyPI packages installed in the running interpreter:
`rapidocr-onnxruntime` (PP-OCRv4 rec and det, .onnx in the package) and
`magika` (its model in the package). Inputs are made here:

- rec: text lines rendered with PIL (DejaVu fonts) in the model's layout
  (3x48x320, (x/255-0.5)/0.5, right-padded); scored by exact match of the
  greedy CTC decoding with the dictionary in the model's metadata;
- det: pages of rendered text (3x640x640, ImageNet normalization); scored by
  the IoU of the binarized probability map (> 0.3) with FP32's;
- nudenet (320n, YOLOv8n): synthetic scenes at 320x320 (as in
  bench/fp16_real.py); scored by the FP32 detections (anchors scoring above
  0.25) that keep their class above 0.25;
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
    return [(rec_tensor(render_line(rng, t)), t) for t in words]


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
        out.append((x, None))
    return out


def nudenet_samples(n, seed):
    """Synthetic scenes (gradients, skin-toned ellipses, noise) at 320x320,
    as bench/fp16_real.py makes them."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fp16_real import scene

    rng = np.random.default_rng(seed)
    return [(scene(rng, 320), None) for _ in range(n)]


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
    return [(magika_features(p), p) for p in picked]


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
    if kind == "nudenet":
        # YOLOv8 [1, 4 + classes, anchors]: the anchors FP32 scores above
        # 0.25 that keep their class and a score above 0.25.
        kept, total = 0, 0
        for o, r in zip(outputs, outputs_fp32):
            so, sr = o[0, 4:], r[0, 4:]
            live = sr.max(0) > 0.25
            total += int(live.sum())
            kept += int((live & (so.max(0) > 0.25) & (so.argmax(0) == sr.argmax(0))).sum())
        return (kept / total if total else 1.0), f"of {total} FP32 detections (anchors > 0.25) kept with their class"
    ious = []
    for o, r in zip(outputs, outputs_fp32):
        p, q = o > 0.3, r > 0.3
        union = np.logical_or(p, q).sum()
        ious.append(np.logical_and(p, q).sum() / union if union else 1.0)
    return float(np.mean(ious)), "mean IoU of the text map with FP32's"


def session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run_all(path, name, samples):
    s = session(path, 2)
    return [s.run(None, {name: x})[0] for x, _ in samples]


def latency(paths, name, x, threads, runs):
    sessions = {k: session(p, threads) for k, p in paths.items()}
    for s in sessions.values():
        for _ in range(3):
            s.run(None, {name: x})
    times = {k: [] for k in sessions}
    for _ in range(runs):
        for k, s in sessions.items():
            t = time.perf_counter()
            s.run(None, {name: x})
            times[k].append(time.perf_counter() - t)
    return {k: float(np.median(v)) * 1e3 for k, v in times.items()}


# ---------------------------------------------------------------- quantizers
def infopt_int8(binary, model, calib_dir, out, log):
    cmd = [binary, "optimize", model, "--int8", "--calib-data", calib_dir,
           "--target", "onnxruntime", "-o", out, "--report", out + ".json"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p.returncode, secs


def ort_int8(model, name, samples, out, method):
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            x = next(self.it, None)
            return None if x is None else {name: x[0]}

    t = time.perf_counter()
    quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=method)
    return time.perf_counter() - t


def modelopt_int8(python, model, name, samples, out):
    """ModelOpt's ONNX INT8 quantization (its default calibration, on the CPU
    provider) in another interpreter, with the same calibration samples."""
    data = out + ".calib.npz"
    np.savez(data, **{name: np.concatenate([x for x, _ in samples])})
    code = ("import sys, numpy as np\nfrom modelopt.onnx.quantization import quantize\n"
            "d = dict(np.load(sys.argv[2]))\n"
            "quantize(sys.argv[1], quantize_mode='int8', calibration_data=d, calibration_eps=['cpu'],"
            " output_path=sys.argv[3], log_level='WARNING')\n")
    t = time.perf_counter()
    p = subprocess.run([python, "-c", code, model, data, out], capture_output=True, text=True)
    os.remove(data)
    if p.returncode != 0 or not os.path.exists(out):
        raise RuntimeError((p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("--models", default="rec,magika,det")
    ap.add_argument("--work", default="/tmp/real_int8")
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--held-out", type=int, default=300)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--no-ort-quant", action="store_true")
    ap.add_argument("--modelopt-python", help="an interpreter with nvidia-modelopt[onnx] (adds a ModelOpt column)")
    a = ap.parse_args()
    from onnxruntime.quantization import CalibrationMethod

    os.makedirs(a.work, exist_ok=True)
    rows = []
    for kind in a.models.split(","):
        model = {"rec": REC, "det": DET, "magika": MAGIKA, "nudenet": NUDENET}[kind]
        name = {"rec": "x", "det": "x", "magika": "bytes", "nudenet": "images"}[kind]
        dictionary = rec_dictionary(REC) if kind == "rec" else None
        # det pages are 640x640: fewer of them, so that ORT's calibrators
        # (20 GB resident on 32 pages with entropy) stay within memory.
        held = a.held_out if kind != "det" else min(a.held_out, 20)
        ncalib = a.calib if kind != "det" else min(a.calib, 16)
        total = ncalib + held
        if kind == "rec":
            samples = rec_samples(total, 1, dictionary)
        elif kind == "det":
            samples = det_samples(total, 2)
        elif kind == "nudenet":
            samples = nudenet_samples(total, 4)
        else:
            samples = magika_samples(total, 3)
        calib, test = samples[:ncalib], samples[ncalib:]
        d = os.path.join(a.work, kind)
        cdir = os.path.join(d, "calib")
        os.makedirs(cdir, exist_ok=True)
        for f in glob.glob(os.path.join(cdir, "*.npz")):
            os.remove(f)
        for i, (x, _) in enumerate(calib):
            np.savez(os.path.join(cdir, f"{i:04d}.npz"), **{name: x})
        variants = {"fp32": model}
        notes = {}
        out = os.path.join(d, "infopt_int8.onnx")
        rc, secs = infopt_int8(a.infopt, model, cdir, out, out + ".log")
        notes["infopt"] = f"exit {rc}, {secs:.1f} s"
        if rc == 0:
            variants["infopt int8"] = out
        if not a.no_ort_quant:
            methods = [("ort minmax", CalibrationMethod.MinMax), ("ort entropy", CalibrationMethod.Entropy)]
            if kind == "det":
                methods = methods[:1]
                notes["ort minmax"] = "entropy skipped on det (memory)"
            for label, m in methods:
                o = os.path.join(d, label.replace(" ", "_") + ".onnx")
                try:
                    secs = ort_int8(model, name, calib, o, m)
                    variants[label] = o
                    notes[label] = (notes.get(label, "") + f" {secs:.1f} s").strip()
                except Exception as e:  # a peer failing is a result too
                    notes[label] = f"failed: {str(e).splitlines()[0][:120]}"
        if a.modelopt_python:
            o = os.path.join(d, "modelopt_int8.onnx")
            try:
                secs = modelopt_int8(a.modelopt_python, model, name, calib, o)
                variants["modelopt int8"] = o
                notes["modelopt int8"] = f"{secs:.1f} s"
            except Exception as e:
                notes["modelopt int8"] = f"failed: {str(e)[:120]}"
        truth = [t for _, t in test]
        ref = run_all(model, name, test)
        lat1 = latency(variants, name, test[0][0], 1, a.runs)
        lat2 = latency(variants, name, test[0][0], 2, a.runs)
        for label, path in variants.items():
            outs = ref if label == "fp32" else run_all(path, name, test)
            s, what = score(kind, ref, outs, truth, dictionary)
            cos = np.mean([
                float(np.dot(o.ravel(), r.ravel()) / (np.linalg.norm(o) * np.linalg.norm(r) + 1e-30))
                for o, r in zip(outs, ref)
            ])
            rows.append((kind, label, f"{s * 100:.2f}% {what}", f"{cos:.4f}",
                         f"{lat1[label]:.2f} ({lat1['fp32'] / lat1[label]:.2f}x)",
                         f"{lat2[label]:.2f} ({lat2['fp32'] / lat2[label]:.2f}x)", notes.get(label.split()[0] if label.startswith("infopt") else label, "")))
        print(f"{kind}: {len(calib)} calibration, {len(test)} held out; {notes}", file=sys.stderr)
        with open(os.path.join(a.work, "partial.md"), "w") as f:  # rows so far
            f.write("\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n")
    print("| model | variant | task score (held out) | mean cosine vs FP32 | ms 1 thread | ms 2 threads | notes |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
