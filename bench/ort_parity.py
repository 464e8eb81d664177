#!/usr/bin/env python3
"""`infopt optimize --target onnxruntime` against ONNX Runtime's own rewrites,
in node counts (issue 19, item 3).

    /work/venvs/fam/bin/python bench/ort_parity.py MODEL.onnx... \\
        [--infopt target/debug/infopt] [--out bench/results/ort_parity.md] [--int8 MODEL.onnx]

For each model:
  - infopt: `infopt optimize M --target onnxruntime` (verification on, ONNX
    Runtime available through ORT_DYLIB_PATH or the python package); its exit
    code is reported, and on a refusal the node count of `--no-verify` is shown
    with a `*`;
  - ORT extended: the graph ONNX Runtime runs at ORT_ENABLE_EXTENDED, saved
    with `optimized_model_filepath` (CPU provider);
  - ORT transformers optimizer: `onnxruntime.transformers.optimizer.optimize_model`
    (model_type bert, heads and hidden size detected) at opt_level 0 (its own
    fusions only) and 2 (its fusions on top of ORT's extended level);
  - the gap: infopt minus the best of the ORT columns (<= 0 is at or below).
`--int8 M` adds M quantized by `onnxruntime.quantization.quantize_dynamic`
(a pre-quantized model: infopt sees the QDQ/integer ops as given).
`--transformers-python PY` runs the transformers optimizer under another
interpreter (it imports torch; e.g. /work/venvs/fp16-modelopt/bin/python).
Two infopt columns: `--target onnxruntime` as it is (the output loads in any
provider, so no FusedConv), and with `--ep cpu` (the output is for ONNX
Runtime's CPU provider: Conv/Gemm + activation become FusedConv/FusedGemm).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
import onnxruntime as ort


def node_count(path: Path) -> int:
    return len(onnx.load(str(path), load_external_data=False).graph.node)


def ort_extended(src: Path, out: Path) -> int | str:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(out)
    so.log_severity_level = 3
    try:
        ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - a peer failing is a figure
        return "fails: " + str(e).splitlines()[0][:80]
    return node_count(out)


TRANSFORMERS = """
import sys
from onnxruntime.transformers.optimizer import optimize_model
m = optimize_model(sys.argv[1], model_type="bert", num_heads=0, hidden_size=0,
                   opt_level=int(sys.argv[3]), use_gpu=False)
m.save_model_to_file(sys.argv[2])
"""


def ort_transformers(src: Path, out: Path, opt_level: int, python: str) -> int | str:
    p = subprocess.run([python, "-c", TRANSFORMERS, str(src), str(out), str(opt_level)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800)
    if p.returncode != 0:
        err = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        return "fails: " + (err[-1] if err else f"exit {p.returncode}")[:80]
    return node_count(out)


def infopt(binary: str, src: Path, out: Path, extra: list[str]) -> tuple[int | str, int]:
    cmd = [binary, "optimize", str(src), "--target", "onnxruntime", "-o", str(out), *extra]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
    if p.returncode == 0:
        return node_count(out), 0
    q = subprocess.run(cmd + ["--no-verify"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=900)
    if q.returncode == 0:
        return f"{node_count(out)}*", p.returncode
    return "fails", p.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--infopt", default="target/debug/infopt")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--int8", type=Path, action="append", default=[])
    ap.add_argument("--transformers-python", default=sys.executable)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ort_parity_"))
    models = list(args.models)
    for m in args.int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        q = tmp / f"{m.stem}_int8.onnx"
        quantize_dynamic(str(m), str(q), weight_type=QuantType.QInt8)
        models.append(q)
    rows = []
    for m in models:
        name = m.stem
        row = {"model": name, "original": node_count(m)}
        row["infopt"], row["exit"] = infopt(args.infopt, m, tmp / f"{name}.infopt.onnx", [])
        row["infopt_ep_cpu"], row["exit_ep_cpu"] = infopt(args.infopt, m, tmp / f"{name}.infopt_cpu.onnx",
                                                          ["--ep", "cpu"])
        row["ort_extended"] = ort_extended(m, tmp / f"{name}.ortext.onnx")
        py = args.transformers_python
        row["transformers_0"] = ort_transformers(m, tmp / f"{name}.tr0.onnx", 0, py)
        row["transformers_2"] = ort_transformers(m, tmp / f"{name}.tr2.onnx", 2, py)
        peers = [v for k, v in row.items() if k.startswith(("ort_", "transformers_")) and isinstance(v, int)]
        best = min(peers) if peers else None

        def count(v):
            return int(str(v).rstrip("*")) if str(v).rstrip("*").isdigit() else None

        for col, gap in (("infopt", "gap"), ("infopt_ep_cpu", "gap_ep_cpu")):
            mine = count(row[col])
            row[gap] = (mine - best) if (mine is not None and best is not None) else "-"
        rows.append(row)
        print(row, flush=True)
    cols = ["model", "original", "infopt", "exit", "infopt_ep_cpu", "exit_ep_cpu", "ort_extended",
            "transformers_0", "transformers_2", "gap", "gap_ep_cpu"]
    lines = [
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for r in rows:
        lines.append("| " + " | ".join(str(r[c]) for c in cols) + " |")
    above = sum(1 for r in rows if isinstance(r["gap"], int) and r["gap"] > 0)
    above_cpu = sum(1 for r in rows if isinstance(r["gap_ep_cpu"], int) and r["gap_ep_cpu"] > 0)
    lines.append("")
    lines.append(f"infopt above the best ORT column on {above} of {len(rows)} models, "
                 f"{above_cpu} with `--ep cpu` "
                 "(`*`: node count of `--no-verify`, the verified command exited with `exit`).")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(
            "# `--target onnxruntime` against ONNX Runtime's own rewrites (node counts)\n\n"
            f"Command: `{' '.join(sys.argv)}`\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
