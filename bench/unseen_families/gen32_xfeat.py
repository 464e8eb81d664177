# Session 32's unseen family: XFeat, accelerated local features for image matching (a CNN with a
# descriptor map [1, 64, H/8, W/8], keypoint logits [1, 65, H/8, W/8] over an 8x8 cell and a
# dustbin, a reliability map [1, 1, H/8, W/8]; pytorch 2.2, opset 17, 3.7 MB), real weights from
# GitHub (Kazuhito00/XFeat-Image-Matching-ONNX-Sample, onnx_model/xfeat_320x224.onnx), input RGB
# / 255 [1, 3, 224, 320] as its xfeat_onnx.py feeds it.
# Photos: any folders of .jpg/.png photos (session 32: the face detector's, the segmentation's and
# LDC's repository photos). usage: python gen32_xfeat.py OUT_DIR PHOTO_DIR [PHOTO_DIR ...]
#   -> OUT_DIR/calib/NNNN.npz (64 views of the first two thirds of the photos),
#      OUT_DIR/held/NNNN.npz (48: four views of each of the other 12 photos, consecutive, so that
#      views 2k and 2k+1 show the same photo: the pairs score32_xfeat.py matches); input "input".
import glob, os, random, sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photos32  # noqa: E402
from photos32 import chw  # noqa: E402

out, dirs = sys.argv[1], sys.argv[2:]
rng = random.Random(32)
files = [f for d in dirs for f in sorted(glob.glob(os.path.join(d, "*.jpg")) + glob.glob(os.path.join(d, "*.png")))]
cut = len(files) * 2 // 3
os.makedirs(os.path.join(out, "calib"), exist_ok=True)
os.makedirs(os.path.join(out, "held"), exist_ok=True)
for i in range(64):
    img = Image.open(files[:cut][i % cut]).convert("RGB")
    x = photos32.view(img, i < cut, rng, (320, 224))
    np.savez(os.path.join(out, "calib", "%04d.npz" % i), input=chw(x / 255.0))
i = 0
for f in files[cut:][:12]:
    img = Image.open(f).convert("RGB")
    for k in range(4):
        x = photos32.view(img, k == 0, rng, (320, 224))
        np.savez(os.path.join(out, "held", "%04d.npz" % i), input=chw(x / 255.0))
        i += 1
print("calib 64, held", i)
