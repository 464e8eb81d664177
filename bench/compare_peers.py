"""Node counts, wall time and peak RSS of infopt next to onnxsim and onnxslim.

Not a test: prints a table. Needs onnxsim and onnxslim installed in the Python
that runs it (they are not part of the test venv), e.g.

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install onnxsim onnxslim onnxruntime onnx
    /tmp/peers/bin/python bench/compare_peers.py target/release/infopt MODEL.onnx [MODEL.onnx ...] \
        [--input-shape NAME:DIMS ...]

Each tool runs in its own process under /usr/bin/time. Outputs are checked in
ONNX Runtime against the original (max abs difference on seeded inputs).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort


def node_count(path):
    return len(onnx.load(path, load_external_data=False).graph.node)


def timed(cmd):
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name, *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        secs, kb = t.read().split()[-2:]
    return p.returncode, float(secs), int(kb) / 1024, p.stderr[-400:]


def feeds_for(sess, fixed):
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = fixed.get(i.name) or [d if isinstance(d, int) and d > 0 else 2 for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        elif "bool" in i.type:
            feeds[i.name] = np.ones(shape, dtype=bool)
        else:
            feeds[i.name] = rng.integers(0, 2, size=shape).astype(np.int64 if "int64" in i.type else np.int32)
    return feeds


def max_diff(a_path, b_path, fixed):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    a = ort.InferenceSession(a_path, so, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(b_path, so, providers=["CPUExecutionProvider"])
    f = feeds_for(a, fixed)
    ra, rb = a.run(None, f), b.run(None, f)
    return max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
               for x, y in zip(ra, rb))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--input-shape", action="append", default=[])
    a = ap.parse_args()
    fixed = {}
    for s in a.input_shape:
        name, dims = s.rsplit(":", 1)
        fixed[name] = [int(d) for d in dims.split("x")]
    py = sys.executable
    print(f"{'model':<28} {'tool':<9} {'nodes':>6} {'time s':>8} {'RSS MiB':>8} {'max|diff|':>10}")
    for m in a.models:
        size_mb = os.path.getsize(m) / 2**20
        with tempfile.TemporaryDirectory() as d:
            out = {t: os.path.join(d, f"{t}.onnx") for t in ("infopt", "onnxsim", "onnxslim")}
            shape_args_infopt = sum((["--input-shape", s] for s in a.input_shape), [])
            sim_shapes = sum((["--overwrite-input-shape", s] for s in a.input_shape), [])
            slim_shapes = ["--input-shapes", *a.input_shape] if a.input_shape else []
            cmds = {
                "infopt": [a.infopt, "optimize", m, "-o", out["infopt"], "--no-verify", *shape_args_infopt],
                "onnxsim": [py, "-m", "onnxsim", m, out["onnxsim"], *sim_shapes],
                "onnxslim": [py, "-m", "onnxslim", m, out["onnxslim"], *slim_shapes],
            }
            print(f"{os.path.basename(m):<28} {'input':<9} {node_count(m):>6} {'':>8} {size_mb:>8.1f}")
            for tool, cmd in cmds.items():
                rc, secs, mib, err = timed(cmd)
                if rc != 0 or not os.path.exists(out[tool]):
                    print(f"{'':<28} {tool:<9} failed: {err.strip().splitlines()[-1] if err.strip() else rc}")
                    continue
                try:
                    diff = f"{max_diff(m, out[tool], fixed):.2e}"
                except Exception as e:  # a tool that writes a model ORT rejects
                    diff = f"ORT: {str(e)[:40]}"
                print(f"{'':<28} {tool:<9} {node_count(out[tool]):>6} {secs:>8.2f} {mib:>8.1f} {diff:>10}")


if __name__ == "__main__":
    main()
