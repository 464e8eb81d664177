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
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photos32  # noqa: E402
from photos32 import chw  # noqa: E402

imgs, out = sys.argv[1:3]
rng = random.Random(32)


def view(img, whole):
    x = photos32.view(img, whole, rng, (320, 240))
    return chw((x - 127.0) / 128.0)


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
