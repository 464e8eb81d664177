"""Generate large models for the load/save benchmark (not committed, not run in CI).

    .venv/bin/python bench/make_big_models.py OUT_DIR [--inline-mb 500] [--external-mb 2560]

Writes OUT_DIR/inline_500mb.onnx (weights inline) and OUT_DIR/external_2p5gb.onnx with
OUT_DIR/external_2p5gb.onnx.data (weights as external data): an MLP of square MatMul
layers with random float32 weights, written in chunks so generation needs little memory.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper

DIM = 4096  # one 4096x4096 float32 weight = 64 MiB


def mlp(n_layers, weight_tensor):
    nodes, inits = [], []
    prev = "x"
    for i in range(n_layers):
        w = weight_tensor(i)
        inits.append(w)
        out = f"h{i}" if i + 1 < n_layers else "y"
        nodes.append(helper.make_node("MatMul", [prev, w.name], [f"m{i}"], name=f"matmul_{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [out], name=f"relu_{i}"))
        prev = out
    graph = helper.make_graph(
        nodes,
        "big_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", DIM])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", DIM])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--inline-mb", type=int, default=500)
    ap.add_argument("--external-mb", type=int, default=2560)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(0)
    layer_bytes = DIM * DIM * 4

    n = max(1, a.inline_mb * 2**20 // layer_bytes)
    def inline_weight(i):
        arr = (rng.standard_normal((DIM, DIM), dtype=np.float32) * 0.01)
        return onnx.numpy_helper.from_array(arr, f"w{i}")
    path = os.path.join(a.out, "inline_500mb.onnx")
    onnx.save(mlp(n, inline_weight), path)
    print(path, os.path.getsize(path))

    n = max(1, a.external_mb * 2**20 // layer_bytes)
    data_name = "external_2p5gb.onnx.data"
    data_path = os.path.join(a.out, data_name)
    offsets = []
    with open(data_path, "wb") as f:
        for i in range(n):
            offsets.append(f.tell())
            f.write((rng.standard_normal((DIM, DIM), dtype=np.float32) * 0.01).tobytes())
    def external_weight(i):
        t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[DIM, DIM])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", data_name), ("offset", str(offsets[i])), ("length", str(layer_bytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t
    path = os.path.join(a.out, "external_2p5gb.onnx")
    with open(path, "wb") as f:
        f.write(mlp(n, external_weight).SerializeToString())
    print(path, os.path.getsize(path), data_path, os.path.getsize(data_path))


if __name__ == "__main__":
    main()
