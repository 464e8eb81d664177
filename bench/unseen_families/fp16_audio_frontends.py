"""Audio front ends exported to ONNX (onnx-asr's preprocessors: Kaldi fbank,
NeMo, GigaAM, Whisper and wespeaker log-mel, polyphase resamplers), run
through `infopt optimize` as typed, plain and `--fp16` with and without
`--inputs`, and judged on audio a user has: harmonic syllables with pauses
at levels from -6 to -70 dBFS over a room's noise, and a tone, digital
silence and faint noise at full scale and at -60 dB.

    python bench/unseen_families/fp16_audio_frontends.py INFOPT_BIN MODEL_DIR [--work DIR]

MODEL_DIR holds the `.onnx` files of `onnx_asr/preprocessors/data/` (from
`pip download --no-deps onnx-asr`, unzipped). Each model takes
`waveforms [batch, N]` and `waveforms_lens [batch]`. Prints a Markdown
table: exit codes and the lowest output cosine against the float32 model
in ONNX Runtime over the held-out clips, per variant.
"""
import argparse
import glob
import os
import subprocess
import time

import numpy as np
import onnxruntime as ort

ort.set_default_logger_severity(3)
SR = 16000


def clip(rng, seconds=1.0):
    """One clip: harmonic syllables with an envelope, a pause, faint noise."""
    t = np.arange(int(SR * seconds)) / SR
    f0 = rng.uniform(90, 300)
    voiced = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6)) / k for k in range(1, 6))
    envelope = (np.sin(2 * np.pi * rng.uniform(1, 4) * t) > rng.uniform(-0.3, 0.6)).astype(float)
    x = voiced * envelope
    x[int(0.6 * t.size):int(0.8 * t.size)] = 0.0  # a pause
    x = x / (np.abs(x).max() + 1e-9) * 10 ** rng.uniform(-3.5, -0.3)  # -70 .. -6 dBFS
    x = x + 10 ** rng.uniform(-6, -3.5) * rng.standard_normal(t.size)  # the room
    return x.astype(np.float32)


def tone(rng, level, seconds=2.0):
    """A 220 Hz tone, a pause of digital silence, then faint noise."""
    t = np.arange(int(SR * seconds)) / SR
    x = 0.3 * np.sin(2 * np.pi * 220 * t) * (t < 0.7) + 0.01 * rng.standard_normal(t.size) * (t > 1.0)
    x[int(0.7 * SR):int(1.0 * SR)] = 0.0
    return (x * level).astype(np.float32)


def feeds(x):
    return {"waveforms": x[None], "waveforms_lens": np.array([x.size], np.int64)}


def lowest_cosine(reference, candidate, clips):
    a_s = ort.InferenceSession(reference, providers=["CPUExecutionProvider"])
    b_s = ort.InferenceSession(candidate, providers=["CPUExecutionProvider"])
    worst = 1.0
    for x in clips:
        a = a_s.run(None, feeds(x))[0].astype(np.float64).ravel()
        b = b_s.run(None, feeds(x))[0].astype(np.float64).ravel()
        if not np.isfinite(b).all():
            return float("nan")
        cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30)
        worst = min(worst, cos)
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("models")
    ap.add_argument("--work", default="/tmp/fp16_audio")
    ap.add_argument("--clips", type=int, default=12)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(27)
    user = os.path.join(args.work, "user.npz")
    np.savez(user, **feeds(clip(rng)))
    held_out = [clip(rng) for _ in range(args.clips)] + [tone(rng, 1.0), tone(rng, 1e-3)]
    print("| model | optimize | --fp16 (generated inputs) | --fp16 --inputs | lowest cosine: plain / fp16 / fp16 with inputs |")
    print("|---|---|---|---|---|")
    for model in sorted(glob.glob(os.path.join(args.models, "*.onnx"))):
        name = os.path.basename(model)[:-5]
        cells, cosines = [], []
        for tag, extra in (("plain", []), ("fp16", ["--fp16"]), ("fp16in", ["--fp16", "--inputs", user])):
            out = os.path.join(args.work, f"{name}.{tag}.onnx")
            if os.path.exists(out):
                os.remove(out)
            start = time.time()
            p = subprocess.run([args.infopt, "optimize", model, "-o", out, *extra],
                               capture_output=True, text=True)
            cells.append(f"exit {p.returncode}, {time.time() - start:.2f} s")
            cosines.append(f"{lowest_cosine(model, out, held_out):.6f}" if p.returncode == 0 else "-")
        print(f"| {name} | {cells[0]} | {cells[1]} | {cells[2]} | {' / '.join(cosines)} |")


if __name__ == "__main__":
    main()
