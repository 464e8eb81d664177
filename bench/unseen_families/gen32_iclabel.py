# Session 32's unseen family: ICLabel, the EEG independent-component classifier (brain, muscle, eye,
# heart, line noise, channel noise, other), real weights from PyPI:
#   mne-icalabel 0.10.0 mne_icalabel/iclabel/network/assets/ICLabelNet.onnx (pytorch 1.13, opset 14,
#   three inputs: topo [4n,1,32,32], psds [4n,1,1,100], autocorr [4n,1,1,100]; output labels [n,7],
#   the four augmented copies averaged inside the graph; 11.6 MB).
# Each sample is one synthetic 32-channel EEG recording (30 s at 250 Hz, standard 10-20 montage)
# mixed from sources with the scalp maps and time courses of the classes: dipolar brain sources
# (1/f background with alpha or beta bursts), blinks and horizontal eye movements (frontal maps),
# muscle (temporal focal maps, 20-100 Hz bursts), heart (QRS spikes near 1.2 Hz, a broad map), mains
# hum (50 or 60 Hz), single-channel noise; band-passed 1-100 Hz, average reference, decomposed by
# MNE's extended infomax ICA (12-20 components), and turned into the network's inputs by the
# package's own get_iclabel_features and input formatting (as iclabel_label_components does).
# usage: python gen32_iclabel.py PKG_DIR OUT_DIR [CALIB HELD]  (PKG_DIR holds mne_icalabel/ from the
#   unzipped wheel; pip install mne psutil; about 40 s a recording, one core each)
#   -> OUT_DIR/calib/NNNN.npz (40), OUT_DIR/held/NNNN.npz (24): topo, psds, autocorr
import os, sys, warnings

import numpy as np

CHANNELS = ["Fp1", "Fp2", "F7", "F3", "Fz", "F4", "F8", "FC5", "FC1", "FC2", "FC6", "T7", "C3", "Cz",
            "C4", "T8", "CP5", "CP1", "CP2", "CP6", "P7", "P3", "Pz", "P4", "P8", "PO3", "PO4", "O1",
            "Oz", "O2", "AF3", "AF4"]
FS = 250.0
SECONDS = 30


def one_over_f(rng, n, exponent=1.0):
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spec)); f[0] = 1
    return np.fft.irfft(spec / f ** (exponent / 2), n)


