#!/usr/bin/env python3
"""Transformer exports in ONNX Runtime: infopt --target onnxruntime against
ONNX Runtime's own transformers optimizer.

    /work/tvenv/bin/python bench/transformer_ort.py MODELS_DIR [--infopt target/debug/infopt]
        [--runs 20] [--seq 128] [--threads 2] [--out bench/results/transformer_ort.md]

MODELS_DIR holds bert_base_op{14,17}.onnx, gpt2_op{14,17}.onnx and vit_base_op{14,17}.onnx
from bench/export_transformers.py.
For each model:
  - `infopt optimize M --target onnxruntime` (verification on, in ORT) -> M.infopt.onnx
  - `python -m onnxruntime.transformers.optimizer --model_type bert|gpt2|vit
    --num_heads 12 --hidden_size 768` -> M.ortopt.onnx
  - node counts of the three files;
  - outputs of the three in ORT (CPU, all graph optimizations on) on the
    same inputs (batch 1, `--seq` tokens with the last eighth padded; ViT a
    224x224 image): max abs difference against the original;
  - latency: `--runs` timed runs of each after 3 warm-ups, interleaved
    (original, infopt, ORT optimizer, repeated) so load changes hit all three
    alike; the median and the spread (p10-p90) are reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

MODEL_TYPES = {"bert": "bert", "gpt2": "gpt2", "vit": "vit"}


def node_count(path: Path) -> int:
    return len(onnx.load(str(path), load_external_data=False).graph.node)


def session(path: Path, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def feeds_for(sess: ort.InferenceSession, seq: int, rng: np.random.Generator) -> dict:
    feeds = {}
    for i in sess.get_inputs():
        if i.name == "pixel_values":
            feeds[i.name] = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        elif i.name == "input_ids":
            feeds[i.name] = rng.integers(0, 30000, (1, seq), dtype=np.int64)
        elif i.name == "attention_mask":
            m = np.ones((1, seq), np.int64)
            m[:, seq - seq // 8:] = 0
            feeds[i.name] = m
        elif i.name == "token_type_ids":
            t = np.zeros((1, seq), np.int64)
            t[:, seq // 2:] = 1
            feeds[i.name] = t
        else:
            raise SystemExit(f"unexpected input {i.name}")
    return feeds


def run(cmd: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    return time.perf_counter() - t


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", type=Path)
    ap.add_argument("--infopt", default="target/debug/infopt")
    ap.add_argument("--names", default="bert_base_op17,bert_base_op14,gpt2_op17,gpt2_op14,vit_base_op17,vit_base_op14")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--infopt-args", default="", help="extra infopt options, e.g. '--upgrade-opset 17'")
    a = ap.parse_args(argv[1:])
    rows = []
    for name in a.names.split(","):
        src = a.models / f"{name}.onnx"
        ours = a.models / f"{name}.infopt.onnx"
        theirs = a.models / f"{name}.ortopt.onnx"
        kind = MODEL_TYPES[name.split("_")[0]]
        t_ours = run([a.infopt, "optimize", str(src), "-o", str(ours), "--target", "onnxruntime",
                      *a.infopt_args.split()])
        t_theirs = run([sys.executable, "-m", "onnxruntime.transformers.optimizer", "--input", str(src),
                        "--output", str(theirs), "--model_type", kind, "--num_heads", "12",
                        "--hidden_size", "768"])
        paths = {"original": src, "infopt": ours, "ort-optimizer": theirs}
        counts = {k: node_count(p) for k, p in paths.items()}
        sessions = {k: session(p, a.threads) for k, p in paths.items()}
        feeds = feeds_for(sessions["original"], a.seq, np.random.default_rng(0))
        outs = {k: s.run(None, feeds) for k, s in sessions.items()}
        diff = {k: max(float(np.max(np.abs(o.astype(np.float64) - r.astype(np.float64))))
                       for o, r in zip(outs[k], outs["original"])) for k in paths}
        times = {k: [] for k in paths}
        for _ in range(3):
            for k, s in sessions.items():
                s.run(None, feeds)
        for _ in range(a.runs):
            for k, s in sessions.items():
                t = time.perf_counter()
                s.run(None, feeds)
                times[k].append((time.perf_counter() - t) * 1000)
        lat = {}
        for k, ts in times.items():
            q = np.percentile(ts, [10, 90])
            lat[k] = (statistics.median(ts), q[0], q[1])
        rows.append((name, counts, diff, lat, t_ours, t_theirs))
        print(name, counts, {k: f"{v:.2e}" for k, v in diff.items()},
              {k: f"{v[0]:.1f}ms" for k, v in lat.items()}, flush=True)
        del sessions
    lines = [
        f"infopt options: --target onnxruntime {a.infopt_args}".rstrip() + "; "
        f"ORT {ort.__version__}, CPU, intra-op threads {a.threads}, batch 1, "
        f"seq {a.seq} (last eighth padded), {a.runs} interleaved runs after 3 warm-ups; "
        "latency median (p10-p90) in ms; max abs = largest output difference against the "
        "original in ORT.",
        "",
        "| model | nodes original | nodes infopt | nodes ORT optimizer | max abs infopt | "
        "max abs ORT opt. | ms original | ms infopt | ms ORT optimizer | time infopt s | time ORT opt. s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c, d, l, to, tt in rows:
        fmt = lambda v: f"{v[0]:.1f} ({v[1]:.1f}-{v[2]:.1f})"  # noqa: E731
        lines.append(
            f"| {name} | {c['original']} | {c['infopt']} | {c['ort-optimizer']} | "
            f"{d['infopt']:.2e} | {d['ort-optimizer']:.2e} | {fmt(l['original'])} | "
            f"{fmt(l['infopt'])} | {fmt(l['ort-optimizer'])} | {to:.1f} | {tt:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
