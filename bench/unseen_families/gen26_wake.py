# Session 26's audio embedding: EfficientWord-Net's ResNet-50 ArcFace word embedder (the
# `EfficientWord-Net==1.0.5` wheel: models/resnet_50_arc/slim_93%_accuracy_72.7390%.onnx, torch
# 2.0 export, opset 14, 87 MB; the wheel also ships ORT's dynamic INT8 of it). The package
# computes 64 log filterbanks of a 1.5 s window at 16 kHz and compares the 2048-d embedding with
# reference embeddings of a word (sample_refs/*.json, from real recordings) by cosine.
# Inputs made here: words spoken by espeak-ng (its English voices and variants, rate and pitch
# drawn), resampled to 16 kHz, placed in a 1.5 s window with noise; half are the 7 reference
# words, half other words. Features are the package's own `logfbank` (eff_word_net.audio_utils).
# usage: python gen26_wake.py EW_UNPACKED OUT_DIR   (needs espeak-ng on PATH, numpy, onnxruntime)
#   EW_UNPACKED holds eff_word_net/ (`pip download --no-deps EfficientWord-Net==1.0.5`, unzipped).
#   Writes OUT_DIR/m/ew.onnx, OUT_DIR/m/ew_refs.npz (the references, word by word) and
#   OUT_DIR/d/ew/{calib,held}/NNNN.npz (64 calibration samples, 100 held out).
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import wave

import numpy as np

src, out = sys.argv[1:3]
sys.path.insert(0, src)
from eff_word_net.audio_utils import logfbank  # noqa: E402

REFS = ["alexa", "balloon", "computer", "lights_off", "lights_on", "mobile", "mycroft"]
OTHER = ["hello", "window", "banana", "seven", "music", "garden", "yesterday", "coffee", "rocket", "pillow"]
VOICES = ["en-us", "en-gb", "en-us+m3", "en-us+f2", "en-gb+m5", "en-us+f4", "en+m1", "en+f3"]
SR = 16000
WINDOW = int(1.5 * SR)


def spoken(rng, word):
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        subprocess.run(
            ["espeak-ng", "-v", rng.choice(VOICES), "-s", str(rng.randint(120, 190)), "-p", str(rng.randint(30, 70)),
             "-w", f.name, word.replace("_", " ")],
            check=True,
        )
        with wave.open(f.name) as w:
            rate = w.getframerate()
            x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
    t = np.arange(int(len(x) * SR / rate)) * rate / SR
    return np.interp(t, np.arange(len(x)), x).astype(np.float32)


def window(rng, x):
    x = x[:WINDOW]
    out = np.zeros(WINDOW, dtype=np.float32)
    start = rng.randint(0, WINDOW - len(x))
    out[start:start + len(x)] = x * rng.uniform(0.3, 1.0)
    out += np.random.default_rng(rng.randint(0, 1 << 30)).normal(0, rng.uniform(0.001, 0.02), WINDOW).astype(np.float32)
    return out


def features(x):
    f = logfbank(x, samplerate=SR, winlen=0.025, winstep=0.01, nfilt=64, nfft=512, preemph=0.0)
    return np.float32(f)[None, None]


def main():
    models = os.path.join(src, "eff_word_net", "models", "resnet_50_arc")
    os.makedirs(f"{out}/m", exist_ok=True)
    shutil.copy(os.path.join(models, "slim_93%_accuracy_72.7390%.onnx"), f"{out}/m/ew.onnx")
    refs = {}
    for w in REFS:
        with open(os.path.join(src, "eff_word_net", "sample_refs", f"{w}_ref.json")) as f:
            refs[w] = np.array(json.load(f)["embeddings"], dtype=np.float32)
    np.savez(f"{out}/m/ew_refs.npz", **refs)
    rng = random.Random(2600)
    for i in range(164):
        word = REFS[i % len(REFS)] if i % 2 == 0 else rng.choice(OTHER)
        part, j = ("calib", i) if i < 64 else ("held", i - 64)
        d = f"{out}/d/ew/{part}"
        os.makedirs(d, exist_ok=True)
        np.savez(f"{d}/{j:04d}.npz", input=features(window(rng, spoken(rng, word))))


main()
