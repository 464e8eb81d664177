"""Engine zoo: real TensorRT-RTX engine builds on this machine (no GPU needed).

Not a test: it prints figures and writes a Markdown table. For each model of a zoo of
different families (CNNs, a mobile CNN, an OCR text detector / recognizer / classifier,
BERT-, GPT-2- and ViT-style transformer blocks) and each precision request
    fp32        build-engine MODEL
    fp16        build-engine MODEL --fp16
    fp16+fp32   build-engine MODEL --fp16 --precision OP=fp32 ... (Softmax, Sigmoid, ...)
    int8        build-engine MODEL --int8 --calib-data random:16 --calib-samples 8 --held-out 8
it runs `infopt build-engine --no-verify --runs 0 --json` and records: success, wall time,
peak RSS, kernels, and the realized-precision report (placed / match / mismatch / not
observable, with every mismatched node named). Then, for the fp16 request, it builds the
same emitted ONNX (`--emit-onnx`) with the TensorRT-RTX Python bindings
(`tensorrt_rtx_bindings`, same workspace, profile and detailed profiling) in a fresh
process and compares wall time and peak RSS with `build-engine --no-verify`.

    /work/venvs/trt/bin/python bench/engine_zoo.py [--infopt target/release/infopt]
        [--out bench/results/engine_zoo.md] [--only NAME]

The Python running it needs `tensorrt-rtx-cu13-bindings` and `tensorrt-rtx-cu13-libs`
(1.7.1.116) and `onnx`; the OCR models come from the `rapidocr_onnxruntime` wheel
(`pip install --no-deps rapidocr_onnxruntime==1.4.4`, which ships PaddleOCR's ONNX files).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "models"


def ocr_model(name):
    """A model file of the rapidocr wheel, found without importing it (its imports need cv2)."""
    import importlib.util

    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "models" / name
    return p if p.is_file() else None


# name, family, path, shapes (--shapes or --input-shape values), fp32 overrides for fp16+fp32
ZOO = [
    ("cnn_bn_relu", "CNN (residual, BN)", FIX / "cnn_bn_relu.onnx",
     ["--shapes", "input:1x3x32x32/4x3x32x32/8x3x32x32"], ["GlobalAveragePool=fp32", "Gemm=fp32"]),
    ("resnet_block", "CNN (torch export)", FIX / "exported/resnet_block.onnx", None, ["Add=fp32"]),
    ("mbconv", "mobile CNN (MBConv, SE)", FIX / "quantized/mbconv_fp32.onnx", None, ["Sigmoid=fp32"]),
    ("ppocr_det", "OCR text detector (PP-OCRv4 DB)", ocr_model("ch_PP-OCRv4_det_infer.onnx"),
     ["--shapes", "x:1x3x320x320/1x3x480x480/1x3x640x640"], ["Sigmoid=fp32", "Resize=fp32"]),
    ("ppocr_rec", "OCR recognizer (PP-OCRv4 SVTR)", ocr_model("ch_PP-OCRv4_rec_infer.onnx"),
     ["--shapes", "x:1x3x48x160/4x3x48x320/8x3x48x640"], ["Softmax=fp32", "ReduceMean=fp32"]),
    ("ppocr_cls", "OCR direction classifier", ocr_model("ch_ppocr_mobile_v2.0_cls_infer.onnx"),
     ["--input-shape", "x:8x3x48x192"], ["Softmax=fp32"]),
    ("bert_attention", "BERT encoder (2 layers)", FIX / "bert_attention.onnx",
     ["--shapes", "hidden:1x16x32/4x64x32/8x128x32", "--shapes", "attention_mask:1x16/4x64/8x128"],
     ["Softmax=fp32"]),
    ("bert_tiny", "BERT (torch export, token ids)", FIX / "exported/bert_tiny.onnx", None,
     ["Softmax=fp32"]),
    ("gpt2_attention", "GPT-2 blocks (causal mask)", FIX / "gpt2_attention.onnx",
     ["--shapes", "hidden:1x16x32/4x64x32/8x128x32", "--shapes", "attention_mask:1x16/4x64/8x128"],
     ["Softmax=fp32"]),
    ("gpt2_mlp", "GPT-2 MLP (GELU)", FIX / "gpt2_mlp.onnx", None, ["Tanh=fp32"]),
    ("transformer_encoder", "ViT-style encoder (torch export)", FIX / "exported/transformer_encoder.onnx",
     None, ["Softmax=fp32", "LayerNormalization=fp32"]),
    ("transformer_block", "transformer block (LN, MHA, MLP)", FIX / "transformer_block.onnx",
     ["--shapes", "hidden:1x8x32/2x16x32/4x32x32", "--shapes", "attention_mask:1x8/2x16/4x32"],
     ["Softmax=fp32"]),
]


def static_shapes(path):
    """--input-shape for each dynamic input of a model whose shapes the table leaves out."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    args = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
        if any(d.dim_value <= 0 for d in i.type.tensor_type.shape.dim):
            args += ["--input-shape", f"{i.name}:{'x'.join(map(str, dims))}"]
    return args


