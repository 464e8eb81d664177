# Session 25's unseen families: MediaPipe's real-weight TFLite models (mediapipe 0.10.14's wheel,
# mediapipe/modules/**.tflite), converted with tflite2onnx 0.4.1 (opset 11, NCHW input):
#   face:      face_detection/face_detection_short_range.tflite (BlazeFace, 896 SSD anchors),
#              input [1,3,128,128] in [-1, 1]
#   hand:      hand_landmark/hand_landmark_lite.tflite and _full (21 landmarks, presence,
#              handedness, world landmarks), input [1,3,224,224] in [0, 1]
#   iris:      iris_landmark/iris_landmark.tflite (71 eye-contour and 5 iris points, PReLU),
#              input [1,3,64,64] in [0, 1]
#   recrop:    holistic_landmark/hand_recrop.tflite (a hand crop's centre and size), input
#              [1,3,256,256] in [0, 1]
# and three more through tf2onnx 1.17 (TensorFlow 2.21, `--tflite ... --opset 17`, NHWC input
# [1,H,W,3] in [0, 1]), which tflite2onnx could not convert:
#   facemesh:  face_landmark/face_landmark.tflite (468 3-D points and a face flag), 192x192
#   palm:      palm_detection/palm_detection_lite.tflite (BlazePalm, 2016 SSD anchors), 192x192
#   pose:      pose_landmark/pose_landmark_full.tflite (BlazePose GHUM: 39 landmarks, a 256x256
#              segmentation mask, heatmaps; 76 ReLU6), 256x256
# Inputs are drawn here with PIL: faces (skin ellipse, eyes, brows, nose, mouth, hair) on textured
# backgrounds, some frames without a face; hands (palm and five jointed fingers, random pose);
# eye crops (sclera, iris, pupil, lids, brow).
# usage: python gen25.py OUT_DIR    -> OUT_DIR/{face,hand,iris,recrop,facemesh,palm,pose}/
#   {calib/0000..0063,held/0000..0099}.npz
# Models: for f in face_detection_short_range hand_landmark_lite hand_landmark_full iris_landmark
#   hand_recrop; do tflite2onnx .../$f.tflite M/$f.onnx; done  (run25.sh names them)
import math
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

out = sys.argv[1]
N = 164


def save(kind, i, name, x):
    part, j = ("calib", i) if i < 64 else ("held", i - 64)
    d = f"{out}/{kind}/{part}"
    os.makedirs(d, exist_ok=True)
    np.savez(f"{d}/{j:04d}.npz", **{name: x})


def background(rng, size):
    """A gradient, blobs and noise: a room, a wall, a street."""
    a = rng.uniform(0, 255, 3)
    b = rng.uniform(0, 255, 3)
    t = np.linspace(0, 1, size)[:, None, None]
    img = (a * (1 - t) + b * t) * np.ones((size, size, 3))
    im = Image.fromarray(img.clip(0, 255).astype(np.uint8))
    d = ImageDraw.Draw(im)
    for _ in range(rng.integers(2, 9)):
        x0, y0 = rng.uniform(-0.2, 1, 2) * size
        w, h = rng.uniform(0.1, 0.6, 2) * size
        c = tuple(int(v) for v in rng.uniform(0, 255, 3))
        if rng.random() < 0.5:
            d.rectangle([x0, y0, x0 + w, y0 + h], fill=c)
        else:
            d.ellipse([x0, y0, x0 + w, y0 + h], fill=c)
    return im


def skin(rng):
    tone = rng.uniform(0.25, 1.0)
    return np.array([225, 185, 150]) * tone + np.array([30, 15, 10]) * (1 - tone)


def finish(rng, im, size):
    im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.5)))
    x = np.asarray(im, dtype=np.float32) / 255.0
    x = x + rng.normal(0, rng.uniform(0.005, 0.04), x.shape).astype(np.float32)
    return x.clip(0, 1).transpose(2, 0, 1)[None]


def face_image(rng, size=128):
    im = background(rng, size)
    d = ImageDraw.Draw(im)
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        s = rng.uniform(0.25, 0.7) * size
        cx, cy = rng.uniform(0.2, 0.8, 2) * size
        c = skin(rng)
        hair = tuple(int(v) for v in rng.uniform(0, 90, 3))
        d.ellipse([cx - 0.55 * s, cy - 0.75 * s, cx + 0.55 * s, cy + 0.35 * s], fill=hair)
        d.ellipse([cx - 0.45 * s, cy - 0.6 * s, cx + 0.45 * s, cy + 0.6 * s], fill=tuple(int(v) for v in c))
        dark = tuple(int(v) for v in c * 0.35)
        for side in (-1, 1):
            ex, ey = cx + side * 0.2 * s, cy - 0.1 * s
            d.ellipse([ex - 0.09 * s, ey - 0.04 * s, ex + 0.09 * s, ey + 0.04 * s], fill=(240, 240, 240))
            d.ellipse([ex - 0.04 * s, ey - 0.04 * s, ex + 0.04 * s, ey + 0.04 * s], fill=(40, 30, 20))
            d.line([ex - 0.1 * s, ey - 0.12 * s, ex + 0.1 * s, ey - 0.14 * s], fill=dark, width=max(1, int(0.03 * s)))
        d.line([cx, cy - 0.05 * s, cx - 0.04 * s, cy + 0.15 * s], fill=dark, width=max(1, int(0.02 * s)))
        d.arc([cx - 0.18 * s, cy + 0.15 * s, cx + 0.18 * s, cy + 0.35 * s], 20, 160, fill=(150, 60, 60), width=max(1, int(0.03 * s)))
    return finish(rng, im, size) * 2 - 1


