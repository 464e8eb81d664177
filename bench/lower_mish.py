"""Mish-activated CNNs (CSPDarknet-style, as YOLOv4 and its scaled variants), before and after
infopt's default command, against onnxsim and onnxslim, in ONNX Runtime CPU at one thread.

Not a test. Builds two random-weight models with onnx.helper (no torch): a stack of 3x3 Conv +
Mish blocks with stride-2 downsampling and residual Adds, the activation written as the Mish op
(opset 18) and as Softplus, Tanh and Mul (opset 13, what torch.onnx writes for
`x * tanh(softplus(x))` and for nn.Mish before opset 18). Then, per model: `infopt optimize`
(the default pipeline; `lower-mish` rewrites every Mish), `python -m onnxsim` and
`python -m onnxslim` when installed, node counts, the largest difference from the original on
one input (relative to the largest output value), and latency interleaved (median of --rounds rounds of 5 runs each).

    ORT_DYLIB_PATH=... python bench/lower_mish.py INFOPT_BIN [--work DIR] [--size 256] [--rounds 15]
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def cspdarknet(as_op, size, opset):
    """Conv(3x3)+Mish blocks: 32 channels at full size, then 4 stages that halve the size and
    double the channels (at most 256), each with two residual blocks."""
    rng = np.random.default_rng(0)
    nodes, inits, k = [], [], [0]

    def name(p):
        k[0] += 1
        return f"{p}{k[0]}"

    def conv(x, cin, cout, stride=1, ksize=3):
        w, b, y = name("w"), name("b"), name("conv")
        std = np.sqrt(2.0 / (cin * ksize * ksize))
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin, ksize, ksize)) * std).astype(np.float32), w))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), b))
        nodes.append(helper.make_node("Conv", [x, w, b], [y], name=y, kernel_shape=[ksize, ksize],
                                      strides=[stride, stride], pads=[ksize // 2] * 4))
        return mish(y)

    def mish(x):
        y = name("mish")
        if as_op:
            nodes.append(helper.make_node("Mish", [x], [y], name=y))
        else:
            s, t = name("softplus"), name("tanh")
            nodes.append(helper.make_node("Softplus", [x], [s], name=s))
            nodes.append(helper.make_node("Tanh", [s], [t], name=t))
            nodes.append(helper.make_node("Mul", [x, t], [y], name=y))
        return y

    x, c = conv("input", 3, 32), 32
    for _ in range(4):
        cout = min(c * 2, 256)
        x, c = conv(x, c, cout, stride=2), cout
        for _ in range(2):
            h = conv(x, c, c // 2, ksize=1)
            h = conv(h, c // 2, c)
            y = name("add")
            nodes.append(helper.make_node("Add", [x, h], [y], name=y))
            x = y
    graph = helper.make_graph(
        nodes, "cspdarknet_mish",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, c, size // 16, size // 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def nodes_of(path):
    return len(onnx.load(path, load_external_data=False).graph.node)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("--work", default="/tmp/lower_mish")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    x = np.random.default_rng(1).standard_normal((1, 3, a.size, a.size)).astype(np.float32)
    print(f"ONNX Runtime {ort.__version__}, one thread, input [1, 3, {a.size}, {a.size}]")
    print("| model | variant | nodes | max diff / max abs | ms (median) | speed-up |")
    print("|---|---|---|---|---|---|")
    for as_op, opset, label in [(True, 18, "Mish op (opset 18)"), (False, 13, "Softplus+Tanh+Mul (opset 13)")]:
        src = os.path.join(a.work, f"mish_{'op' if as_op else 'parts'}.onnx")
        onnx.save(cspdarknet(as_op, a.size, opset), src)
        variants = {"original": src}
        out = src.replace(".onnx", ".infopt.onnx")
        t = time.perf_counter()
        p = subprocess.run([a.infopt, "optimize", src, "-o", out], capture_output=True, text=True)
        took = time.perf_counter() - t
        if p.returncode == 0:
            variants[f"infopt ({took:.1f} s)"] = out
        else:
            print(f"infopt exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        for tool in ["onnxsim", "onnxslim"]:
            o = src.replace(".onnx", f".{tool}.onnx")
            p = subprocess.run([sys.executable, "-m", tool, src, o], capture_output=True, text=True)
            if p.returncode == 0 and os.path.exists(o):
                variants[tool] = o
        sessions = {k: session(v) for k, v in variants.items()}
        ref = sessions["original"].run(None, {"input": x})[0]
        diffs = {k: float(np.abs(s.run(None, {"input": x})[0] - ref).max() / np.abs(ref).max()) for k, s in sessions.items()}
        times = {k: [] for k in sessions}
        for _ in range(a.rounds):
            for k, s in sessions.items():
                t = time.perf_counter()
                for _ in range(5):
                    s.run(None, {"input": x})
                times[k].append((time.perf_counter() - t) / 5 * 1000)
        base = float(np.median(times["original"]))
        for k in sessions:
            ms = float(np.median(times[k]))
            print(f"| {label} | {k} | {nodes_of(variants[k])} | {diffs[k]:.2e} | {ms:.2f} | {base / ms:.2f}x |")


if __name__ == "__main__":
    main()
