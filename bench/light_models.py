"""The nine `light` models of the onnx wheel through infopt's default command,
onnxsim and onnxslim: compute nodes (Constant / ConstantOfShape aside), output
bytes and wall time of each tool's default command. Not a test: prints a
Markdown table (and `--json FILE` writes the figures). The committed figures
are in bench/results/light_models.md; tests/interop/test_light_models.py
asserts infopt against them without running the peers.

The peers are not part of the test venv; install them apart:

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install onnxsim onnxslim onnx onnxruntime
    ORT_DYLIB_PATH=$(ls $PWD/.venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so* | head -n1) \
      .venv/bin/python bench/light_models.py --infopt target/release/infopt --peers-bin /tmp/peers/bin

Each command runs once, in its own process, on a copy of the model in a
fresh folder; wall time is the whole process (load, work, verification,
save).
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import onnx

# Not computation: the placeholder weights of these models are made by
# ConstantOfShape nodes, and Constant nodes are initializers written as nodes.
NOT_COMPUTE = {"Constant", "ConstantOfShape"}


def light_dir():
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def compute_nodes(path):
    g = onnx.load(path, load_external_data=False).graph
    return sum(1 for n in g.node if n.op_type not in NOT_COMPUTE)


def run_tool(cmd, out):
    start = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    if p.returncode != 0 or not os.path.exists(out):
        return {"rc": p.returncode, "wall_s": round(wall, 2), "error": (p.stderr or p.stdout)[-300:]}
    return {
        "rc": 0,
        "wall_s": round(wall, 2),
        "nodes": compute_nodes(out),
        "bytes": os.path.getsize(out),
        "stdout": p.stdout,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--infopt", required=True, help="the infopt binary")
    ap.add_argument("--peers-bin", help="folder with the onnxsim and onnxslim commands (omit: infopt only)")
    ap.add_argument("--only", help="comma-separated model names (e.g. resnet50,vgg19)")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()

    models = sorted(glob.glob(os.path.join(light_dir(), "light_*.onnx")))
    if args.only:
        wanted = set(args.only.split(","))
        models = [m for m in models if os.path.basename(m)[6:-5] in wanted]
    rows = []
    for src in models:
        name = os.path.basename(src)[6:-5]
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "model.onnx")
            shutil.copy(src, model)
            row = {"model": name, "input_nodes": compute_nodes(model), "input_bytes": os.path.getsize(model)}
            out = os.path.join(d, "infopt.onnx")
            r = run_tool([args.infopt, "optimize", model, "-o", out, "--json"], out)
            if r["rc"] == 0:
                report = json.loads(r.pop("stdout"))
                v = report.get("verification") or {}
                r["verified"] = (v.get("backend") or {}).get("reference_runtime") if v.get("passed") else None
            row["infopt"] = r
            if args.peers_bin:
                for tool in ("onnxsim", "onnxslim"):
                    out = os.path.join(d, f"{tool}.onnx")
                    r = run_tool([os.path.join(args.peers_bin, tool), model, out], out)
                    r.pop("stdout", None)
                    row[tool] = r
        rows.append(row)
        print(f"{name}: done", file=sys.stderr)

    tools = ["infopt"] + (["onnxsim", "onnxslim"] if args.peers_bin else [])

    def cell(r, key):
        return str(r[key]) if r.get("rc") == 0 else f"exit {r.get('rc')}"

    head = ["model", "input nodes", "input bytes"]
    for key in ("nodes", "bytes", "wall_s"):
        head += [f"{t} {key.replace('_s', ' s')}" for t in tools]
    head.append("verified in")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        cells = [row["model"], str(row["input_nodes"]), str(row["input_bytes"])]
        for key in ("nodes", "bytes", "wall_s"):
            cells += [cell(row[t], key) for t in tools]
        cells.append(str(row["infopt"].get("verified")))
        print("| " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
