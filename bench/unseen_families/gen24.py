# Session 24's unseen families (run23.sh runs infopt with MODELS_DIR/NAME.onnx, score24.py scores);
# real weights from PyPI:
#   smartturn: pipecat-ai 1.14.0 pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx (Smart
#              Turn v3.2: a Whisper-tiny-style encoder + attention pooling + classifier, shipped
#              already INT8 by onnxruntime.quantization (QDQ, opset 18)), input_features float32
#              [1,80,800]: the package's own compute_whisper_log_mel_features of 8 s at 16 kHz,
#              left-padded as LocalSmartTurnAnalyzerV3 pads it, of synthetic speech (voiced
#              harmonic syllables with moving formants, fricative noise bursts, pitch contours
#              falling at a finished turn or level/rising at a cut-off one, then 0.1-1.5 s of room
#              noise), half of them cut mid-syllable
# usage: python gen24.py OUT_DIR UNPACKED
#   UNPACKED holds pipecat/ (the unzipped wheel)
#   -> OUT_DIR/smartturn/{calib/0000..0063,held/0000..0099}.npz
import os, sys
import numpy as np

out, U = sys.argv[1:3]
N = 164
SR = 16000


def save(kind, i, **kw):
    part, j = ("calib", i) if i < 64 else ("held", i - 64)
    d = f"{out}/{kind}/{part}"
    os.makedirs(d, exist_ok=True)
    np.savez(f"{d}/{j:04d}.npz", **kw)


def syllable(rng, f0_start, f0_end, dur):
    """A voiced syllable: a harmonic series on a gliding pitch, shaped by two moving formants."""
    n = int(dur * SR)
    t = np.arange(n) / SR
    f0 = np.linspace(f0_start, f0_end, n)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    f1 = np.linspace(rng.uniform(300, 800), rng.uniform(300, 800), n)
    f2 = np.linspace(rng.uniform(900, 2500), rng.uniform(900, 2500), n)
    x = np.zeros(n)
    for h in range(1, 30):
        fh = h * f0
        gain = np.exp(-((fh - f1) / 150) ** 2) + 0.6 * np.exp(-((fh - f2) / 250) ** 2) + 0.02
        x += gain * np.sin(h * phase) * (fh < SR / 2)
    env = np.minimum(1, np.minimum(t / 0.02, (dur - t) / 0.03).clip(0))
    return x * env


def utterance(rng, finished):
    parts = []
    base = rng.uniform(90, 240)
    for k in range(rng.integers(6, 24)):
        last = k == 0
        dur = rng.uniform(0.08, 0.3)
        f0 = base * rng.uniform(0.9, 1.15)
        if rng.random() < 0.25:  # a fricative
            parts.append(rng.standard_normal(int(rng.uniform(0.04, 0.12) * SR)) * 0.15)
        parts.append(syllable(rng, f0, f0 * rng.uniform(0.95, 1.05), dur))
        if rng.random() < 0.3:
            parts.append(np.zeros(int(rng.uniform(0.03, 0.25) * SR)))
        del last
    # The turn's last syllable: falling pitch when finished, level or rising when cut off.
    fall = rng.uniform(0.6, 0.8) if finished else rng.uniform(1.0, 1.3)
    last = syllable(rng, base, base * fall, rng.uniform(0.2, 0.45))
    if not finished:
        last = last[: int(len(last) * rng.uniform(0.3, 0.7))]
    parts.append(last)
    x = np.concatenate(parts)
    x = x / (np.abs(x).max() + 1e-9) * rng.uniform(0.2, 0.9)
    tail = rng.uniform(0.1, 1.5) if finished else rng.uniform(0.0, 0.15)
    room = 0.003 * rng.standard_normal(len(x) + int(tail * SR))
    room[: len(x)] += x
    return room.astype(np.float32)


def gen_smartturn():
    sys.path.insert(0, U)
    from pipecat.audio.turn.smart_turn._whisper_features import compute_whisper_log_mel_features
    rng = np.random.default_rng(24)
    for i in range(N):
        a = utterance(rng, finished=bool(i % 2))
        a = a[-8 * SR:]
        a = np.pad(a, (8 * SR - len(a), 0))
        f = compute_whisper_log_mel_features(a, do_normalize=True)
        save("smartturn", i, input_features=f[None].astype(np.float32))


gen_smartturn()