def run(cmd, env=None):
    """Runs cmd; returns (returncode, stdout, stderr, wall seconds, peak RSS MiB)."""
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        return code, out.read().decode(), err.read().decode(), wall, usage.ru_maxrss / 1024


PY_BUILD = r"""
import json, sys
import tensorrt_rtx_bindings as trt
onnx_path, engine_path, workspace, profiles = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
class L(trt.ILogger):
    def __init__(s): trt.ILogger.__init__(s)
    def log(s, sev, msg): pass
lg = L()
b = trt.Builder(lg); n = b.create_network(0); p = trt.OnnxParser(n, lg)
if not p.parse_from_file(onnx_path):
    sys.exit("parse failed: " + "; ".join(str(p.get_error(i)) for i in range(p.num_errors)))
c = b.create_builder_config()
c.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
c.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
if profiles:
    pr = b.create_optimization_profile()
    for e in profiles:
        pr.set_shape(e["input"], e["min"], e["opt"], e["max"])
    c.add_optimization_profile(pr)
s = b.build_serialized_network(n, c)
if s is None:
    sys.exit("build failed")
open(engine_path, "wb").write(s)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--infopt", default=str(ROOT / "target/release/infopt"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/engine_zoo.md"))
    ap.add_argument("--only", default=None)
    ap.add_argument("--workspace", default="1G")
    ap.add_argument("--repeat", type=int, default=2, help="runs of the build-engine / bindings comparison")
    args = ap.parse_args()
    import tensorrt_rtx_libs  # noqa: F401

    lib_dir = Path(tensorrt_rtx_libs.__file__).parent
    env = dict(os.environ, TENSORRT_RTX_LIB=str(lib_dir), INFOPT_TRT_GPU="0")
    env.pop("INFOPT_TRT_SHIM", None)
    requests = {
        "fp32": lambda o: [],
        "fp16": lambda o: ["--fp16"],
        "fp16+fp32": lambda o: ["--fp16"] + [a for x in o for a in ("--precision", x)],
        "int8": lambda o: ["--int8", "--calib-data", "random:16", "--calib-samples", "8", "--held-out", "8"],
    }
    rows, py_rows, mismatches = [], [], []
    totals = {"placed": 0, "matched": 0, "mismatched": 0, "not_observable": 0}
    work = Path(tempfile.mkdtemp(prefix="engine_zoo_"))
    for name, family, path, shapes, overrides in ZOO:
        if args.only and name != args.only:
            continue
        if path is None or not Path(path).is_file():
            print(f"{name}: model not available, skipped", flush=True)
            continue
        shape_args = shapes if shapes is not None else static_shapes(path)
        for req, extra in requests.items():
            engine = work / f"{name}.{req}.engine"
            cmd = [args.infopt, "build-engine", str(path), "-o", str(engine), "--workspace", args.workspace,
                   "--no-verify", "--runs", "0", "--json"] + shape_args + extra(overrides)
            code, out, err, wall, rss = run(cmd, env)
            row = {"model": name, "family": family, "request": req, "ok": code == 0, "wall_s": wall,
                   "rss_mib": rss}
            if code != 0:
                row["error"] = next((l for l in err.splitlines() if l.startswith("error")), err[-300:])
            else:
                r = json.loads(out)
                e = r["engine"]
                rp = e.get("realized_precision") or {}
                row.update(kernels=len(e["layers"]), engine_bytes=e["bytes"], build_ms=e["build_time_ms"],
                           **{k: rp.get(k, 0) for k in totals})
                for k in totals:
                    totals[k] += rp.get(k, 0)
                for n in rp.get("nodes", []):
                    if n["outcome"] == "mismatch":
                        mismatches.append((name, req, n["node"], n["op"], n["requested"], n["realized"],
                                           ", ".join(n["kernels"])))
            rows.append(row)
            engine.unlink(missing_ok=True)
            print(json.dumps(row), flush=True)
        # The same emitted ONNX built with the Python bindings, next to build-engine --no-verify.
        onnx_out = work / f"{name}.fp16.trt.onnx"
        code, out, err, _, _ = run([args.infopt, "build-engine", str(path), "--emit-onnx", str(onnx_out),
                                    "--fp16", "--no-verify", "--json", "--workspace", args.workspace]
                                   + shape_args, env)
        if code != 0:
            print(f"{name}: --emit-onnx failed: {err.strip()[-300:]}", flush=True)
            continue
        profiles = json.loads(out)["settings"]["profiles"]
        ws = 1 << 30
        for attempt in range(args.repeat):
            e1 = work / f"{name}.cmp.infopt.engine"
            c1, _, err1, w1, r1 = run([args.infopt, "build-engine", str(path), "-o", str(e1), "--fp16",
                                       "--no-verify", "--runs", "0", "--workspace", args.workspace]
                                      + shape_args, env)
            e2 = work / f"{name}.cmp.py.engine"
            c2, _, err2, w2, r2 = run([sys.executable, "-c", PY_BUILD, str(onnx_out), str(e2), str(ws),
                                       json.dumps(profiles)], env)
            same = c1 == 0 and c2 == 0 and e1.read_bytes() == e2.read_bytes()
            infopt_build_s = None
            if c1 == 0:
                # The TensorRT part of build-engine's time (the shim's build call).
                rep = json.loads(run([args.infopt, "build-engine", str(path), "-o", str(e1), "--fp16", "--no-verify",
                                      "--runs", "0", "--json", "--workspace", args.workspace] + shape_args, env)[1])
                infopt_build_s = rep["engine"]["build_time_ms"] / 1e3
            py_rows.append({"model": name, "run": attempt, "infopt_s": w1, "python_s": w2, "infopt_rss": r1,
                            "infopt_build_s": infopt_build_s,
                            "python_rss": r2, "same_bytes": same, "ok": c1 == 0 and c2 == 0,
                            "err": (err1 + err2).strip()[-200:] if c1 or c2 else ""})
            e1.unlink(missing_ok=True)
            e2.unlink(missing_ok=True)
            print(json.dumps(py_rows[-1]), flush=True)
    write_md(Path(args.out), rows, py_rows, mismatches, totals, args)


def write_md(out, rows, py_rows, mismatches, totals, args):
    ok = sum(r["ok"] for r in rows)
    seen = totals["matched"] + totals["mismatched"]
    rate = totals["matched"] / seen if seen else 1.0
    lines = ["# Engine zoo: TensorRT-RTX builds on a CPU-only machine", "",
             "Produced by `bench/engine_zoo.py` (TensorRT-RTX 1.7.1.116 from PyPI, no GPU). "
             "Realized precision per placed ONNX node against the request; timings are wall time of "
             "one process.", "",
             f"Builds: {ok} of {len(rows)} succeeded. Placed nodes: {totals['placed']}; match "
             f"{totals['matched']}, mismatch {totals['mismatched']}, not observable {totals['not_observable']}; "
             f"realized == requested on {rate * 100:.2f}% of the observable placed nodes "
             f"({totals['matched']}/{seen}).", "",
             "| model | family | request | ok | kernels | placed | match | mismatch | not obs. | wall s | peak RSS MiB | engine KB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["ok"]:
            lines.append(f"| {r['model']} | {r['family']} | {r['request']} | yes | {r['kernels']} | {r['placed']} | "
                         f"{r['matched']} | {r['mismatched']} | {r['not_observable']} | {r['wall_s']:.2f} | "
                         f"{r['rss_mib']:.0f} | {r['engine_bytes'] / 1024:.0f} |")
        else:
            lines.append(f"| {r['model']} | {r['family']} | {r['request']} | **no** | | | | | | {r['wall_s']:.2f} | "
                         f"{r['rss_mib']:.0f} | {r['error'][:160]} |")
    lines += ["", "## Mismatches", ""]
    if mismatches:
        lines += ["| model | request | node | op | requested | realized | kernel |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {' | '.join(m)} |" for m in mismatches]
    else:
        lines.append("None.")
    lines += ["", "## build-engine --no-verify vs the TensorRT-RTX Python bindings (fp16, same emitted ONNX)", "",
              f"infopt binary: `{args.infopt}`. `infopt s` is the whole command (load, passes, save, build); "
              "`of it, TensorRT s` the shim's build call in a separate identical run; `python s` a fresh Python "
              "process importing the bindings, parsing the emitted file and building.", "",
              "| model | run | infopt s | of it, TensorRT s | python s | ratio | infopt RSS MiB | python RSS MiB | same engine bytes |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p in py_rows:
        ratio = p["infopt_s"] / p["python_s"] if p["python_s"] else float("nan")
        tb = "" if p.get("infopt_build_s") is None else f"{p['infopt_build_s']:.2f}"
        lines.append(f"| {p['model']} | {p['run']} | {p['infopt_s']:.2f} | {tb} | {p['python_s']:.2f} | {ratio:.2f} | "
                     f"{p['infopt_rss']:.0f} | {p['python_rss']:.0f} | {p['same_bytes']} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
