#!/usr/bin/env python3
"""The table of bench/gpu_bench.sh, from the JSON it left in WORK_DIR.

    python3 bench/gpu_table.py WORK_DIR [--variants "opt fp16 fp16p int8"]

Per model, batch and variant: median latency (ms) and throughput
(samples/s = batch / median) of `infopt bench --backend ort --ep cuda` (all
variants of a model and batch interleaved in one process), speed-up over FP32
(FP32 median / variant median, same process), nodes and Casts of the file,
and the agreement with FP32 on the GPU at the large batch (`infopt compare`:
the lowest cosine over the outputs, and the largest |difference| over the
largest |FP32 output|). `unverified`: the variant's `optimize` verification
failed and it was written with --no-verify. `pair`: the variants did not
load together, so this one was timed against FP32 alone. Rows `... nhwc`
come from a separate process with `--ep-option cuda:prefer_nhwc=1`, rows
`... heap` from one with glibc malloc kept off mmap (MALLOC_MMAP_MAX_=0),
rows `... notf32` from one with `--ep-option cuda:use_tf32=0`, rows `... graph`
from one with `--ep-option cuda:enable_cuda_graph=1` (`... graphopt`: the
original could not be captured, so the baseline is the optimized FP32), rows
`... graphnhwc` with `cuda:prefer_nhwc=1` as well:
their speed-up is over that process's FP32, and the note compares with the
main run's FP32.
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


def medians(bench) -> dict[str, float]:
    return {Path(m["path"]).stem: m["latency"]["median_ms"] for m in bench["models"]} if bench else {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--variants", default="opt fp16 fp16p int8")
    a = ap.parse_args()
    variants = a.variants.split()
    rows = []
    for line in (a.work / "models.txt").read_text().splitlines():
        name, _b1, _bn, big = line.split("|")
        d = a.work / "models" / name
        for b in ("1", big):
            main_run = medians(load(d / f"bench_b{b}.json"))
            runs: dict[str, tuple[float, float, str]] = {}  # variant -> (median, fp32 median, note)
            if main_run:
                for v, med in main_run.items():
                    runs[v] = (med, main_run.get("fp32", float("nan")), "")
            else:
                for v in variants:
                    pair = medians(load(d / f"bench_b{b}_{v}.json"))
                    if v in pair:
                        runs[v] = (pair[v], pair.get("fp32", float("nan")), "pair")
                        runs.setdefault("fp32", (pair["fp32"], pair["fp32"], "pair"))
            extras = [(tag, medians(load(d / f"bench_{tag}_b{b}.json")) if b == big else {})
                      for tag in ("nhwc", "h2h", "heap", "notf32", "graph", "graphopt", "graphnhwc", "graphnhwcopt")]
            if not runs and not any(e for _, e in extras):
                rows.append(f"| {name} | {b} | — | no timing (see bench_b{b}*.log) | | | | | | | |")
                continue
            for v in ["fp32"] + variants:
                if v not in runs:
                    if v != "fp32":
                        err = (d / f"bench_b{b}_{v}.log")
                        why = "did not load on the GPU" if err.exists() else "not made"
                        rows.append(f"| {name} | {b} | {v} | — | — | — | | | | | {why} |")
                    continue
                med, base, note = runs[v]
                thr = int(b) * 1000.0 / med
                sp = base / med
                if v == "fp32":
                    nodes, casts, cos, err = "", "", "1", "0"
                else:
                    nodes, casts = op_counts(load(d / f"{v}.report.json"))
                    cos, err = agreement(load(d / f"compare_{v}.json")) if b == big else ("", "")
                notes = [n for n in [note, "unverified" if (d / f"{v}.unverified").exists() else ""] if n]
                rows.append(f"| {name} | {b} | {v} | {med:.3f} | {thr:.0f} | {sp:.2f}x | {nodes} | {casts} | "
                            f"{cos} | {err} | {', '.join(notes)} |")
            nchw32 = runs.get("fp32", (float("nan"),))[0]
            for tag, extra in extras:
                for v, med in extra.items():
                    # graphopt rows have no FP32 original: their baseline is opt.
                    sp = extra.get("fp32", extra.get("opt", float("nan"))) / med
                    rows.append(f"| {name} | {b} | {v} {tag} | {med:.3f} | {int(b) * 1000.0 / med:.0f} | {sp:.2f}x "
                                f"| | | | | vs FP32 of the main run {nchw32 / med:.2f}x |")
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
