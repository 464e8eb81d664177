"""Compares infopt's image preprocessing with PIL, torchvision-style and OpenCV pipelines.

Needs numpy, pillow and opencv-python-headless. From the repository root:
    python calibration/tests/data/compare_preprocessing.py
Builds the preprocess_dump example, runs it on a synthetic 97x61 image for each case and
prints the largest and mean absolute difference in pixel levels (0..255).
"""

import os
import subprocess
import tempfile

import cv2
import numpy as np
from PIL import Image


def ours(tmp, yaml, shape):
    spec = os.path.join(tmp, "spec.yaml")
    out = os.path.join(tmp, "out.f32")
    with open(spec, "w") as f:
        f.write("images:\n  input: x\n  layout: nhwc\n" + yaml)
    subprocess.run(
        ["cargo", "run", "-q", "-p", "infopt-calibration", "--example", "preprocess_dump", "--",
         spec, os.path.join(tmp, "img"), out],
        check=True, stdout=subprocess.DEVNULL)
    return np.fromfile(out, dtype=np.float32).reshape(shape)


def report(name, a, b):
    d = np.abs(a - b.astype(np.float32))
    print(f"{name:<45} max {d.max():4.1f}  mean {d.mean():.3f}")


with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "img"))
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:61, 0:97]
    img = np.stack([(x * 2.5) % 256, (y * 4.1) % 256, ((x + y) * 1.7) % 256], -1)
    img = np.clip(img + rng.integers(0, 30, img.shape), 0, 255).astype(np.uint8)
    Image.fromarray(img).save(os.path.join(tmp, "img", "a.png"))
    pil = Image.fromarray(img)

    report("resize 24x40 vs PIL BILINEAR",
           ours(tmp, "  size: [24, 40]\n", (24, 40, 3)), np.asarray(pil.resize((40, 24), Image.BILINEAR)))

    nw, nh = int(36 * 97 / 61), 36  # torchvision Resize(36): long side truncated
    big = pil.resize((nw, nh), Image.BILINEAR)
    left, top = int(round((nw - 32) / 2)), int(round((nh - 32) / 2))
    report("shorter 36 + crop 32 vs torchvision-style PIL",
           ours(tmp, "  size: [32, 32]\n  resize: resize-shorter-then-crop\n  shorter: 36\n", (32, 32, 3)),
           np.asarray(big.crop((left, top, left + 32, top + 32))))

    for h, w in [(24, 40), (160, 200)]:
        report(f"opencv-linear {h}x{w} vs cv2.INTER_LINEAR",
               ours(tmp, f"  size: [{h}, {w}]\n  interpolation: opencv-linear\n", (h, w, 3)),
               cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR))

    r = min(64 / 61, 64 / 97)
    nw, nh = int(round(97 * r)), int(round(61 * r))
    dw, dh = (64 - nw) / 2, (64 - nh) / 2
    res = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    ref = cv2.copyMakeBorder(res, int(round(dh - 0.1)), int(round(dh + 0.1)), int(round(dw - 0.1)),
                             int(round(dw + 0.1)), cv2.BORDER_CONSTANT, value=(114, 114, 114))
    report("letterbox 64 vs YOLO-style cv2 letterbox",
           ours(tmp, "  size: [64, 64]\n  resize: letterbox\n  interpolation: opencv-linear\n", (64, 64, 3)), ref)
