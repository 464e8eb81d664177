"""Would a layer's local quantization noise rank the INT8 fallback's
candidates as well as probing each one alone in the whole model does?

    python bench/local_noise_rank.py FLOAT.onnx CALIB_DIR REPORT.json [OUT.json]

FLOAT.onnx: the float graph the search quantizes (`infopt optimize M.onnx -o
FLOAT.onnx`, the same pipeline, so node names match); CALIB_DIR: the .npz
samples; REPORT.json: `--report` of `infopt optimize M.onnx --int8 --calib-data
CALIB_DIR`, whose `int8.candidates` give each layer's measured loss alone in
INT8. For every weighted Conv/Gemm/MatMul named there, its input activation is
fake-quantized (U8, the min/max over the first 64 samples) and its weight
(S8 per output channel), the layer alone is run on the first 8 samples' real
inputs, and its relative output noise is compared with the measured loss by
Spearman rank correlation (printed), and the layers the search kept in float
with as many of the locally noisiest. One run of the float model a sample
would give every local figure, against a probe of each layer through the
rest of the model; the correlation says what that saving would cost the
ranking.

Needs onnx, onnxruntime and numpy.
"""
import glob
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper


def session(model):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def fake_quant_activation(x, lo, hi):
    scale = (hi - lo) / 255 or 1.0
    zero = np.round(-lo / scale)
    return ((np.clip(np.round(x / scale) + zero, 0, 255) - zero) * scale).astype(np.float32)


def fake_quant_weight(w, axis):
    others = tuple(i for i in range(w.ndim) if i != axis)
    scale = np.abs(w).max(axis=others, keepdims=True) / 127
    scale[scale == 0] = 1
    return (np.clip(np.round(w / scale), -127, 127) * scale).astype(np.float32)


def channel_axis(node):
    if node.op_type == "Conv":
        return 0
    if node.op_type == "Gemm":
        return 0 if any(a.name == "transB" and a.i == 1 for a in node.attribute) else 1
    return 1


def one_node_model(model, node, weight, bias):
    inputs = ["x", "w"] + (["b"] if bias is not None else [])
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    inits = [numpy_helper.from_array(weight, "w")]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
    graph = helper.make_graph(
        [helper.make_node(node.op_type, inputs, ["y"], **attrs)],
        "layer",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
        [onnx.ValueInfoProto(name="y")],
        inits,
    )
    one = helper.make_model(graph, opset_imports=model.opset_import)
    one.ir_version = model.ir_version
    return one


def ranks(values):
    return np.argsort(np.argsort(np.asarray(values)))


def main():
    model_path, calib, report = sys.argv[1:4]
    model = onnx.load(model_path)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    int8 = json.load(open(report))["int8"]
    loss = {c["candidate"]: c["loss"] for c in int8["candidates"] if c["kind"] == "layer"}
    kept = {k["layer"] for k in int8["kept_float"] if k["kind"] == "layer"}
    layers = [
        n for n in model.graph.node
        if n.op_type in ("Conv", "Gemm", "MatMul") and len(n.input) > 1 and n.input[1] in inits and n.name in loss
    ]
    watched = onnx.ModelProto()
    watched.CopyFrom(model)
    del watched.graph.output[:]
    names = sorted({n.input[0] for n in layers})
    watched.graph.output.extend(onnx.ValueInfoProto(name=t) for t in names)
    run = session(watched)
    seen = {t: [] for t in names}
    for path in sorted(glob.glob(calib + "/*.npz"))[:64]:
        for t, value in zip(names, run.run(names, dict(np.load(path)))):
            seen[t].append(value)
    rows = []
    for node in layers:
        x = seen[node.input[0]]
        lo, hi = min(0.0, min(float(a.min()) for a in x)), max(0.0, max(float(a.max()) for a in x))
        weight = inits[node.input[1]]
        bias = inits.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        exact = session(one_node_model(model, node, weight, bias))
        quantized = session(one_node_model(model, node, fake_quant_weight(weight, channel_axis(node)), bias))
        noise = power = 0.0
        for sample in x[:8]:
            y = exact.run(None, {"x": sample})[0]
            yq = quantized.run(None, {"x": fake_quant_activation(sample, lo, hi)})[0]
            noise += float(((y - yq) ** 2).sum())
            power += float((y**2).sum())
        rows.append({"layer": node.name, "local_noise": noise / max(power, 1e-30), "measured_loss": loss[node.name]})
    rho = np.corrcoef(ranks([r["local_noise"] for r in rows]), ranks([r["measured_loss"] for r in rows]))[0, 1]
    print(f"{len(rows)} layers, Spearman rank correlation of local noise with the measured loss: {rho:.3f}")
    by_noise = [r["layer"] for r in sorted(rows, key=lambda r: -r["local_noise"])]
    if kept:
        hit = len(kept & set(by_noise[: len(kept)]))
        print(f"the search kept {len(kept)} in float; the {len(kept)} noisiest locally include {hit} of them")
    if len(sys.argv) > 4:
        json.dump(rows, open(sys.argv[4], "w"), indent=1)


if __name__ == "__main__":
    main()
