"""What the Python API costs over the command, on a ~100 MB model.

    python bench/python_overhead.py [--runs 3] [--dir /tmp/infopt-overhead] [--binary PATH]

Run it with the Python of a venv where the wheel is installed (`pip install
dist/*.whl onnx`): the command is that wheel's `infopt` script, so both sides run the
same native build. Times, median of --runs:
  command       `infopt optimize big.onnx -o out.onnx` (a process: Python start + the job)
  binary        with --binary PATH: the same command as a native executable of the same
                build (target/debug/infopt or target/release/infopt): no Python at all
  api(path)     `infopt.optimize("big.onnx", "out.onnx")` in this process
  api(proto)    `infopt.optimize(model_proto)`: the ModelProto in and out, with its
                parts timed apart (SerializeToString + write, the job, read + parse)
  per call      what the API itself adds to a call: keywords to JSON, the options built
                from them (a call refused at its keywords, so no model work), median of
                200 calls
The model: an MLP of float32 MatMul+Add+Relu layers, 2048 wide, 6 layers (~100 MB),
written once with a fixed seed.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import infopt

WIDTH = 2048
LAYERS = 6


def make_model(path: Path) -> None:
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for i in range(LAYERS):
        w = (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)
        b = np.zeros(WIDTH, np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
            # An Identity per layer gives the default pipeline something to remove.
            helper.make_node("Identity", [f"a{i}"], [f"i{i}"], name=f"identity{i}"),
            helper.make_node("Relu", [f"i{i}"], [f"r{i}"], name=f"relu{i}"),
        ]
        x = f"r{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, WIDTH])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/infopt-overhead")
    ap.add_argument("--binary", help="the native infopt executable of the same build")
    a = ap.parse_args()
    folder = Path(a.dir)
    folder.mkdir(parents=True, exist_ok=True)
    model_path = folder / "big.onnx"
    if not model_path.exists():
        make_model(model_path)
    size = model_path.stat().st_size
    script = Path(sys.executable).parent / "infopt"
    out = folder / "out.onnx"

    command, binary, api_path, api_proto = [], [], [], []
    serialize, job, readback = [], [], []
    proto = onnx.load(str(model_path))
    for _ in range(a.runs):
        command.append(timed(lambda: subprocess.run(
            [str(script), "optimize", str(model_path), "-o", str(out)],
            check=True, capture_output=True)))
        if a.binary:
            binary.append(timed(lambda: subprocess.run(
                [a.binary, "optimize", str(model_path), "-o", str(out)],
                check=True, capture_output=True)))
        api_path.append(timed(lambda: infopt.optimize(model_path, out)))
        api_proto.append(timed(lambda: infopt.optimize(proto)))
        # The ModelProto path, by parts (what optimize(proto) does inside).
        staged = folder / "staged.onnx"
        serialize.append(timed(lambda: staged.write_bytes(proto.SerializeToString())))
        job.append(timed(lambda: infopt.optimize(staged, out, inline=True)))
        readback.append(timed(lambda: onnx.load(str(out))))

    def refused() -> None:
        try:
            infopt.optimize(model_path, out, fp61=True)
        except infopt.UsageError:
            pass

    per_call = [timed(refused) for _ in range(200)]

    med = statistics.median
    base = med(command)
    print(f"model {model_path} ({size / 1e6:.1f} MB), median of {a.runs} runs")
    rows = [("command", command), ("binary", binary), ("api(path)", api_path),
            ("api(proto)", api_proto)]
    for name, xs in [(n, xs) for n, xs in rows if xs]:
        line = f"  {name:11} {med(xs) * 1e3:8.0f} ms  ({(med(xs) / base - 1) * 100:+.1f}% vs command"
        if binary:
            line += f", {(med(xs) / med(binary) - 1) * 100:+.1f}% vs binary"
        print(line + ")")
    print("  api(proto) by parts:")
    for name, xs in [("serialize+write", serialize), ("job (path)", job),
                     ("read+parse", readback)]:
        print(f"    {name:15} {med(xs) * 1e3:8.0f} ms")
    print(f"  per call    {med(per_call) * 1e3:8.2f} ms (keywords -> options, no work)")


if __name__ == "__main__":
    main()
