"""Generate the models of the cost benchmark (bench/cost.sh): a ResNet-50 with
its BatchNormalization nodes and a BERT-base encoder, at real sizes with
random weights (not committed, not run in CI).

    .venv/bin/python bench/make_cost_models.py OUT_DIR

- `resnet50_bn.onnx` (~98 MB, opset 17): torchvision's ResNet-50 as the
  TorchScript exporter writes it with `TrainingMode.PRESERVE`: Conv without
  bias → BatchNormalization → Relu, bottlenecks [3, 4, 6, 3] with a
  downsample Conv+BN on the first of each stage, MaxPool,
  GlobalAveragePool, Flatten, Gemm; input `input` [batch, 3, 224, 224].
- `bert_base.onnx` (~417 MB, opset 17): BERT-base (12 layers, hidden 768,
  12 heads, FFN 3072, vocab 30522) as torch.onnx exports transformers'
  eager BertModel: word/position/token-type embeddings, LayerNormalization,
  Q/K/V MatMul+Add, head split by Reshape of Shape/Gather/Concat pieces,
  Mul 1/√d, additive padding mask, Softmax, head merge, erf GELU;
  inputs `input_ids`, `attention_mask`, `token_type_ids` [batch, seq].
"""
import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


class Net:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.n = 0

    def op(self, op, inputs, scope, **attrs):
        self.n += 1
        out = f"{scope}/{op}_{self.n}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{scope}/{op}_{self.n}", **attrs))
        return out

    def const(self, arr, scope):
        self.n += 1
        out = f"{scope}/Constant_{self.n}_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=f"{scope}/Constant_{self.n}",
                                           value=numpy_helper.from_array(np.asarray(arr))))
        return out

    def weight(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr, order="C"), name))
        return name

    def randn(self, *shape, scale=1.0):
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float32)


