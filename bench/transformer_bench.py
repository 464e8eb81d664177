"""Node counts, output agreement and ONNX Runtime latency of transformer
exports after infopt (default pipeline, and with --upgrade-opset N), onnxsim
and onnxslim.

Not a test: prints a table. Models from bench/export_transformers.py. Needs
onnx, onnxruntime, onnxsim and onnxslim in the Python that runs it:

    /work/tvenv/bin/python bench/transformer_bench.py INFOPT_BIN MODEL.onnx [...] \
        [--upgrade-opset 20] [--runs 30] [--seq 128]

Each tool's output is written next to nothing permanent (a temporary folder,
deleted after each model: these models are 300-500 MiB). Outputs are compared
with the original's in ORT on the same seeded inputs (largest absolute
difference over all outputs). Latency: ORT CPU, one intra-op thread, graph
optimizations at ORT's default level (ORT fuses much of this itself at load),
batch 1; the original and every tool's output are loaded together and run in
turn (round-robin, 3 warm-up rounds, median of --runs rounds), so load from
other processes on the machine hits them alike.
"""
import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

SHOW = ["LayerNormalization", "Gelu", "RMSNormalization", "ReduceMean", "Erf", "Tanh", "Pow", "Sqrt"]


def feeds_for(sess, seq):
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = []
        for k, d in enumerate(i.shape):
            if isinstance(d, int) and d > 0:
                shape.append(d)
            else:
                shape.append(1 if k == 0 else seq)
        if "float" in i.type:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        elif "mask" in i.name:
            feeds[i.name] = np.ones(shape, dtype=np.int64)
        elif "token_type" in i.name:
            feeds[i.name] = np.zeros(shape, dtype=np.int64)
        else:
            feeds[i.name] = rng.integers(0, 1000, size=shape).astype(np.int64)
    return feeds


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def round_robin_ms(sessions, feeds, runs):
    """Median latency of each session, timed in turn."""
    for _ in range(3):
        for sess in sessions.values():
            sess.run(None, feeds)
    times = {k: [] for k in sessions}
    for _ in range(runs):
        for k, sess in sessions.items():
            t = time.perf_counter()
            sess.run(None, feeds)
            times[k].append((time.perf_counter() - t) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def histogram(path):
    m = onnx.load(path, load_external_data=False)
    return len(m.graph.node), collections.Counter(n.op_type for n in m.graph.node)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--upgrade-opset", type=int, default=20)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    py = sys.executable
    print(f"{'model':<22} {'tool':<16} {'nodes':>6} {'tool s':>7} {'max|diff|':>9} {'ORT ms':>8}  key ops")
    for m in a.models:
        base = os.path.basename(m)
        ref = session(m)
        feeds = feeds_for(ref, a.seq)
        expected = ref.run(None, feeds)
        rows = [("original", *histogram(m), None, None)]
        with tempfile.TemporaryDirectory(dir=os.path.dirname(m)) as d:
            tools = {
                "infopt": [a.infopt, "optimize", m, "-o", f"{d}/infopt.onnx", "--no-verify"],
                f"infopt --up {a.upgrade_opset}": [a.infopt, "optimize", m, "-o", f"{d}/infopt_up.onnx",
                                                   "--no-verify", "--upgrade-opset", str(a.upgrade_opset)],
                "onnxsim": [py, "-m", "onnxsim", m, f"{d}/onnxsim.onnx"],
                "onnxslim": [py, "-m", "onnxslim", m, f"{d}/onnxslim.onnx"],
            }
            sessions = {"original": ref}
            for tool, cmd in tools.items():
                out = cmd[cmd.index("-o") + 1] if "-o" in cmd else cmd[4]
                t = time.perf_counter()
                p = subprocess.run(cmd, capture_output=True, text=True)
                secs = time.perf_counter() - t
                if p.returncode != 0 or not os.path.exists(out):
                    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else str(p.returncode)
                    print(f"{base:<22} {tool:<16} failed: {last[:100]}", flush=True)
                    continue
                n, h = histogram(out)
                try:
                    s = session(out)
                    got = s.run(None, feeds)
                    diff = max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                               for x, y in zip(expected, got))
                    sessions[tool] = s
                    rows.append((tool, n, h, secs, f"{diff:.1e}"))
                except Exception as e:  # a tool that writes a model ORT rejects
                    rows.append((tool, n, h, secs, f"ORT: {str(e)[:30]}"))
            lat = round_robin_ms(sessions, feeds, a.runs)
            for tool, n, h, secs, diff in rows:
                key = " ".join(f"{k}={h[k]}" for k in SHOW if h[k])
                ms = f"{lat[tool]:.1f}" if tool in lat else "-"
                sec_s = f"{secs:.1f}" if secs is not None else ""
                print(f"{base if tool == 'original' else '':<22} {tool:<16} {n:>6} {sec_s:>7} "
                      f"{diff or '':>9} {ms:>8}  {key}", flush=True)
            sessions.clear()

if __name__ == "__main__":
    main()