def hand_image(rng, size=224):
    im = background(rng, size)
    d = ImageDraw.Draw(im)
    c = tuple(int(v) for v in skin(rng))
    s = rng.uniform(0.35, 0.6) * size
    cx, cy = rng.uniform(0.35, 0.65, 2) * size
    rot = rng.uniform(-math.pi, math.pi)

    def at(u, v):  # hand coordinates (palm centre, units of s) to pixels
        return (cx + s * (u * math.cos(rot) - v * math.sin(rot)), cy + s * (u * math.sin(rot) + v * math.cos(rot)))

    palm = [at(u, v) for u, v in [(-0.3, -0.25), (0.3, -0.25), (0.35, 0.3), (-0.35, 0.3)]]
    d.polygon(palm, fill=c)
    w = max(2, int(0.1 * s))
    for k, (u0, ang0) in enumerate([(-0.42, 0.9), (-0.22, 0.1), (0.0, 0.0), (0.2, -0.1), (0.38, -0.25)]):
        base = (u0, -0.2) if k else (-0.35, 0.15)
        ang = ang0 + rng.uniform(-0.3, 0.3)
        length = (0.28 if k == 0 else 0.22) * rng.uniform(0.9, 1.1)
        pts = [base]
        for _ in range(3):
            bend = rng.uniform(0, 0.5) if rng.random() < 0.4 else 0.0
            ang += bend
            u, v = pts[-1]
            pts.append((u + length * math.sin(ang) * (-1 if k == 0 else 1), v - length * math.cos(ang)))
        d.line([at(*p) for p in pts], fill=c, width=w, joint="curve")
    return finish(rng, im, size)


def eye_image(rng, size=64):
    c = skin(rng)
    im = Image.new("RGB", (size, size), tuple(int(v) for v in c))
    d = ImageDraw.Draw(im)
    cx, cy = size / 2 + rng.uniform(-6, 6), size / 2 + rng.uniform(-4, 4)
    w, h = rng.uniform(18, 28), rng.uniform(6, 13)
    d.ellipse([cx - w, cy - h, cx + w, cy + h], fill=(235, 235, 230))
    r = h * rng.uniform(0.9, 1.3)
    ix = cx + rng.uniform(-0.4, 0.4) * w
    iris = tuple(int(v) for v in rng.uniform(30, 160, 3))
    d.ellipse([ix - r, cy - r, ix + r, cy + r], fill=iris)
    d.ellipse([ix - r * 0.4, cy - r * 0.4, ix + r * 0.4, cy + r * 0.4], fill=(10, 10, 10))
    lid = tuple(int(v) for v in c * 0.8)
    d.pieslice([cx - w - 2, cy - h - 14, cx + w + 2, cy + h - 2], 180, 360, fill=lid) if rng.random() < 0.3 else None
    d.arc([cx - w, cy - h, cx + w, cy + h], 180, 360, fill=(40, 30, 30), width=2)
    brow = tuple(int(v) for v in c * 0.3)
    d.line([cx - w, cy - h - 10, cx, cy - h - 14, cx + w, cy - h - 10], fill=brow, width=3)
    return finish(rng, im, size)


def person_image(rng, size=256):
    """A standing figure: head, torso, arms and legs at random angles."""
    im = background(rng, size)
    d = ImageDraw.Draw(im)
    c = tuple(int(v) for v in skin(rng))
    cloth = tuple(int(v) for v in rng.uniform(0, 255, 3))
    s = rng.uniform(0.5, 0.9) * size
    cx, top = rng.uniform(0.35, 0.65) * size, rng.uniform(0.05, 0.2) * size
    head = 0.07 * s
    d.ellipse([cx - head, top, cx + head, top + 2 * head], fill=c)
    neck = (cx, top + 2 * head)
    hip = (cx + rng.uniform(-0.05, 0.05) * s, top + 0.55 * s)
    d.polygon([(neck[0] - 0.1 * s, neck[1]), (neck[0] + 0.1 * s, neck[1]), (hip[0] + 0.08 * s, hip[1]),
               (hip[0] - 0.08 * s, hip[1])], fill=cloth)
    w = max(2, int(0.04 * s))

    def limb(start, length, ang, colour):
        mid = (start[0] + length * math.sin(ang), start[1] + length * math.cos(ang))
        ang2 = ang + rng.uniform(-0.8, 0.8)
        end = (mid[0] + length * math.sin(ang2), mid[1] + length * math.cos(ang2))
        d.line([start, mid, end], fill=colour, width=w, joint="curve")

    for side in (-1, 1):
        limb((neck[0] + side * 0.1 * s, neck[1] + 0.02 * s), 0.17 * s, side * rng.uniform(0.2, 2.5), c)
        limb((hip[0] + side * 0.05 * s, hip[1]), 0.22 * s, side * rng.uniform(0.0, 0.5), cloth)
    return finish(rng, im, size)


def nhwc(x):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def main():
    for i in range(N):
        rng = np.random.default_rng(2500 + i)
        save("face", i, "input", face_image(rng).astype(np.float32))
        save("hand", i, "input_1", hand_image(rng).astype(np.float32))
        save("iris", i, "input_1", eye_image(rng).astype(np.float32))
        save("recrop", i, "input_1", hand_image(rng, 256).astype(np.float32))
        save("facemesh", i, "input_1", nhwc((face_image(rng, 192) + 1) / 2).astype(np.float32))
        save("palm", i, "input_1", nhwc(hand_image(rng, 192)).astype(np.float32))
        save("pose", i, "input_1", nhwc(person_image(rng)).astype(np.float32))


main()
