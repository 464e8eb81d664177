"""What the default INT8 command costs against ONNX Runtime's quantizer, per model.

    python bench/int8_cost.py INFOPT_BIN [--models rec,magika,effnet,resnet]
        [--work DIR] [--calib 64] [--held-out 100] [--runs 20] [--target portable]
        [--zoo DIR]

For each model: the default command (`infopt optimize M --int8 --calib-data
DIR -o OUT`, DIR holding the calibration samples only; `--target` adds
`--target T` unless it is `portable`) and ORT's `quantize_static` (MinMax,
QDQ, per-channel S8 weights, U8 activations) on the same samples, each timed
as wall time in its own process; the ratio infopt / ORT (the goal: <= 2 for
models under 20 MB); where infopt's time went (the report's `int8.costs`);
then the task score on the held-out samples (`bench/real_int8.py`'s scorers)
and ONNX Runtime CPU latency at one thread, interleaved in this process.

Models: `rec` (PP-OCRv4 rec, from `rapidocr-onnxruntime`) and `magika` (its
package) with the inputs `bench/real_int8.py` makes; `effnet` and `resnet`
(EfficientNet-B0 and ResNet-50 in torchvision's layout with random weights,
`bench/quant_bench.py models DIR`, given as --zoo DIR) on images of smooth
random blobs, scored by top-1 agreement with FP32.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_int8 as R  # noqa: E402


def blob_images(n, seed, size=224):
    """Smooth, image-like inputs (ImageNet-normalized): random low-frequency
    fields, so that activations have the spread of natural images rather
    than of white noise."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        low = rng.normal(0, 1, (3, 7, 7)).astype(np.float32)
        img = np.repeat(np.repeat(low, size // 7 + 1, 1), size // 7 + 1, 2)[:, :size, :size]
        img = img + rng.normal(0, 0.3, img.shape).astype(np.float32)
        out.append(({"input": img[None].astype(np.float32)}, None))
    return out


def input_name(path):
    import onnx

    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return next(i.name for i in m.graph.input if i.name not in inits)


def samples_for(kind, model, n, dictionary):
    if kind == "rec":
        return R.rec_samples(n, 1, dictionary)
    if kind == "magika":
        return R.magika_samples(n, 3)
    name = input_name(model)
    return [({name: f["input"]}, t) for f, t in blob_images(n, 11)]


def top1(outputs_fp32, outputs):
    a = [o.reshape(o.shape[0], -1).argmax(-1)[0] for o in outputs]
    b = [o.reshape(o.shape[0], -1).argmax(-1)[0] for o in outputs_fp32]
    return float(np.mean([x == y for x, y in zip(a, b)])), "top-1 agreement with FP32"


def run_timed(cmd, log):
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p.returncode, secs


def ort_minmax(model, calib_dir, out, log):
    """ORT's quantize_static in its own process (as infopt runs in its own),
    reading the same .npz files."""
    code = (
        "import glob, sys, numpy as np\n"
        "from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static\n"
        "class Reader(CalibrationDataReader):\n"
        "    def __init__(self):\n"
        "        self.it = iter(sorted(glob.glob(sys.argv[2] + '/*.npz')))\n"
        "    def get_next(self):\n"
        "        f = next(self.it, None)\n"
        "        return None if f is None else dict(np.load(f))\n"
        "quantize_static(sys.argv[1], sys.argv[3], Reader(), quant_format=QuantFormat.QDQ, per_channel=True,\n"
        "    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)\n"
    )
    return run_timed([sys.executable, "-c", code, model, calib_dir, out], log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("--models", default="rec,magika,effnet")
    ap.add_argument("--work", default="/tmp/int8_cost")
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--held-out", type=int, default=100)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--target", default="portable")
    ap.add_argument("--zoo", default="/tmp/i8/zoo", help="quant_bench.py models DIR")
    ap.add_argument("--extra", default="", help="more infopt arguments, space separated")
    ap.add_argument("--model-dir", help="rec's and magika's .onnx in one folder (another machine)")
    ap.add_argument("--fonts", help="a folder of .ttf fonts for rec's lines (default: DejaVu)")
    a = ap.parse_args()
    if a.model_dir:
        R.REC = os.path.join(a.model_dir, os.path.basename(R.REC))
        R.MAGIKA = os.path.join(a.model_dir, "magika_" + os.path.basename(R.MAGIKA))
    if a.fonts:
        R.FONTS[:] = sorted(os.path.join(a.fonts, f) for f in os.listdir(a.fonts) if f.endswith(".ttf"))
    paths = {"rec": R.REC, "magika": R.MAGIKA,
             "effnet": os.path.join(a.zoo, "efficientnet_b0.onnx"),
             "resnet": os.path.join(a.zoo, "resnet50.onnx")}
    rows = []
    for kind in a.models.split(","):
        model = paths[kind]
        dictionary = R.rec_dictionary(model) if kind == "rec" else None
        samples = samples_for(kind, model, a.calib + a.held_out, dictionary)
        calib, test = samples[:a.calib], samples[a.calib:]
        d = os.path.join(a.work, kind)
        cdir = os.path.join(d, "calib")
        os.makedirs(cdir, exist_ok=True)
        for f in os.listdir(cdir):
            os.remove(os.path.join(cdir, f))
        for i, (feeds, _) in enumerate(calib):
            np.savez(os.path.join(cdir, f"{i:04d}.npz"), **feeds)
        out = os.path.join(d, "infopt_int8.onnx")
        cmd = [a.infopt, "optimize", model, "--int8", "--calib-data", cdir, "-o", out,
               "--report", out + ".json"]
        if a.target != "portable":
            cmd += ["--target", a.target]
        cmd += [x for x in a.extra.split() if x]
        rc, secs = run_timed(cmd, out + ".log")
        ort_out = os.path.join(d, "ort_minmax.onnx")
        orc, osecs = ort_minmax(model, cdir, ort_out, ort_out + ".log")
        costs, kept = "", ""
        if os.path.exists(out + ".json"):
            rep = json.load(open(out + ".json"))
            i8 = rep.get("int8") or {}
            steps = sorted((i8.get("costs") or {}).items(), key=lambda kv: -kv[1].get("seconds", 0))
            costs = "; ".join(f"{k} {v['seconds']:.1f} s ({v['count']})" for k, v in steps[:5] if v.get("seconds"))
            kept = f"{len(i8.get('kept_float') or [])} kept float"
        variants = {"fp32": model}
        if rc == 0:
            variants["infopt"] = out
        if orc == 0:
            variants["ort minmax"] = ort_out
        ref = R.run_all(model, test, kind)
        lat = R.latency(variants, test[0][0], 1, a.runs)
        for label, path in variants.items():
            outs = ref if label == "fp32" else R.run_all(path, test, kind)
            if kind in ("rec", "magika"):
                s, what = R.score(kind, ref, outs, [t for _, t in test], dictionary)
            else:
                s, what = top1(ref, outs)
            wall = {"infopt": f"exit {rc}, {secs:.1f} s ({secs / osecs:.2f}x ORT)",
                    "ort minmax": f"exit {orc}, {osecs:.1f} s"}.get(label, "")
            mb = os.path.getsize(model) / 1e6
            rows.append((kind, f"{mb:.1f}", label, f"{s * 100:.2f}% {what}",
                         f"{lat[label]:.2f} ({lat['fp32'] / lat[label]:.2f}x)", wall,
                         (kept + "; " + costs).strip("; ") if label == "infopt" else ""))
        print(f"{kind}: infopt exit {rc} {secs:.1f} s, ORT exit {orc} {osecs:.1f} s", file=sys.stderr)
        for label in ("infopt", "ort minmax"):
            if label not in variants:
                r = (rc, secs) if label == "infopt" else (orc, osecs)
                rows.append((kind, "", label, "-", "-", f"exit {r[0]}, {r[1]:.1f} s", ""))
    print("| model | MB | variant | task score (held out) | ms 1 thread (speed-up) | command wall time | infopt: kept, slowest steps |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
