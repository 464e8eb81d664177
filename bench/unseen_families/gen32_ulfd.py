# Session 32's unseen family: Ultra-Light-Fast-Generic-Face-Detector-1MB (an SSD-style face detector
# with its box decoding inside the graph: priors, Exp of the size offsets, Softmax scores), real
# weights from the project's GitHub repository (Linzaer/Ultra-Light-Fast-Generic-Face-Detector-1MB,
# models/onnx/version-RFB-320.onnx and version-slim-320.onnx: pytorch 1.2, opset 9, IR 4 with the
# initializers listed as graph inputs, 1.1-1.3 MB), on the repository's own photos (imgs/*.jpg,
# groups of faces), preprocessed as its detect_imgs_onnx.py does: RGB, resized to 320x240,
# (x - 127) / 128, CHW.
# usage: python gen32_ulfd.py IMGS_DIR OUT_DIR
#   -> OUT_DIR/calib/NNNN.npz (64: the first 16 photos by name, 4 views each),
#      OUT_DIR/held/NNNN.npz (the other photos, 12 views each); input "input" [1, 3, 240, 320].
#   A view: the whole photo, or a crop of 60-100% of it, mirrored or not, brightness and
#   contrast jittered by up to 25%.
import glob, os, random, sys

import numpy as np
from PIL import Image, ImageEnhance

imgs, out = sys.argv[1:3]
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
    x = np.asarray(img.resize((320, 240), Image.BILINEAR), dtype=np.float32)
    x = (x - 127.0) / 128.0
    return np.ascontiguousarray(np.transpose(x, (2, 0, 1))[None])


files = sorted(glob.glob(os.path.join(imgs, "*.jpg")), key=lambda p: int(os.path.basename(p).split(".")[0]))
for part, photos, per in (("calib", files[:16], 4), ("held", files[16:], 12)):
    os.makedirs(os.path.join(out, part), exist_ok=True)
    i = 0
    for f in photos:
        img = Image.open(f).convert("RGB")
        for k in range(per):
            np.savez(os.path.join(out, part, "%04d.npz" % i), input=view(img, k == 0))
            i += 1
    print(part, i)