def bursts(rng, n, f_lo, f_hi, rate):
    """Band-limited bursts: noise filtered to [f_lo, f_hi] under a slow on/off envelope."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / FS)
    spec[(f < f_lo) | (f > f_hi)] = 0
    x = np.fft.irfft(spec, n)
    env = np.convolve((rng.random(n) < rate / FS).astype(float), np.hanning(int(FS)), "same")
    return x * np.clip(env, 0, 1)


def dipole_map(rng, pos):
    """A smooth dipolar scalp map: two Gaussian lobes of opposite sign around a random point."""
    c = pos[rng.integers(len(pos))] + rng.normal(0, 0.01, 3)
    d = rng.normal(0, 1, 3); d /= np.linalg.norm(d)
    w = rng.uniform(0.03, 0.07)
    lobe = lambda p: np.exp(-np.sum((pos - p) ** 2, 1) / (2 * w ** 2))
    return lobe(c + 0.03 * d) - rng.uniform(0.3, 1.0) * lobe(c - 0.03 * d)


def sources(rng, pos, names):
    n = int(FS * SECONDS)
    t = np.arange(n) / FS
    idx = {c: i for i, c in enumerate(names)}
    maps, series = [], []
    for _ in range(rng.integers(6, 11)):  # brain
        maps.append(dipole_map(rng, pos))
        band = [(8, 12), (15, 25), (4, 7)][rng.integers(3)]
        series.append(one_over_f(rng, n) + 3 * bursts(rng, n, *band, rng.uniform(0.1, 0.5)))
    # blinks: frontal, positive, 0.3 s bumps every 2-6 s
    m = np.zeros(len(names)); m[[idx["Fp1"], idx["Fp2"]]] = 1; m[[idx["AF3"], idx["AF4"]]] = 0.6
    m[[idx["F3"], idx["Fz"], idx["F4"]]] = 0.3
    maps.append(m + rng.normal(0, 0.02, len(names)))
    s = np.zeros(n); k = 0
    while k < n:
        k += int(FS * rng.uniform(2, 6))
        if k < n - 100:
            s[k:k + 75] += np.hanning(75) * rng.uniform(5, 10)
    series.append(s)
    # horizontal eye movements: F7 against F8, steps
    m = np.zeros(len(names)); m[idx["F7"]] = 1; m[idx["F8"]] = -1; m[idx["FC5"]] = 0.4; m[idx["FC6"]] = -0.4
    maps.append(m)
    series.append(np.cumsum(rng.normal(0, 1, n) * (rng.random(n) < 0.5 / FS)) * 3)
    for _ in range(rng.integers(1, 3)):  # muscle: temporal focal, high frequency
        side = rng.choice(["T7", "T8", "FC5", "FC6", "P7", "P8"])
        m = np.exp(-np.sum((pos - pos[idx[side]]) ** 2, 1) / (2 * 0.02 ** 2))
        maps.append(m)
        series.append(bursts(rng, n, 20, 100, rng.uniform(0.2, 0.8)) * 4)
    if rng.random() < 0.7:  # heart
        maps.append(rng.uniform(0.3, 1.0, len(names)) * np.sign(pos[:, 2] - 0.02))
        s = np.zeros(n); hr = rng.uniform(1.0, 1.5); k = int(FS * rng.random())
        while k < n - 20:
            s[k:k + 10] += np.hanning(10) * 4; k += int(FS / hr * rng.uniform(0.95, 1.05))
        series.append(s)
    if rng.random() < 0.7:  # mains hum
        maps.append(rng.uniform(-1, 1, len(names)))
        series.append(np.sin(2 * np.pi * rng.choice([50.0, 60.0]) * t) * rng.uniform(1, 3))
    for _ in range(rng.integers(0, 3)):  # a noisy channel
        m = np.zeros(len(names)); m[rng.integers(len(names))] = 1
        maps.append(m)
        series.append(rng.standard_normal(n) * rng.uniform(2, 5))
    return np.array(maps).T, np.array(series)


def recording(rng, ICA, mne, features, fmt, onnx_fmt):
    info = mne.create_info(CHANNELS, FS, "eeg")
    montage = mne.channels.make_standard_montage("standard_1020")
    pos_all = montage.get_positions()["ch_pos"]
    pos = np.array([pos_all[c] for c in CHANNELS])
    a, s = sources(rng, pos, CHANNELS)
    x = a @ s + rng.normal(0, 0.1, (len(CHANNELS), s.shape[1]))
    raw = mne.io.RawArray(x * 1e-6, info, verbose="error")
    raw.set_montage(montage, verbose="error")
    raw.filter(1.0, 100.0, verbose="error")
    raw.set_eeg_reference("average", verbose="error")
    ica = ICA(n_components=int(rng.integers(12, 21)), method="infomax", fit_params=dict(extended=True),
              random_state=int(rng.integers(1 << 30)), max_iter="auto", verbose="error")
    ica.fit(raw, verbose="error")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        topo, psd, ac = features(raw, ica)
    topo, psd, ac = onnx_fmt(*fmt(topo, psd, ac))
    return {"topo": np.ascontiguousarray(topo), "psds": np.ascontiguousarray(psd),
            "autocorr": np.ascontiguousarray(ac)}


if __name__ == "__main__":
    pkg, out = sys.argv[1:3]
    counts = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (40, 24)
    sys.path.insert(0, pkg)
    import mne
    from mne.preprocessing import ICA
    from mne_icalabel.iclabel.features import get_iclabel_features
    from mne_icalabel.iclabel.network.onnx import _format_input_for_onnx
    from mne_icalabel.iclabel.network.utils import _format_input
    for k, (part, count) in enumerate((("calib", counts[0]), ("held", counts[1]))):
        # A seed per part: the parts can be made in two processes (one per core), e.g.
        # `... 40 0` and `... 0 24`, and are the same as made in one.
        rng = np.random.default_rng([32, k])
        os.makedirs(os.path.join(out, part), exist_ok=True)
        for i in range(count):
            feeds = recording(rng, ICA, mne, get_iclabel_features, _format_input, _format_input_for_onnx)
            np.savez(os.path.join(out, part, "%04d.npz" % i), **feeds)
        print(part, count, flush=True)
