# Session 32's unseen family: LDC, a lightweight dense CNN for edge detection (pytorch 2.0, opset 13,
# ConvTranspose upsampling, InstanceNormalization; 3.1 MB), real weights from GitHub
# (Kazuhito00/LDC-ONNX-Sample, model/LDC_640x360.onnx), input RGB 0..255 [1, 3, 360, 640] as its
# demo_onnx.py feeds it (resized, no normalization); five edge-logit maps out, the last the fused one.
# Photos: any folders of .jpg/.png photos (session 32 used the face detector's 24 and the
# segmentation's 10 repository photos and LDC's own sample.jpg: people, streets, rooms).
# usage: python gen32_ldc.py OUT_DIR PHOTO_DIR [PHOTO_DIR ...]
#   -> OUT_DIR/calib/NNNN.npz (64: views of the first two thirds of the photos, by folder then
#      name), OUT_DIR/held/NNNN.npz (48: views of the others); input "input_image".
import glob, os, random, sys

import numpy as np
from PIL import Image, ImageEnhance

out, dirs = sys.argv[1], sys.argv[2:]
rng = random.Random(32)


def view(img, whole):
    if not whole:
        w, h = img.size
        s = rng.uniform(0.6, 1.0)
        cw, ch = int(w * s), int(h * s)
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        img = img.crop((x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.75, 1.25))
        img = ImageEnhance.Contrast(img).enhance(rng.uniform(0.75, 1.25))
    x = np.asarray(img.resize((640, 360), Image.BILINEAR), dtype=np.float32)
    return np.ascontiguousarray(np.transpose(x, (2, 0, 1))[None])


files = [f for d in dirs for f in sorted(glob.glob(os.path.join(d, "*.jpg")) + glob.glob(os.path.join(d, "*.png")))]
cut = len(files) * 2 // 3
for part, photos, count in (("calib", files[:cut], 64), ("held", files[cut:], 48)):
    os.makedirs(os.path.join(out, part), exist_ok=True)
    for i in range(count):
        img = Image.open(photos[i % len(photos)]).convert("RGB")
        np.savez(os.path.join(out, part, "%04d.npz" % i), input_image=view(img, i < len(photos)))
    print(part, count, "views of", len(photos), "photos")
