# Session 26's segmenting detector: captcha_recognizer's slider-hole model (the
# `captcha-recognizer==1.0.2` wheel: models/slider.onnx, a YOLOv8-seg of one class, torch 2.4
# export, opset 19, 40 MB; outputs [1, 37, 8400] boxes + score + 32 mask coefficients and
# [1, 32, 160, 160] mask prototypes). Inputs made here: 640x640 backgrounds (smooth colour
# waves, noise, blobs) with one puzzle-piece hole, darkened and rimmed as slider captchas draw
# it; 0..1 RGB NCHW as the package feeds it. FP32 finds the holes at scores near 0.95.
# usage: python gen26_slider.py WHEEL_UNPACKED OUT_DIR   (numpy, pillow)
#   WHEEL_UNPACKED holds captcha_recognizer/ (`pip download --no-deps captcha-recognizer==1.0.2`,
#   unzipped). Writes OUT_DIR/m/slider.onnx and OUT_DIR/d/slider/{calib,held}/NNNN.npz (64 + 36).
import os
import shutil
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

src, out = sys.argv[1:3]


def scene(rng, w=640, h=640):
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        fx, fy = rng.uniform(0.002, 0.02, 2)
        ph = rng.uniform(0, 6.3, 2)
        base[..., c] = 0.5 + 0.25 * np.sin(xx * fx + ph[0]) * np.cos(yy * fy + ph[1]) + rng.normal(0, 0.05, (h, w))
    img = Image.fromarray((np.clip(base, 0, 1) * 255).astype(np.uint8))
    d = ImageDraw.Draw(img)
    for _ in range(rng.integers(3, 8)):
        x, y = rng.integers(0, 600, 2)
        r = int(rng.integers(10, 60))
        d.ellipse([x, y, x + r, y + r], fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
    s = int(rng.integers(70, 120))
    x = int(rng.integers(200, w - s - 20))
    y = int(rng.integers(40, h - s - 40))
    mask = Image.new("L", (w, h), 0)
    md = ImageDraw.Draw(mask)
    k = s // 4
    md.rectangle([x, y, x + s, y + s], fill=255)
    md.ellipse([x + s // 2 - k, y - k, x + s // 2 + k, y + k], fill=255)
    md.ellipse([x + s - k, y + s // 2 - k, x + s + k, y + s // 2 + k], fill=255)
    arr = np.asarray(img).astype(np.float32)
    m = np.asarray(mask.filter(ImageFilter.GaussianBlur(1)))[..., None] / 255
    rim = np.asarray(mask.filter(ImageFilter.FIND_EDGES).filter(ImageFilter.MaxFilter(3)))[..., None] / 255
    arr = arr * (1 - 0.55 * m) + 120 * rim
    x01 = np.clip(arr, 0, 255).astype(np.float32) / 255
    return x01.transpose(2, 0, 1)[None].astype(np.float32)


def main():
    os.makedirs(f"{out}/m", exist_ok=True)
    shutil.copy(os.path.join(src, "captcha_recognizer", "models", "slider.onnx"), f"{out}/m/slider.onnx")
    rng = np.random.default_rng(26)
    for i in range(100):
        part, j = ("calib", i) if i < 64 else ("held", i - 64)
        os.makedirs(f"{out}/d/slider/{part}", exist_ok=True)
        np.savez(f"{out}/d/slider/{part}/{j:04d}.npz", images=scene(rng))


main()
