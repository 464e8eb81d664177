"""Generate the speed set of the cost benchmark (bench/cost.py): CNNs with
their BatchNormalization nodes (ResNet-50, EfficientNet-B0), transformer
encoders and a decoder (BERT-base, a 6-layer GPT-2, ViT-B/16 with external
data), at real sizes with random weights (not committed, not run in CI).

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
- `efficientnet_b0.onnx` (~21 MB, opset 17): EfficientNet-B0's layout with
  many small tensors: stem Conv+BN+SiLU, 16 MBConv blocks (expand 1x1,
  depthwise 3x3/5x5, squeeze-excitation GlobalAveragePool → Conv → SiLU →
  Conv → Sigmoid → Mul, project 1x1, residual Add), SiLU written as
  x·Sigmoid(x), head Conv+BN+SiLU, GlobalAveragePool, Flatten, Gemm; input
  `input` [batch, 3, 224, 224].
- `bert_deep.onnx` (~53 MB, 3542 nodes): the same BERT graph with 64 thin
  layers (hidden 128, 2 heads, FFN 512, vocab 2000): thousands of nodes over
  small weights, so the passes' own per-node cost shows instead of the bytes.
- `distilgpt2.onnx` (~330 MB, opset 17): a GPT-2 decoder (6 layers, hidden
  768, 12 heads, vocab 50257, 1024 positions) as torch.onnx exports
  transformers' GPT2Model: token + position embeddings, pre-LN blocks, the
  fused c_attn projection (MatMul + Add to 3·768) split in three, causal
  mask by Slice of a constant lower-triangular table and Where, Softmax,
  tanh GELU (`gelu_new`) written out, final LayerNormalization; inputs
  `input_ids`, `attention_mask` [batch, seq].
- `vit_b16_ext.onnx` + `vit_b16_ext.onnx.data` (~344 MB, opset 17): ViT-B/16
  with its weights in an external-data file (as `onnx.save(...,
  save_as_external_data=True)` writes them): patch Conv 16x16/16,
  Reshape/Transpose to tokens, class token Concat, position Add, 12 pre-LN
  blocks with Q/K/V MatMul+Add and erf GELU, final LayerNormalization,
  class-token Gather, Gemm head; input `pixel_values` [batch, 3, 224, 224].
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


def bert_base(layers=12, d=768, heads=12, ff=3072, vocab=30522, positions=512, name="bert_base"):
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
        net.nodes, name,
        [helper.make_tensor_value_info(n, I64, ["batch", "seq"])
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", F, ["batch", "seq", d])], net.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def efficientnet_b0():
    net = Net(7)

    def silu(x, scope):
        return net.op("Mul", [x, net.op("Sigmoid", [x], scope)], scope)

    def conv_bn(x, cin, cout, k, stride, prefix, group=1, act=True):
        w = net.weight(f"{prefix}.conv.weight",
                       net.randn(cout, cin // group, k, k, scale=math.sqrt(2.0 / (cin // group * k * k))))
        y = net.op("Conv", [x, w], f"/{prefix}/conv", kernel_shape=[k, k], strides=[stride, stride],
                   pads=[k // 2] * 4, group=group)
        bn = [net.weight(f"{prefix}.bn.{p}", v) for p, v in (
            ("weight", 1 + 0.1 * net.randn(cout)), ("bias", 0.1 * net.randn(cout)),
            ("running_mean", 0.1 * net.randn(cout)), ("running_var", 0.5 + net.rng.random(cout, dtype=np.float32)))]
        y = net.op("BatchNormalization", [y, *bn], f"/{prefix}/bn", epsilon=1e-3, momentum=0.99)
        return silu(y, f"/{prefix}/act") if act else y

    def squeeze_excite(x, c, squeezed, prefix):
        s = net.op("GlobalAveragePool", [x], f"/{prefix}/avgpool")
        w1 = net.weight(f"{prefix}.fc1.weight", net.randn(squeezed, c, 1, 1, scale=math.sqrt(1.0 / c)))
        b1 = net.weight(f"{prefix}.fc1.bias", net.randn(squeezed, scale=0.01))
        s = silu(net.op("Conv", [s, w1, b1], f"/{prefix}/fc1", kernel_shape=[1, 1]), f"/{prefix}/act")
        w2 = net.weight(f"{prefix}.fc2.weight", net.randn(c, squeezed, 1, 1, scale=math.sqrt(1.0 / squeezed)))
        b2 = net.weight(f"{prefix}.fc2.bias", net.randn(c, scale=0.01))
        s = net.op("Sigmoid", [net.op("Conv", [s, w2, b2], f"/{prefix}/fc2", kernel_shape=[1, 1])], prefix)
        return net.op("Mul", [x, s], f"/{prefix}/scale")

    x = conv_bn("input", 3, 32, 3, 2, "features.0")
    cin = 32
    # (expand ratio, kernel, stride, channels out, repeats) of EfficientNet-B0.
    stages = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
              (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]
    for si, (expand, k, stride, cout, repeats) in enumerate(stages):
        for r in range(repeats):
            p = f"features.{si + 1}.{r}"
            s = stride if r == 0 else 1
            h = x
            mid = cin * expand
            if expand != 1:
                h = conv_bn(h, cin, mid, 1, 1, f"{p}.expand")
            h = conv_bn(h, mid, mid, k, s, f"{p}.depthwise", group=mid)
            h = squeeze_excite(h, mid, max(1, cin // 4), f"{p}.se")
            h = conv_bn(h, mid, cout, 1, 1, f"{p}.project", act=False)
            if s == 1 and cin == cout:
                h = net.op("Add", [h, x], f"/{p}")
            x, cin = h, cout
    x = conv_bn(x, cin, 1280, 1, 1, "features.8")
    x = net.op("Flatten", [net.op("GlobalAveragePool", [x], "/avgpool")], "/flatten", axis=1)
    w = net.weight("classifier.weight", net.randn(1000, 1280, scale=0.01))
    b = net.weight("classifier.bias", net.randn(1000, scale=0.01))
    net.nodes.append(helper.make_node("Gemm", [x, w, b], ["logits"], name="/classifier/Gemm", transB=1))
    graph = helper.make_graph(net.nodes, "efficientnet_b0",
                              [helper.make_tensor_value_info("input", F, ["batch", 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", F, ["batch", 1000])], net.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def layer_norm_op(net, x, prefix, d, eps):
    g = net.weight(f"{prefix}.weight", 1 + 0.1 * net.randn(d))
    b = net.weight(f"{prefix}.bias", 0.1 * net.randn(d))
    return net.op("LayerNormalization", [x, g, b], f"/{prefix}", axis=-1, epsilon=eps)


def linear_op(net, x, prefix, din, dout):
    w = net.weight(f"{prefix}.weight", net.randn(din, dout, scale=0.02))
    b = net.weight(f"{prefix}.bias", net.randn(dout, scale=0.02))
    return net.op("Add", [net.op("MatMul", [x, w], f"/{prefix}"), b], f"/{prefix}")


def distilgpt2(layers=6, d=768, heads=12, vocab=50257, positions=1024):
    net = Net(82)
    hd = d // heads
    c = lambda v, sc, dt=np.int64: net.const(np.array(v, dt), sc)  # noqa: E731
    sc = "/wte"
    shape_ids = net.op("Shape", ["input_ids"], sc)
    seq = net.op("Gather", [shape_ids, c(1, sc)], sc, axis=0)
    x = net.op("Gather", [net.weight("wte.weight", net.randn(vocab, d, scale=0.02)), "input_ids"], sc, axis=0)
    pos_ids = net.op("Unsqueeze", [net.op("Range", [c(0, sc), seq, c(1, sc)], sc), c([0], sc)], sc)
    x = net.op("Add", [x, net.op("Gather", [net.weight("wpe.weight", net.randn(positions, d, scale=0.01)),
                                            pos_ids], "/wpe", axis=0)], sc)
    sc = "/mask"
    pad = net.op("Unsqueeze", ["attention_mask", c([1, 2], sc)], sc)
    pad = net.op("Sub", [c(1.0, sc, np.float32), net.op("Cast", [pad], sc, to=F)], sc)
    pad = net.op("Mul", [pad, c(np.finfo(np.float32).min, sc, np.float32)], sc)
    causal = net.weight("causal_bias", np.tril(np.ones((positions, positions), np.bool_))[None, None])
    seq1 = net.op("Unsqueeze", [seq, c([0], sc)], sc)
    for layer in range(layers):
        p = f"h.{layer}"
        sc = f"/{p}/attn"
        h = layer_norm_op(net, x, f"{p}.ln_1", d, 1e-5)
        qkv = linear_op(net, h, f"{p}.attn.c_attn", d, 3 * d)
        n = net.n
        net.n += 1
        qkv_parts = [f"{sc}/Split_{n}_output_{i}" for i in range(3)]
        net.nodes.append(helper.make_node("Split", [qkv, c([d, d, d], sc)], qkv_parts, name=f"{sc}/Split_{n}",
                                          axis=2))
        shape = net.op("Shape", [h], sc)
        bsz = net.op("Unsqueeze", [net.op("Gather", [shape, c(0, sc)], sc, axis=0), c([0], sc)], sc)
        heads_shape = net.op("Concat", [bsz, seq1, c([heads, hd], sc)], sc, axis=0)
        q, k, v = (net.op("Transpose", [net.op("Reshape", [t, heads_shape], sc)], sc, perm=perm)
                   for t, perm in zip(qkv_parts, ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3])))
        s = net.op("Div", [net.op("MatMul", [q, k], sc), c(math.sqrt(hd), sc, np.float32)], sc)
        bias = net.op("Slice", [causal, c([0, 0], sc), net.op("Concat", [seq1, seq1], sc, axis=0),
                                c([2, 3], sc)], sc)
        s = net.op("Where", [bias, s, c(np.finfo(np.float32).min, sc, np.float32)], sc)
        probs = net.op("Softmax", [net.op("Add", [s, pad], sc)], sc, axis=-1)
        ctx = net.op("Transpose", [net.op("MatMul", [probs, v], sc)], sc, perm=[0, 2, 1, 3])
        ctx = net.op("Reshape", [ctx, net.op("Concat", [bsz, seq1, c([d], sc)], sc, axis=0)], sc)
        x = net.op("Add", [x, linear_op(net, ctx, f"{p}.attn.c_proj", d, d)], f"/{p}")
        h = linear_op(net, layer_norm_op(net, x, f"{p}.ln_2", d, 1e-5), f"{p}.mlp.c_fc", d, 4 * d)
        sc = f"/{p}/mlp/act"
        inner = net.op("Add", [h, net.op("Mul", [net.op("Pow", [h, c(3.0, sc, np.float32)], sc),
                                                 c(0.044715, sc, np.float32)], sc)], sc)
        t = net.op("Tanh", [net.op("Mul", [inner, c(math.sqrt(2 / math.pi), sc, np.float32)], sc)], sc)
        g = net.op("Mul", [net.op("Mul", [h, c(0.5, sc, np.float32)], sc),
                           net.op("Add", [t, c(1.0, sc, np.float32)], sc)], sc)
        x = net.op("Add", [x, linear_op(net, g, f"{p}.mlp.c_proj", 4 * d, d)], f"/{p}")
    x = layer_norm_op(net, x, "ln_f", d, 1e-5)
    net.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/Identity_out"))
    graph = helper.make_graph(
        net.nodes, "distilgpt2",
        [helper.make_tensor_value_info(n, I64, ["batch", "seq"]) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", F, ["batch", "seq", d])], net.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def vit_b16(layers=12, d=768, heads=12, ff=3072, patch=16, image=224, classes=1000):
    net = Net(16)
    hd = d // heads
    tokens = (image // patch) ** 2
    c = lambda v, sc, dt=np.int64: net.const(np.array(v, dt), sc)  # noqa: E731
    sc = "/embeddings"
    w = net.weight("patch.weight", net.randn(d, 3, patch, patch, scale=0.02))
    b = net.weight("patch.bias", net.randn(d, scale=0.02))
    x = net.op("Conv", ["pixel_values", w, b], sc, kernel_shape=[patch, patch], strides=[patch, patch])
    x = net.op("Transpose", [net.op("Reshape", [x, c([0, d, tokens], sc)], sc)], sc, perm=[0, 2, 1])
    shape = net.op("Shape", ["pixel_values"], sc)
    bsz = net.op("Unsqueeze", [net.op("Gather", [shape, c(0, sc)], sc, axis=0), c([0], sc)], sc)
    cls = net.op("Expand", [net.weight("cls_token", net.randn(1, 1, d, scale=0.02)),
                            net.op("Concat", [bsz, c([1, d], sc)], sc, axis=0)], sc)
    x = net.op("Concat", [cls, x], sc, axis=1)
    x = net.op("Add", [x, net.weight("position_embeddings", net.randn(1, tokens + 1, d, scale=0.02))], sc)
    for layer in range(layers):
        p = f"encoder.layer.{layer}"
        sc = f"/{p}/attention"
        h = layer_norm_op(net, x, f"{p}.layernorm_before", d, 1e-12)
        heads_shape = net.op("Concat", [bsz, c([tokens + 1, heads, hd], sc)], sc, axis=0)
        q, k, v = (net.op("Transpose", [net.op("Reshape", [linear_op(net, h, f"{p}.attention.{n}", d, d),
                                                           heads_shape], sc)], sc, perm=perm)
                   for n, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])))
        s = net.op("Mul", [net.op("MatMul", [q, k], sc), c(1 / math.sqrt(hd), sc, np.float32)], sc)
        ctx = net.op("Transpose", [net.op("MatMul", [net.op("Softmax", [s], sc, axis=-1), v], sc)], sc,
                     perm=[0, 2, 1, 3])
        ctx = net.op("Reshape", [ctx, net.op("Concat", [bsz, c([tokens + 1, d], sc)], sc, axis=0)], sc)
        x = net.op("Add", [linear_op(net, ctx, f"{p}.attention.output.dense", d, d), x], f"/{p}")
        h = linear_op(net, layer_norm_op(net, x, f"{p}.layernorm_after", d, 1e-12), f"{p}.intermediate.dense", d, ff)
        sc = f"/{p}/intermediate/act"
        e = net.op("Erf", [net.op("Div", [h, c(math.sqrt(2.0), sc, np.float32)], sc)], sc)
        e = net.op("Mul", [net.op("Mul", [h, net.op("Add", [e, c(1.0, sc, np.float32)], sc)], sc),
                           c(0.5, sc, np.float32)], sc)
        x = net.op("Add", [linear_op(net, e, f"{p}.output.dense", ff, d), x], f"/{p}")
    x = layer_norm_op(net, x, "layernorm", d, 1e-12)
    x = net.op("Gather", [x, c(0, "/pool")], "/pool", axis=1)
    w = net.weight("classifier.weight", net.randn(classes, d, scale=0.02))
    b = net.weight("classifier.bias", net.randn(classes, scale=0.02))
    net.nodes.append(helper.make_node("Gemm", [x, w, b], ["logits"], name="/classifier/Gemm", transB=1))
    graph = helper.make_graph(net.nodes, "vit_b16",
                              [helper.make_tensor_value_info("pixel_values", F, ["batch", 3, image, image])],
                              [helper.make_tensor_value_info("logits", F, ["batch", classes])], net.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


MODELS = {
    "resnet50_bn": (resnet50, False),
    "bert_base": (bert_base, False),
    "efficientnet_b0": (efficientnet_b0, False),
    # Thousands of nodes over small weights: the passes' own per-node cost
    # (matching, shape inference, fixed-point sweeps) instead of the bytes.
    "bert_deep": (lambda: bert_base(layers=64, d=128, heads=2, ff=512, vocab=2000, positions=128,
                                    name="bert_deep"), False),
    "distilgpt2": (distilgpt2, False),
    "vit_b16_ext": (vit_b16, True),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), help="generate only these models")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or MODELS:
        make, external = MODELS[name]
        m = make()
        onnx.checker.check_model(m)
        path = os.path.join(args.out, f"{name}.onnx")
        if external:
            onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                      location=f"{name}.onnx.data", size_threshold=1024)
        else:
            onnx.save(m, path)
        size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out)
                   if f == f"{name}.onnx" or f == f"{name}.onnx.data")
        print(f"{path}: {len(m.graph.node)} nodes, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
