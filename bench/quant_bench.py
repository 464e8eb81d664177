#!/usr/bin/env python3
"""INT8 benchmark for the quantize-int8 pass in ONNX Runtime (CPU).

  quant_bench.py models DIR            ResNet-50 and EfficientNet-B0 (torchvision
                                       layouts, BN folded, random weights) built with
                                       onnx.helper (no torch needed), opset 13
  quant_bench.py ranges MODEL OUT.json max|x| of every float tensor over N random
                                       inputs (all intermediate outputs exposed)
  quant_bench.py ort-qdq MODEL OUT [s8|u8]  ORT quantize_static, QDQ, per-channel
                                       weights, S8 (default) or U8 activations
  quant_bench.py latency M1 M2 ...     interleaved ORT CPU latency, same threads
  quant_bench.py accuracy REF M1 ...   cosine similarity of outputs vs REF
  quant_bench.py dump MODEL OUT        ORT's optimized graph (which QDQ groups fused)
"""
import json
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def conv(self, x, cin, cout, k, stride=1, group=1, gain=2.0):
        n = self.name("conv")
        fan_in = cin // group * k * k
        w = RNG.normal(0, np.sqrt(gain / fan_in), (cout, cin // group, k, k)).astype(np.float32)
        b = RNG.normal(0, 0.05, (cout,)).astype(np.float32)
        self.inits += [numpy_helper.from_array(w, n + ".weight"), numpy_helper.from_array(b, n + ".bias")]
        self.nodes.append(helper.make_node(
            "Conv", [x, n + ".weight", n + ".bias"], [n + "_out"], name=n,
            kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group))
        return n + "_out"

    def op(self, op, ins, **attrs):
        n = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [n + "_out"], name=n, **attrs))
        return n + "_out"

    def silu(self, x):
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def head(self, x, c):
        x = self.op("GlobalAveragePool", [x])
        x = self.op("Flatten", [x], axis=1)
        w = RNG.normal(0, np.sqrt(1.0 / c), (1000, c)).astype(np.float32)
        b = np.zeros(1000, np.float32)
        self.inits += [numpy_helper.from_array(w, "fc.weight"), numpy_helper.from_array(b, "fc.bias")]
        self.nodes.append(helper.make_node("Gemm", [x, "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))

    def model(self, name, opset=13):
        g = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def resnet50():
    b = Builder()
    x = b.op("Relu", [b.conv("input", 3, 64, 7, 2)])
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            s = stride if i == 0 else 1
            y = b.op("Relu", [b.conv(x, cin, width, 1)])
            y = b.op("Relu", [b.conv(y, width, width, 3, s)])
            y = b.conv(y, width, width * 4, 1, gain=0.5)
            sc = b.conv(x, cin, width * 4, 1, s, gain=0.5) if i == 0 else x
            x = b.op("Relu", [b.op("Add", [y, sc])])
            cin = width * 4
    b.head(x, 2048)
    return b.model("resnet50")


def efficientnet_b0():
    b = Builder()
    x = b.silu(b.conv("input", 3, 32, 3, 2))
    cin = 32
    for expand, k, stride, cout, repeats in [
        (1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]:
        for i in range(repeats):
            s = stride if i == 0 else 1
            mid = cin * expand
            y = b.silu(b.conv(x, cin, mid, 1)) if expand != 1 else x
            y = b.silu(b.conv(y, mid, mid, k, s, group=mid))
            se = b.op("GlobalAveragePool", [y])
            se = b.silu(b.conv(se, mid, max(1, cin // 4), 1))
            se = b.op("Sigmoid", [b.conv(se, max(1, cin // 4), mid, 1)])
            y = b.op("Mul", [y, se])
            y = b.conv(y, mid, cout, 1, gain=0.5)
            x = b.op("Add", [y, x]) if s == 1 and cin == cout else y
            cin = cout
    x = b.silu(b.conv(x, cin, 1280, 1))
    b.head(x, 1280)
    return b.model("efficientnet_b0")


def inputs(n, seed=1):
    r = np.random.default_rng(seed)
    return [r.normal(0, 1, (1, 3, 224, 224)).astype(np.float32) for _ in range(n)]


def ranges(model_path, out, n=8):
    import onnxruntime as ort
    m = onnx.load(model_path)
    m = onnx.shape_inference.infer_shapes(m)
    known = {o.name for o in m.graph.output}
    floats = [vi.name for vi in m.graph.value_info if vi.type.tensor_type.elem_type == TensorProto.FLOAT]
    for name in floats:
        if name not in known:
            m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    names = [o.name for o in m.graph.output]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    amax = {}
    for x in inputs(n) + [np.zeros((1, 3, 224, 224), np.float32)]:
        for name, v in zip(names, sess.run(None, {"input": x})):
            amax[name] = max(amax.get(name, 0.0), float(np.abs(v).max()))
    amax["input"] = max(float(np.abs(x).max()) for x in inputs(n))
    json.dump({"tensors": {k: {"amax": v} for k, v in sorted(amax.items())}}, open(out, "w"), indent=1)


def ort_qdq(model_path, out, act="s8", n=8):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"input": x} for x in inputs(n)])

        def get_next(self):
            return next(self.it, None)

    quantize_static(model_path, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8 if act == "u8" else QuantType.QInt8,
                    weight_type=QuantType.QInt8)


def session(path, threads, opt_out=None):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if opt_out:
        so.optimized_model_filepath = opt_out
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def latency(paths, threads=2, rounds=7, iters=10):
    x = inputs(1)[0]
    sessions = [session(p, threads) for p in paths]
    for s in sessions:
        for _ in range(3):
            s.run(None, {"input": x})
    times = {p: [] for p in paths}
    for _ in range(rounds):
        for p, s in zip(paths, sessions):
            t = time.perf_counter()
            for _ in range(iters):
                s.run(None, {"input": x})
            times[p].append((time.perf_counter() - t) / iters * 1000)
    base = statistics.median(times[paths[0]])
    for p in paths:
        med = statistics.median(times[p])
        print(f"{p}: median {med:.2f} ms (min {min(times[p]):.2f}) speedup vs first {base / med:.2f}x")


def accuracy(ref, paths, n=4):
    r = session(ref, 2)
    for p in paths:
        s = session(p, 2)
        cos = []
        for x in inputs(n, seed=7):
            a = r.run(None, {"input": x})[0].ravel()
            b = s.run(None, {"input": x})[0].ravel()
            cos.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
        print(f"{p}: cosine vs {ref}: min {min(cos):.4f} mean {np.mean(cos):.4f}")


def dump(path, out):
    session(path, 1, out)
    m = onnx.load(out)
    hist = {}
    for n in m.graph.node:
        hist[n.op_type] = hist.get(n.op_type, 0) + 1
    print(json.dumps(dict(sorted(hist.items()))))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "models":
        onnx.save(resnet50(), f"{args[0]}/resnet50.onnx")
        onnx.save(efficientnet_b0(), f"{args[0]}/efficientnet_b0.onnx")
    elif cmd == "ranges":
        ranges(args[0], args[1])
    elif cmd == "ort-qdq":
        ort_qdq(args[0], args[1], *args[2:3])
    elif cmd == "latency":
        latency(args)
    elif cmd == "accuracy":
        accuracy(args[0], args[1:])
    elif cmd == "dump":
        dump(args[0], args[1])
