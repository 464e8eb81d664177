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
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photos32  # noqa: E402
from photos32 import chw  # noqa: E402

out, dirs = sys.argv[1], sys.argv[2:]
rng = random.Random(32)


def view(img, whole):
    x = photos32.view(img, whole, rng, (640, 360))
    return chw(x)


files = [f for d in dirs for f in sorted(glob.glob(os.path.join(d, "*.jpg")) + glob.glob(os.path.join(d, "*.png")))]
cut = len(files) * 2 // 3
for part, photos, count in (("calib", files[:cut], 64), ("held", files[cut:], 48)):
    os.makedirs(os.path.join(out, part), exist_ok=True)
    for i in range(count):
        img = Image.open(photos[i % len(photos)]).convert("RGB")
        np.savez(os.path.join(out, part, "%04d.npz" % i), input_image=view(img, i < len(photos)))
    print(part, count, "views of", len(photos), "photos")
