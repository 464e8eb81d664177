#!/usr/bin/env python3
"""float16 on real-weight models with real-looking inputs: infopt's default
`optimize --fp16` (automatic float32 islands) against onnxconverter-common's
float16 and NVIDIA ModelOpt AutoCast, judged in ONNX Runtime CPU.

Usage (a venv with onnx, onnxruntime, numpy, pillow, rapidocr-onnxruntime,
magika, nudenet, ddddocr, silero-vad, onnxconverter-common (or silero-vad's
wheel unpacked with --silero DIR); ModelOpt from another venv with
--modelopt-python):

    python bench/fp16_real.py --infopt target/release/infopt --work /tmp/fp16real \\
        [--silero DIR] [--modelopt-python /path/to/venv/bin/python] \\
        [--models det,rec] [--converters infopt,modelopt-autocast] [--json out.json] [--markdown out.md]

Models and inputs (nothing is downloaded but the pip packages):
  PP-OCRv4 det (rapidocr): pages of rendered text (PIL, DejaVu fonts), 640x640
  PP-OCRv4 rec, PP-OCR mobile v2 cls: rendered text lines 48x320 / 48x192
  magika standard_v3_3: the first and last 1024 bytes of files of this machine
  nudenet 320n (YOLOv8n): synthetic scenes (gradients, skin-toned ellipses, noise)
  silero-vad (16k opset 15, the If-on-rate export, the opset-18 If-less export,
    the sequence export): chunks of synthetic voiced audio at 16 kHz, zero state
  ddddocr common / common_old (CNN+LSTM OCR): rendered captchas, grey, height 64
  ddddocr common_det (YOLOX): captcha glyphs letterboxed into 416x416, 0..255
  fixtures (random weights): bert_tiny, transformer_encoder, resnet_block,
    gpt2_mlp, fp16_overflow (a square that overflows float16)

Per model: sample 0 is given to infopt with `--inputs` (its verification
data, as a user would; `--as-typed` leaves it out, so infopt verifies and
places its float32 islands on inputs it makes itself); the figures are on samples 1..N (held out). For each
converter: exit status, wall time of the conversion, file size against
float32, the lowest cosine against float32 over outputs and held-out samples
(ONNX Runtime CPU, float32 inputs), and top-1 agreement for classifiers
(rec: per-position argmax of every line; cls and magika: the label).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np

FONTS = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
]
WORDS = (
    "invoice total amount date paid order number customer address street city phone "
    "email price quantity item description tax subtotal balance due thank you for your "
    "business 2026 12.50 $ 0042 Nr. ID report page chapter section table figure"
).split()
SAMPLES = 5  # sample 0 for infopt's --inputs, 1..4 held out


# ------------------------------------------------------------------ inputs

def _text(rng) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(2, 6))))


def page(rng, h: int, w: int) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (w, h), tuple(int(x) for x in rng.integers(190, 256, 3)))
    d = ImageDraw.Draw(img)
    y = int(rng.integers(5, 20))
    while y < h - 24:
        size = int(rng.integers(14, 34))
        font = ImageFont.truetype(FONTS[int(rng.integers(len(FONTS)))], size)
        d.text((int(rng.integers(5, 60)), y), _text(rng),
               fill=tuple(int(c) for c in rng.integers(0, 90, 3)), font=font)
        y += size + int(rng.integers(4, 40))
    a = np.asarray(img).astype(np.float32) / 255.0
    return ((a - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()


def line(rng, h: int, w: int) -> np.ndarray:
    """One text line, resized to height h and padded to width w as PaddleOCR does."""
    from PIL import Image, ImageDraw, ImageFont

    size = 32
    font = ImageFont.truetype(FONTS[int(rng.integers(len(FONTS)))], size)
    text = _text(rng)
    tw = int(font.getlength(text)) + 16
    img = Image.new("RGB", (tw, 44), tuple(int(x) for x in rng.integers(200, 256, 3)))
    ImageDraw.Draw(img).text((8, 4), text, fill=tuple(int(c) for c in rng.integers(0, 80, 3)), font=font)
    nw = min(w, max(1, int(round(tw * h / 44))))
    img = img.resize((nw, h))
    a = (np.asarray(img).astype(np.float32) / 255.0 - 0.5) / 0.5
    out = np.zeros((3, h, w), np.float32)
    out[:, :, :nw] = a.transpose(2, 0, 1)
    return out[None]


def scene(rng, size: int) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    img = np.stack([0.3 + 0.5 * xx, 0.4 + 0.3 * yy, 0.5 - 0.2 * xx * yy], 0)
    for _ in range(int(rng.integers(2, 5))):
        cy, cx = rng.uniform(0.2, 0.8, 2)
        ry, rx = rng.uniform(0.08, 0.3, 2)
        mask = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
        tone = np.array([0.85, 0.65, 0.55]) * rng.uniform(0.6, 1.1)
        for c in range(3):
            img[c][mask] = tone[c]
    img += rng.normal(0, 0.02, img.shape).astype(np.float32)
    return np.clip(img, 0, 1)[None].astype(np.float32)


def voiced(rng, n: int = 512, sr: int = 16000) -> np.ndarray:
    t = np.arange(n) / sr
    f0 = rng.uniform(100, 220)
    x = sum((0.6 / k) * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 6.28)) for k in range(1, 12))
    x *= 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(3, 6) * t)
    x += rng.normal(0, 0.01, n)
    return (0.3 * x / np.abs(x).max())[None].astype(np.float32)


def captcha(rng, h: int = 64) -> np.ndarray:
    """A ddddocr-style captcha: 4-6 letters and digits in mixed fonts, sizes and
    tones over a light background with noise lines and dots; grey, height h,
    width kept in proportion, scaled to [0, 1] as ddddocr feeds its OCR."""
    from PIL import Image, ImageDraw, ImageFont

    chars = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789"
    n = int(rng.integers(4, 7))
    w = 30 * n + 20
    img = Image.new("RGB", (w, 50), tuple(int(x) for x in rng.integers(200, 256, 3)))
    d = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 6))):
        d.line([tuple(int(v) for v in rng.integers(0, [w, 50])) for _ in range(2)],
               fill=tuple(int(c) for c in rng.integers(60, 200, 3)), width=int(rng.integers(1, 3)))
    x = 10
    for _ in range(n):
        font = ImageFont.truetype(FONTS[int(rng.integers(len(FONTS)))], int(rng.integers(26, 36)))
        d.text((x, int(rng.integers(0, 10))), chars[int(rng.integers(len(chars)))],
               fill=tuple(int(c) for c in rng.integers(0, 120, 3)), font=font)
        x += int(rng.integers(24, 32))
    for _ in range(120):
        d.point(tuple(int(v) for v in rng.integers(0, [w, 50])), fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
    img = img.resize((int(w * h / 50), h)).convert("L")
    return (np.asarray(img).astype(np.float32) / 255.0)[None, None].copy()


def yolox_image(rng, size: int = 416) -> np.ndarray:
    """ddddocr's detector input: a page of captcha glyphs letterboxed into
    size x size with grey 114 padding, CHW, float in 0..255 (its preproc)."""
    from PIL import Image, ImageDraw, ImageFont

    w, h = int(rng.integers(240, 416)), int(rng.integers(120, 300))
    img = Image.new("RGB", (w, h), tuple(int(x) for x in rng.integers(180, 256, 3)))
    d = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(3, 8))):
        font = ImageFont.truetype(FONTS[int(rng.integers(len(FONTS)))], int(rng.integers(24, 48)))
        d.text(tuple(int(v) for v in rng.integers(0, [max(1, w - 40), max(1, h - 50)])),
               "ABCDEFGHKMNPRSTUVWXYZ"[int(rng.integers(21))],
               fill=tuple(int(c) for c in rng.integers(0, 120, 3)), font=font)
    out = np.full((size, size, 3), 114, np.uint8)
    out[:h, :w] = np.asarray(img)
    return out.transpose(2, 0, 1)[None].astype(np.float32)


def file_bytes(paths: list[Path], i: int) -> np.ndarray:
    data = paths[i % len(paths)].read_bytes()
    beg = list(data[:1024]) + [256] * max(0, 1024 - len(data[:1024]))
    tail = data[-1024:] if len(data) >= 1024 else data
    end = [256] * (1024 - len(tail)) + list(tail)
    return np.array([beg + end], dtype=np.int32)


def system_files() -> list[Path]:
    roots = [Path("/usr/share/doc"), Path("/etc"), Path(__file__).resolve().parent.parent]
    out = []
    for r in roots:
        for p in sorted(r.rglob("*")):
            try:
                if p.is_file() and not p.is_symlink() and p.stat().st_size > 64 and ".git" not in p.parts:
                    out.append(p)
            except OSError:
                continue
            if len(out) >= 4000:
                break
    rng = np.random.default_rng(3)
    return [out[i] for i in rng.choice(len(out), SAMPLES, replace=False)]


def generic(sess, rng) -> dict[str, np.ndarray]:
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 2 for d in i.shape]
        if "int64" in i.type:
            # As infopt seeds them: masks all ones, token types 0 or 1, ids below 16.
            if "mask" in i.name:
                v = np.ones(shape, np.int64)
            elif "token_type" in i.name:
                v = rng.integers(0, 2, shape).astype(np.int64)
            else:
                v = rng.integers(0, 16, shape).astype(np.int64)
        else:
            v = rng.uniform(-1, 1, shape).astype(np.float32)
        feeds[i.name] = v
    return feeds


# ------------------------------------------------------------------ models

def models(args) -> dict[str, dict]:
    site = Path(np.__file__).resolve().parent.parent
    repo = Path(__file__).resolve().parent.parent
    fx = repo / "fixtures" / "models"
    rapid = site / "rapidocr_onnxruntime" / "models"
    out = {
        "ppocrv4-det": dict(family="CNN detector (DB)", path=rapid / "ch_PP-OCRv4_det_infer.onnx",
                            make=lambda s, r: {"x": page(r, 640, 640)}),
        "ppocrv4-rec": dict(family="CNN+SVTR recognizer", path=rapid / "ch_PP-OCRv4_rec_infer.onnx",
                            make=lambda s, r: {"x": line(r, 48, 320)}, top1="last"),
        "ppocr-cls": dict(family="MobileNetV3 classifier", path=rapid / "ch_ppocr_mobile_v2.0_cls_infer.onnx",
                          make=lambda s, r: {"x": line(r, 48, 192)}, top1="last"),
        "magika": dict(family="byte-sequence classifier", path=site / "magika" / "models" / "standard_v3_3" / "model.onnx",
                       make=None, top1="last"),
        "nudenet-320n": dict(family="YOLOv8n detector", path=site / "nudenet" / "320n.onnx",
                             make=lambda s, r: {"images": scene(r, 320)}),
        "bert_tiny": dict(family="transformer encoder (fixture, random weights)", path=fx / "exported" / "bert_tiny.onnx", make="generic"),
        "transformer_encoder": dict(family="transformer (fixture)", path=fx / "exported" / "transformer_encoder.onnx", make="generic"),
        "resnet_block": dict(family="ResNet block (fixture)", path=fx / "exported" / "resnet_block.onnx", make="generic"),
        "gpt2_mlp": dict(family="GPT-2 MLP (fixture)", path=fx / "gpt2_mlp.onnx", make="generic"),
        "fp16_overflow": dict(family="overflowing square (fixture)", path=fx / "fp16_overflow.onnx", make="generic"),
    }
    dddd = site / "ddddocr"
    out["ddddocr-common"] = dict(family="CNN+LSTM captcha OCR (ddddocr)", path=dddd / "common.onnx",
                                 make=lambda s, r: {"input1": captcha(r)}, top1="last")
    out["ddddocr-common-old"] = dict(family="CNN+LSTM captcha OCR (ddddocr, old)", path=dddd / "common_old.onnx",
                                     make=lambda s, r: {"input1": captcha(r)}, top1="last")
    out["ddddocr-det"] = dict(family="YOLOX detector (ddddocr)", path=dddd / "common_det.onnx",
                              make=lambda s, r: {"images": yolox_image(r)})
    silero = Path(args.silero) / "silero_vad" / "data" if args.silero else site / "silero_vad" / "data"
    state = lambda: np.zeros((2, 1, 128), np.float32)  # noqa: E731
    out["silero-vad"] = dict(family="LSTM voice activity", path=silero / "silero_vad_16k_op15.onnx",
                             make=lambda s, r: {"input": voiced(r), "sr": np.array(16000, np.int64), "state": state()})
    out["silero-vad-if"] = dict(family="LSTM voice activity (If on rate)", path=silero / "silero_vad.onnx",
                                make=lambda s, r: {"input": voiced(r), "sr": np.array(16000, np.int64), "state": state()})
    out["silero-vad-ifless"] = dict(family="LSTM voice activity (opset 18)", path=silero / "silero_vad_op18_ifless.onnx",
                                    make=lambda s, r: {"input": voiced(r), "sr": np.array(16000, np.int64), "state": state()})
    out["silero-vad-seq"] = dict(family="LSTM voice activity (sequence)", path=silero / "silero_vad_16k_sequence.onnx",
                                 make=lambda s, r: {"input": np.concatenate([voiced(r, 576) for _ in range(8)], 0),
                                                    "h": np.zeros((1, 1, 128), np.float32),
                                                    "c": np.zeros((1, 1, 128), np.float32)})
    return out


def samples(name: str, spec: dict, sess) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name == "magika":
        files = system_files()
        return [{"bytes": file_bytes(files, i)} for i in range(SAMPLES)]
    if spec["make"] == "generic":
        return [generic(sess, rng) for _ in range(SAMPLES)]
    return [spec["make"](sess, rng) for _ in range(SAMPLES)]


# ------------------------------------------------------------------ converters

def convert(tool: str, src: Path, dst: Path, npz: Path, args) -> tuple[str | None, float, dict | None]:
    t = time.perf_counter()
    report = None
    try:
        if tool == "infopt":
            rep = dst.with_suffix(".json")
            cmd = [args.infopt, "optimize", str(src), "-o", str(dst), "--fp16", "--report", str(rep)]
            if not args.as_typed:
                cmd += ["--inputs", str(npz)]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            if rep.exists():
                report = json.loads(rep.read_text())
            if p.returncode != 0:
                err = [l for l in p.stderr.splitlines() if l.startswith("error")]
                return f"exit {p.returncode}: {(err or [p.stderr[-200:]])[0][:300]}", time.perf_counter() - t, report
        elif tool == "onnxconverter-common":
            import warnings

            import onnx
            from onnxconverter_common import float16

            with warnings.catch_warnings():  # one warning per clamped weight
                warnings.simplefilter("ignore")
                m = float16.convert_float_to_float16(onnx.load(str(src)), keep_io_types=True)
            onnx.save(m, str(dst))
        elif tool == "modelopt-autocast":
            code = ("import sys, onnx\nfrom modelopt.onnx.autocast import convert_to_mixed_precision\n"
                    "m = convert_to_mixed_precision(sys.argv[1], low_precision_type='fp16', keep_io_types=True)\n"
                    "onnx.save(m, sys.argv[2])\n")
            p = subprocess.run([args.modelopt_python, "-c", code, str(src), str(dst)],
                               capture_output=True, text=True, timeout=1800)
            if p.returncode != 0:
                return f"error: {p.stderr.strip().splitlines()[-1][:200] if p.stderr.strip() else p.returncode}", time.perf_counter() - t, None
        else:
            raise ValueError(tool)
    except Exception as e:  # a peer that fails is a row, not a crash
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}", time.perf_counter() - t, report
    return None, time.perf_counter() - t, report


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    return float(a @ b / (na * nb))


def judge(ref_sess, path: Path, held: list[dict], top1: str | None) -> dict:
    import onnxruntime as ort

    try:
        s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as e:
        return dict(error=f"ORT cannot load: {str(e).splitlines()[0][:160]}")
    cos, agree, total = [], 0, 0
    for feeds in held:
        ref = ref_sess.run(None, feeds)
        got = s.run(None, feeds)
        for a, b in zip(ref, got):
            cos.append(cosine(a, b))
        if top1:
            ra, rb = ref[0], got[0]
            agree += int((ra.argmax(-1) == rb.argmax(-1)).sum())
            total += ra.argmax(-1).size
    out = dict(min_cosine=min(cos) if not any(np.isnan(cos)) else float("nan"))
    if top1:
        out["top1"] = agree / max(total, 1)
    return out


# ------------------------------------------------------------------ main

def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--infopt", required=True)
    ap.add_argument("--work", default="/tmp/fp16real")
    ap.add_argument("--silero")
    ap.add_argument("--modelopt-python")
    ap.add_argument("--models")
    ap.add_argument("--converters", help="comma-separated subset of infopt,onnxconverter-common,modelopt-autocast")
    ap.add_argument("--as-typed", action="store_true",
                    help="run infopt as a user without data types it: no --inputs (it verifies on inputs it makes)")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    import onnxruntime as ort

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    tools = ["infopt", "onnxconverter-common"] + (["modelopt-autocast"] if args.modelopt_python else [])
    if args.converters:
        tools = [t for t in tools if t in args.converters.split(",")]
    specs = models(args)
    wanted = args.models.split(",") if args.models else list(specs)
    rows = []
    for name in wanted:
        spec = specs[name]
        src = Path(spec["path"])
        if not src.is_file():
            print(f"{name}: missing {src}", file=sys.stderr)
            continue
        ref = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
        data = samples(name, spec, ref)
        npz = work / f"{name}.inputs.npz"
        np.savez(npz, **data[0])
        fp32_size = src.stat().st_size
        for tool in tools:
            dst = work / f"{name}.{tool}.onnx"
            if dst.exists():
                dst.unlink()
            err, secs, report = convert(tool, src, dst, npz, args)
            row = dict(model=name, family=spec["family"], converter=tool, seconds=round(secs, 2), error=err)
            if report and report.get("half_precision"):
                h = report["half_precision"]
                row["kept_fp32"] = [f"{k['node']} ({k['op']}, {k['kept_for']})" for k in h["kept_fp32"]]
                row["judged_cosine"] = h["cosine_final"]
            if err is None and dst.exists():
                row["size_ratio"] = round(dst.stat().st_size / fp32_size, 3)
                row.update(judge(ref, dst, data[1:], spec.get("top1")))
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.markdown:
        lines = ["| model | family | converter | exit | time s | size / fp32 | min cosine (held out) | top-1 | kept fp32 |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            cos = r.get("min_cosine")
            lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                r["model"], r["family"], r["converter"],
                "ok" if r["error"] is None else r["error"].replace("|", "/")[:140],
                r["seconds"], r.get("size_ratio", "—"),
                "—" if cos is None else ("NaN/inf" if cos != cos else f"{cos:.6f}"),
                f"{r['top1']:.4f}" if "top1" in r else "—",
                "; ".join(r.get("kept_fp32", [])) or "—"))
        Path(args.markdown).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
