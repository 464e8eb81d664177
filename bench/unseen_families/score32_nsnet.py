# Task scores and one-thread latency of session 32's NSNet2 denoiser (gen32_nsnet.py makes the data):
#   python score32_nsnet.py PKG_DIR DATA_DIR FP32.onnx CAND.onnx [CAND.onnx ...]
# Each model enhances the 100 held-out noisy clips as the package's NSnet2Enhancer does at 16 kHz
# (gain clipped to [10^(-80/20), 1], times the noisy spectrum, the package's inverse STFT). Scores:
#   SI-SDR of the enhanced clip against the clean speech (dB, mean over clips; the noisy input's
#   and FP32's beside), each candidate's SI-SDR against FP32's enhanced clip (how much of FP32's
#   output it reproduces), the gain masks' cosine, and clips with non-finite outputs.
# Latency: median of 20 runs at one intra-op thread, every model once per round (interleaved),
# on the longest held-out clip, after 3 warm-up rounds.
import glob, os, sys

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from photos32 import loaded, print_latency, session  # noqa: E402

ort.set_default_logger_severity(3)  # old exports list their initializers as inputs: a warning each

from gen32_nsnet import CFG, package_featurelib  # noqa: E402  (imports nothing else: see __main__)

pkg, data, fp32 = sys.argv[1:4]
cands = sys.argv[4:]
featurelib = package_featurelib(pkg)
MINGAIN = 10 ** (CFG["mingain"] / 20)



def si_sdr(est, ref):
    n = min(len(est), len(ref)); est, ref = est[:n], ref[:n]
    a = np.dot(est, ref) / (np.dot(ref, ref) + 1e-20)
    t = a * ref
    return 10 * np.log10(np.sum(t ** 2) / (np.sum((est - t) ** 2) + 1e-20) + 1e-20)


feeds = [dict(np.load(f)) for f in sorted(glob.glob(os.path.join(data, "held", "*.npz")))]
signals = [dict(np.load(f)) for f in sorted(glob.glob(os.path.join(data, "signals", "*.npz")))]


def enhance(sess, feed, noisy):
    gain = sess.run(None, feed)[0][0]
    finite = bool(np.isfinite(gain).all())
    spec = featurelib.calcSpec(noisy.astype(np.float64), CFG)
    out = featurelib.spec2sig(spec * np.clip(np.transpose(gain), MINGAIN, 1.0), CFG)
    return gain, np.asarray(out), finite


ref = session(fp32, threads=2)
ref_runs = [enhance(ref, f, s["noisy"]) for f, s in zip(feeds, signals)]
noisy_sdr = np.mean([si_sdr(s["noisy"], s["clean"]) for s in signals])
fp32_sdr = np.mean([si_sdr(r[1], s["clean"]) for r, s in zip(ref_runs, signals)])
print("held-out clips %d; SI-SDR of the noisy input %.2f dB, FP32 enhanced %.2f dB" % (len(feeds), noisy_sdr, fp32_sdr))
for c, s in loaded(cands):
    sdr, agree, cos, bad = [], [], [], 0
    for f, sig, r in zip(feeds, signals, ref_runs):
        g, out, finite = enhance(s, f, sig["noisy"])
        bad += not finite
        out = np.nan_to_num(out)
        sdr.append(si_sdr(out, sig["clean"])); agree.append(si_sdr(out, r[1]))
        a, b = r[0].ravel().astype(np.float64), np.nan_to_num(g).ravel().astype(np.float64)
        cos.append(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))
    print("%s: SI-SDR %.2f dB (FP32 %.2f, %+.2f), against FP32's output %.1f dB (lowest %.1f), gain cosine mean %.6f lowest %.6f, non-finite %d"
          % (os.path.basename(c), np.mean(sdr), fp32_sdr, np.mean(sdr) - fp32_sdr, np.mean(agree), np.min(agree),
             np.mean(cos), np.min(cos), bad))

# latency, interleaved, one thread, on the longest clip
longest = max(range(len(feeds)), key=lambda i: feeds[i]["input"].shape[1])
print_latency([fp32] + cands, feeds[longest], label=", %d frames" % feeds[longest]["input"].shape[1])
