#!/usr/bin/env python3
"""The table of bench/gpu_bench.sh, from the JSON it left in WORK_DIR.

    python3 bench/gpu_table.py WORK_DIR [--variants "opt fp16 fp16p int8"]

Per model, batch and variant: median latency (ms) and throughput
(samples/s = batch x runs/s at the median) of `infopt bench --backend ort
--ep cuda` (all variants of a model and batch interleaved in one process),
speed-up over FP32 (FP32 median / variant median), nodes and Casts of the
file, and the agreement with FP32 on the GPU at the large batch
(`infopt compare`: the lowest cosine over the outputs and the largest
|difference| over the largest |FP32 output|). `unverified` marks a variant
whose `optimize` verification failed (it was written with --no-verify).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def op_counts(report) -> tuple[str, str]:
    if not report or not report.get("output"):
        return "", ""
    casts = sum(o["after"] for o in report.get("ops", []) if o["op"] == "Cast")
    return str(report["output"]["nodes"]), str(casts)


def agreement(cmp) -> tuple[str, str]:
    if not cmp or not cmp.get("outputs"):
        return "—", "—"
    cos = min(o["cosine"] for o in cmp["outputs"])
    scaled = max(o["max_abs"] / o["scale"] if o.get("scale") else o["max_abs"] for o in cmp["outputs"])
    return f"{cos:.6f}", f"{scaled:.2e}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--variants", default="opt fp16 fp16p int8")
    a = ap.parse_args()
    variants = a.variants.split()
    rows = []
    lines = (a.work / "models.txt").read_text().splitlines()
    for line in lines:
        name, _b1, _bn, big = line.split("|")
        d = a.work / "models" / name
        for b in ("1", big):
            bench = load(d / f"bench_b{b}.json")
            if not bench:
                rows.append(f"| {name} | {b} | — | bench failed (see bench_b{b}.log) | | | | | | |")
                continue
            by_path = {Path(m["path"]).stem: m for m in bench["models"]}
            base = by_path.get("fp32")
            for v in ["fp32"] + variants:
                m = by_path.get(v)
                if m is None:
                    if v != "fp32":
                        rows.append(f"| {name} | {b} | {v} | — | — | — | | | | not made |")
                    continue
                med = m["latency"]["median_ms"]
                thr = int(b) * 1000.0 / med
                sp = base["latency"]["median_ms"] / med if base else float("nan")
                if v == "fp32":
                    nodes, casts = "", ""
                    cos, err = "1", "0"
                else:
                    nodes, casts = op_counts(load(d / f"{v}.report.json"))
                    cos, err = agreement(load(d / f"compare_{v}.json")) if b == big else ("", "")
                note = "unverified" if (d / f"{v}.unverified").exists() else ""
                rows.append(f"| {name} | {b} | {v} | {med:.3f} | {thr:.0f} | {sp:.2f}x | {nodes} | {casts} | "
                            f"{cos} | {err} | {note} |")
    print("| model | batch | variant | median ms | samples/s | speed-up vs FP32 | nodes | Casts | "
          "cosine vs FP32 (GPU) | max abs diff / max abs | note |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)
    cpu = load(a.work / "models" / "resnet50" / "bench_cpu_b1.json")
    gpu = load(a.work / "models" / "resnet50" / "bench_b1.json")
    if cpu and gpu:
        c = cpu["models"][0]["latency"]["median_ms"]
        g = gpu["models"][0]["latency"]["median_ms"]
        print(f"\nresnet50 FP32 batch 1: CPU EP {c:.2f} ms, CUDA EP {g:.2f} ms ({c / g:.0f}x)")


if __name__ == "__main__":
    main()