def resnet50():
    net = Net(50)

    def conv_bn(x, cin, cout, k, stride, prefix, relu=True):
        w = net.weight(f"{prefix}.conv.weight", net.randn(cout, cin, k, k, scale=math.sqrt(2.0 / (cin * k * k))))
        y = net.op("Conv", [x, w], f"/{prefix}/conv", kernel_shape=[k, k], strides=[stride, stride],
                   pads=[k // 2] * 4)
        bn = [net.weight(f"{prefix}.bn.{p}", v) for p, v in (
            ("weight", 1 + 0.1 * net.randn(cout)), ("bias", 0.1 * net.randn(cout)),
            ("running_mean", 0.1 * net.randn(cout)), ("running_var", 0.5 + net.rng.random(cout, dtype=np.float32)))]
        y = net.op("BatchNormalization", [y, *bn], f"/{prefix}/bn", epsilon=1e-5, momentum=0.9)
        return net.op("Relu", [y], f"/{prefix}/relu") if relu else y

    x = conv_bn("input", 3, 64, 7, 2, "stem")
    x = net.op("MaxPool", [x], "/maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        for b in range(blocks):
            p = f"layer{stage + 1}.{b}"
            stride = 2 if b == 0 and stage > 0 else 1
            h = conv_bn(x, cin, width, 1, 1, f"{p}.1")
            h = conv_bn(h, width, width, 3, stride, f"{p}.2")
            h = conv_bn(h, width, 4 * width, 1, 1, f"{p}.3", relu=False)
            short = conv_bn(x, cin, 4 * width, 1, stride, f"{p}.downsample", relu=False) if b == 0 else x
            x = net.op("Relu", [net.op("Add", [h, short], f"/{p}")], f"/{p}")
            cin = 4 * width
    x = net.op("GlobalAveragePool", [x], "/avgpool")
    x = net.op("Flatten", [x], "/flatten", axis=1)
    w = net.weight("fc.weight", net.randn(1000, cin, scale=0.01))
    b = net.weight("fc.bias", net.randn(1000, scale=0.01))
    net.nodes.append(helper.make_node("Gemm", [x, w, b], ["logits"], name="/fc/Gemm", transB=1))
    graph = helper.make_graph(net.nodes, "resnet50_bn",
                              [helper.make_tensor_value_info("input", F, ["batch", 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", F, ["batch", 1000])], net.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def bert_base(layers=12, d=768, heads=12, ff=3072, vocab=30522, positions=512):
    net = Net(110)
    hd = d // heads

    def linear(x, prefix, din, dout):
        w = net.weight(f"{prefix}.weight", net.randn(din, dout, scale=0.02))
        b = net.weight(f"{prefix}.bias", net.randn(dout, scale=0.02))
        return net.op("Add", [b, net.op("MatMul", [x, w], f"/{prefix}")], f"/{prefix}")

    def layer_norm(x, prefix):
        g = net.weight(f"{prefix}.weight", 1 + 0.1 * net.randn(d))
        b = net.weight(f"{prefix}.bias", 0.1 * net.randn(d))
        return net.op("LayerNormalization", [x, g, b], f"/{prefix}", axis=-1, epsilon=1e-12)

    def dims(x, scope):
        shape = net.op("Shape", [x], scope)
        out = []
        for i in (0, 1):
            g = net.op("Gather", [shape, net.const(np.array(i, np.int64), scope)], scope, axis=0)
            out.append(net.op("Unsqueeze", [g, net.const(np.array([0], np.int64), scope)], scope))
        return out

    sc = "/embeddings"
    emb = net.op("Gather", [net.weight("embeddings.word_embeddings.weight", net.randn(vocab, d, scale=0.02)),
                            "input_ids"], sc, axis=0)
    seq = net.op("Gather", [net.op("Shape", ["input_ids"], sc), net.const(np.array(1, np.int64), sc)], sc, axis=0)
    pos_ids = net.op("Unsqueeze", [net.op("Range", [net.const(np.array(0, np.int64), sc), seq,
                                                    net.const(np.array(1, np.int64), sc)], sc),
                                   net.const(np.array([0], np.int64), sc)], sc)
    pos = net.op("Gather", [net.weight("embeddings.position_embeddings.weight",
                                       net.randn(positions, d, scale=0.02)), pos_ids], sc, axis=0)
    tok = net.op("Gather", [net.weight("embeddings.token_type_embeddings.weight", net.randn(2, d, scale=0.02)),
                            "token_type_ids"], sc, axis=0)
    x = layer_norm(net.op("Add", [net.op("Add", [emb, tok], sc), pos], sc), "embeddings.LayerNorm")
    sc = "/mask"
    m = net.op("Unsqueeze", ["attention_mask", net.const(np.array([1, 2], np.int64), sc)], sc)
    m = net.op("Sub", [net.const(np.array(1.0, np.float32), sc), net.op("Cast", [m], sc, to=F)], sc)
    mask = net.op("Mul", [m, net.const(np.array(np.finfo(np.float32).min, np.float32), sc)], sc)
    for layer in range(layers):
        p = f"encoder.layer.{layer}"
        sc = f"/{p}/attention/self"
        bsz, sl = dims(x, sc)

        def split(t, perm):
            shape = net.op("Concat", [bsz, sl, net.const(np.array([heads, hd], np.int64), sc)], sc, axis=0)
            return net.op("Transpose", [net.op("Reshape", [t, shape], sc)], sc, perm=perm)

        q = split(linear(x, f"{p}.attention.self.query", d, d), [0, 2, 1, 3])
        k = split(linear(x, f"{p}.attention.self.key", d, d), [0, 2, 3, 1])
        v = split(linear(x, f"{p}.attention.self.value", d, d), [0, 2, 1, 3])
        s = net.op("Mul", [net.op("MatMul", [q, k], sc), net.const(np.array(1 / math.sqrt(hd), np.float32), sc)], sc)
        probs = net.op("Softmax", [net.op("Add", [s, mask], sc)], sc, axis=-1)
        ctx = net.op("Transpose", [net.op("MatMul", [probs, v], sc)], sc, perm=[0, 2, 1, 3])
        ctx = net.op("Reshape", [ctx, net.op("Concat", [bsz, sl, net.const(np.array([d], np.int64), sc)], sc,
                                             axis=0)], sc)
        a = layer_norm(net.op("Add", [linear(ctx, f"{p}.attention.output.dense", d, d), x], f"/{p}"),
                       f"{p}.attention.output.LayerNorm")
        h = linear(a, f"{p}.intermediate.dense", d, ff)
        sc = f"/{p}/intermediate/act"
        e = net.op("Erf", [net.op("Div", [h, net.const(np.array(math.sqrt(2.0), np.float32), sc)], sc)], sc)
        e = net.op("Add", [e, net.const(np.array(1.0, np.float32), sc)], sc)
        e = net.op("Mul", [net.op("Mul", [h, e], sc), net.const(np.array(0.5, np.float32), sc)], sc)
        o = net.op("Add", [linear(e, f"{p}.output.dense", ff, d), a], f"/{p}")
        x = layer_norm(o, f"{p}.output.LayerNorm")
    net.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/Identity_out"))
    graph = helper.make_graph(
        net.nodes, "bert_base",
        [helper.make_tensor_value_info(n, I64, ["batch", "seq"])
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", F, ["batch", "seq", d])], net.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, make in (("resnet50_bn", resnet50), ("bert_base", bert_base)):
        m = make()
        path = os.path.join(args.out, f"{name}.onnx")
        onnx.save(m, path)
        print(f"{path}: {len(m.graph.node)} nodes, {os.path.getsize(path) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
