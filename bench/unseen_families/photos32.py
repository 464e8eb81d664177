# Shared by session 32's photo families (gen32_ulfd.py, gen32_seg.py, gen32_ldc.py) and all of its
# scorers (score32_*.py): views of a photo, ONNX Runtime sessions at a given thread count, and the
# interleaved one-thread latency every scorer prints.
import os
import time

import numpy as np


def view(img, whole, rng, size):
    """The photo, or a crop of 60-100% of it, mirrored or not, brightness and contrast jittered by
    up to 25% (drawn from `rng`, a random.Random), resized to `size` (w, h): float32 HWC 0..255."""
    from PIL import Image, ImageEnhance
    if not whole:
        w, h = img.size
        s = rng.uniform(0.6, 1.0)
        cw, ch = int(w * s), int(h * s)
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        img = img.crop((x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.75, 1.25))
        img = ImageEnhance.Contrast(img).enhance(rng.uniform(0.75, 1.25))
    return np.asarray(img.resize(size, Image.BILINEAR), dtype=np.float32)


def chw(x):
    """HWC to a contiguous [1, C, H, W] float32 batch."""
    return np.ascontiguousarray(np.transpose(x, (2, 0, 1))[None]).astype(np.float32)


def session(path, threads=1):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def print_latency(models, feed, runs=1, label=None):
    """Median of 20 rounds at one intra-op thread, every model once per round (interleaved), after
    3 warm-up rounds; `runs` back-to-back runs a round (for models of a few ms). The first model
    is the baseline of the speed-ups; one that does not load is left out."""
    sess = {}
    for m in models:
        try:
            sess[m] = session(m)
        except Exception:  # noqa: BLE001  (the scores already said it does not load)
            pass
    times = {m: [] for m in sess}
    for r in range(23):
        for m, s in sess.items():
            t = time.perf_counter()
            for _ in range(runs):
                s.run(None, feed)
            if r >= 3:
                times[m].append((time.perf_counter() - t) / runs)
    base = np.median(times[models[0]])
    for m in sess:
        med = np.median(times[m])
        print("latency %s: %.3f ms (%.2fx FP32's speed)%s" % (
            os.path.basename(m), med * 1e3, base / med, label or ""))


def loaded(paths, threads=2):
    """(path, session) for each model that loads; one that does not is said as a result."""
    for p in paths:
        try:
            s = session(p, threads=threads)
        except Exception as e:  # noqa: BLE001  (a candidate that does not load is a result)
            print("%s: does not load (%s)" % (os.path.basename(p), str(e).splitlines()[0][:120]))
            continue
        yield p, s
