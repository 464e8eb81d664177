# Session 32's unseen family: skin / clothes / hair segmentation (segmentation_models_pytorch's PAN on a
# timm MobileNetV3-small, HardSigmoid squeeze-excite, Resize, a Sigmoid per class), real weights from
# GitHub (Kazuhito00/Skin-Clothes-Hair-Segmentation-using-SMP,
# 02.model/_old/PAN(timm-mobilenetv3_small_100)_452_1.02M_0.8028/best_model.onnx: pytorch 1.9,
# opset 13, 4.1 MB; input [1, 3, 512, 512], output [1, 3, 512, 512] probabilities), on the
# repository's own photos (01.dataset/image/*.png and XX.image/*.png, people), preprocessed as its
# demo_onnx_simple.py does: resized to 512x512, RGB, ImageNet mean and std, CHW.
# usage: python gen32_seg.py IMGS_DIR OUT_DIR
#   -> OUT_DIR/calib/NNNN.npz (64: the first 6 photos by name, 11 views each, less two),
#      OUT_DIR/held/NNNN.npz (the other 4 photos, 12 views each); input "x.1".
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
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def view(img, whole):
    x = photos32.view(img, whole, rng, (512, 512))
    return chw((x / 255.0 - MEAN) / STD)


files = sorted(glob.glob(os.path.join(imgs, "*.png")))
for part, photos, per, most in (("calib", files[:6], 11, 64), ("held", files[6:], 12, 48)):
    os.makedirs(os.path.join(out, part), exist_ok=True)
    i = 0
    for f in photos:
        img = Image.open(f).convert("RGB")
        for k in range(per):
            if i < most:
                np.savez(os.path.join(out, part, "%04d.npz" % i), **{"x.1": view(img, k == 0)})
                i += 1
    print(part, i)
