"""ONNX Runtime profiles (INFOPT_ORT_PROFILE_DIR) as a table of time per op type.

    python bench/ort_profile_table.py PROFILE_ROOT [--skip-runs N]

PROFILE_ROOT holds one folder per model/variant/tag, named
MODEL_bBATCH_VARIANT_TAG (bench/gpu_profile.sh); each folder holds the
profiles of the sessions of one `infopt bench` process, the largest being the
timed session. Per folder: the time of each op type per run (the node events
inside each `model_run` after the first N runs, which are warm-up and cuDNN's
algorithm search), then per model and tag a table of the op types with the
first variant's time, each other variant's time and their ratio.
Only the standard library: it runs where the GPU is.
"""

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

NAME = re.compile(r"^(?P<model>.+)_b(?P<batch>\d+)_(?P<variant>[^_]+)_(?P<tag>[^_]+)$")


def op_times(folder: Path, skip_runs: int):
    """{op type: ms per run}, run count and the median run's ms, of the timed session."""
    files = sorted(folder.glob("*.json"), key=lambda f: f.stat().st_size)
    if not files:
        return None
    events = json.loads(files[-1].read_text())
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )[skip_runs:]
    if not runs:
        return None
    per_run = defaultdict(lambda: [0.0] * len(runs))
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        ts = e["ts"]
        for i, (start, end) in enumerate(runs):
            if start <= ts <= end:
                op = e.get("args", {}).get("op_name", "?")
                per_run[op][i] += e["dur"] / 1000.0
                break
    ops = {op: statistics.median(v) for op, v in per_run.items()}
    run_ms = statistics.median((end - start) / 1000.0 for start, end in runs)
    return ops, len(runs), run_ms


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("--skip-runs", type=int, default=3)
    args = ap.parse_args()
    groups = defaultdict(dict)
    for folder in sorted(p for p in args.root.iterdir() if p.is_dir()):
        m = NAME.match(folder.name)
        if not m:
            continue
        got = op_times(folder, args.skip_runs)
        if got is None:
            print(f"<!-- {folder.name}: no profile -->")
            continue
        groups[(m["model"], m["batch"], m["tag"])][m["variant"]] = got
    print("# GPU time per op type (ONNX Runtime profile, CUDA_LAUNCH_BLOCKING=1)\n")
    for (model, batch, tag), variants in sorted(groups.items()):
        names = list(variants)
        base = names[0]
        print(f"## {model}, batch {batch}, {tag}\n")
        head = [f"{n} ms/run" for n in names] + [f"{n}/{base}" for n in names[1:]]
        print("| op type | " + " | ".join(head) + " |")
        print("|---|" + "---|" * len(head))
        ops = sorted(
            {op for v in variants.values() for op in v[0]},
            key=lambda op: -max(v[0].get(op, 0.0) for v in variants.values()),
        )
        for op in ops:
            cells = [f"{variants[n][0].get(op, 0.0):.3f}" for n in names]
            b = variants[base][0].get(op, 0.0)
            for n in names[1:]:
                x = variants[n][0].get(op, 0.0)
                cells.append(f"{x / b:.2f}" if b > 0 else "-")
            print(f"| {op} | " + " | ".join(cells) + " |")
        totals = [sum(variants[n][0].values()) for n in names]
        cells = [f"{t:.3f}" for t in totals] + [
            f"{t / totals[0]:.2f}" if totals[0] > 0 else "-" for t in totals[1:]
        ]
        print("| **all nodes** | " + " | ".join(cells) + " |")
        runs = [f"{variants[n][2]:.3f}" for n in names]
        print(f"\nmedian run (synchronised launches): {', '.join(f'{n} {r} ms' for n, r in zip(names, runs))}\n")
    timing(args.root)
    return 0


def timing(root: Path) -> None:
    """The plain timing rows (time_MODEL_bB_TAG.json, `infopt bench --json`)."""
    rows = []
    for f in sorted(root.glob("time_*.json")):
        try:
            report = json.loads(f.read_text())
        except ValueError:
            rows.append(f"| {f.stem[5:]} | no timing (see {f.stem}.log) | | |")
            continue
        models = report.get("models", [])
        if not models:
            continue
        base = models[0]["latency"]["median_ms"]
        for m in models:
            ms = m["latency"]["median_ms"]
            rows.append(f"| {f.stem[5:]} | {Path(m['path']).stem} | {ms:.3f} | {base / ms:.2f}x |")
    if rows:
        print("## Plain timing (device-resident, 50 runs, interleaved)\n")
        print("| model, batch, options | variant | median ms | speed-up vs fp32 |")
        print("|---|---|---|---|")
        print("\n".join(rows))


if __name__ == "__main__":
    sys.exit(main())
