"""Generate a Llama-style decoder with external data, of a configurable size,
for the bigger-than-RAM benchmark (not committed, not run in CI).

    .venv/bin/python bench/make_decoder.py OUT_DIR --preset 7gb     # ~7.5 GB
    .venv/bin/python bench/make_decoder.py OUT_DIR --preset 27gb    # ~27 GB (6.7 B params)
    .venv/bin/python bench/make_decoder.py OUT_DIR --layers 2 --hidden 512 --inter 1376 --vocab 1000

Each layer is written the way torch.onnx exports a HF Llama block (opset 17):
RMSNorm decomposed (Pow, ReduceMean, Add eps, Sqrt, Reciprocal, Mul, Mul
gamma), attention (q/k/v/o MatMuls, head split with Reshape+Transpose,
MatMul, Div by sqrt(head_dim), Add of a causal mask, Softmax, MatMul), and
the SwiGLU MLP (gate/up/down MatMuls, Sigmoid, Mul, Mul), each with its
residual Add. Inputs: `input_ids` [batch, seq] int64; output: `logits`.

Weights are float32 random normals scaled by 0.02, written tensor by tensor
into OUT_DIR/decoder.onnx.data at offsets aligned to --align bytes (64 KiB by
default, as onnx >= 1.16 writes large tensors; --align 1 packs them), so
generation needs about one weight matrix of memory.
"""
import argparse
import os
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

PRESETS = {
    # ~7.5 GB: a 1.9 B-parameter decoder with Llama-7B's widths.
    "7gb": dict(layers=8, hidden=4096, inter=11008, vocab=32000, heads=32),
    # ~27 GB: Llama-7B's shape, 6.7 B parameters.
    "27gb": dict(layers=32, hidden=4096, inter=11008, vocab=32000, heads=32),
    # A few MB, to try the script.
    "tiny": dict(layers=2, hidden=256, inter=688, vocab=1000, heads=4),
}


class DataWriter:
    """Appends tensors to the data file and returns external TensorProtos."""

    def __init__(self, path, location, align, seed):
        self.f = open(path, "wb")
        self.location = location
        self.align = max(1, align)
        self.rng = np.random.default_rng(seed)
        self.offset = 0

    def _pad(self):
        rem = self.offset % self.align
        if rem:
            self.f.write(b"\0" * (self.align - rem))
            self.offset += self.align - rem

    def tensor(self, name, dims, fill=None):
        self._pad()
        rows = dims[0]
        row_len = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        chunk = max(1, (64 << 20) // (4 * row_len))
        start = self.offset
        for r in range(0, rows, chunk):
            n = min(chunk, rows - r)
            if fill is None:
                block = self.rng.standard_normal((n, row_len), dtype=np.float32)
                block *= 0.02
            else:
                block = np.full((n, row_len), fill, dtype=np.float32)
            self.f.write(block.tobytes())
            self.offset += block.nbytes
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(dims)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(start)),
                     ("length", str(self.offset - start))):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    def close(self):
        self.f.close()


def build(cfg, data):
    H, I, V, L, nh = cfg["hidden"], cfg["inter"], cfg["vocab"], cfg["layers"], cfg["heads"]
    hd = H // nh
    nodes, inits = [], []
    consts = {}

    def const(name, value, dtype=np.float32):
        if name not in consts:
            consts[name] = onnx.numpy_helper.from_array(np.array(value, dtype=dtype), name)
            inits.append(consts[name])
        return name

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"/{outs[0]}", **attrs))
        return outs[0]

    def rmsnorm(x, gamma_name, p):
        inits.append(data.tensor(gamma_name, [H], fill=1.0))
        sq = node("Pow", [x, const("two", 2.0)], [f"{p}/pow"])
        mean = node("ReduceMean", [sq], [f"{p}/mean"], axes=[-1], keepdims=1)
        eps = node("Add", [mean, const("eps", 1e-6)], [f"{p}/add_eps"])
        rt = node("Sqrt", [eps], [f"{p}/sqrt"])
        inv = node("Reciprocal", [rt], [f"{p}/recip"])
        normed = node("Mul", [x, inv], [f"{p}/normed"])
        return node("Mul", [gamma_name, normed], [f"{p}/out"])

    inits.append(data.tensor("embed_tokens.weight", [V, H]))
    h = node("Gather", ["embed_tokens.weight", "input_ids"], ["embed"], axis=0)
    # Causal mask from the sequence length: Trilu of a [S, S] matrix of -inf.
    shape = node("Shape", ["input_ids"], ["ids_shape"])
    seq = node("Gather", [shape, const("one_i", 1, np.int64)], ["seq_len"], axis=0)
    seq1 = node("Unsqueeze", [seq, const("axes0", [0], np.int64)], ["seq_len_1d"])
    sq_shape = node("Concat", [seq1, seq1], ["mask_shape"], axis=0)
    neg = node("ConstantOfShape", [sq_shape], ["mask_full"],
               value=helper.make_tensor("v", TensorProto.FLOAT, [1], [-1e9]))
    mask = node("Trilu", [neg, const("one_i", 1, np.int64)], ["causal_mask"], upper=1)
    heads_shape = const("heads_shape", [0, 0, nh, hd], np.int64)
    merge_shape = const("merge_shape", [0, 0, H], np.int64)
    scale = const("scale", float(np.sqrt(hd)))

    for i in range(L):
        p = f"layers.{i}"
        x = rmsnorm(h, f"{p}.input_layernorm.weight", f"{p}/input_layernorm")
        proj = {}
        for name in ("q", "k", "v"):
            w = f"{p}.self_attn.{name}_proj.weight_T"
            inits.append(data.tensor(w, [H, H]))
            m = node("MatMul", [x, w], [f"{p}/attn/{name}_proj"])
            r = node("Reshape", [m, heads_shape], [f"{p}/attn/{name}_heads"])
            perm = [0, 2, 3, 1] if name == "k" else [0, 2, 1, 3]
            proj[name] = node("Transpose", [r], [f"{p}/attn/{name}_t"], perm=perm)
        s = node("MatMul", [proj["q"], proj["k"]], [f"{p}/attn/scores"])
        s = node("Div", [s, scale], [f"{p}/attn/scaled"])
        s = node("Add", [s, mask], [f"{p}/attn/masked"])
        a = node("Softmax", [s], [f"{p}/attn/probs"], axis=-1)
        c = node("MatMul", [a, proj["v"]], [f"{p}/attn/context"])
        c = node("Transpose", [c], [f"{p}/attn/context_t"], perm=[0, 2, 1, 3])
        c = node("Reshape", [c, merge_shape], [f"{p}/attn/merged"])
        wo = f"{p}.self_attn.o_proj.weight_T"
        inits.append(data.tensor(wo, [H, H]))
        o = node("MatMul", [c, wo], [f"{p}/attn/o_proj"])
        h = node("Add", [h, o], [f"{p}/attn_residual"])

        x = rmsnorm(h, f"{p}.post_attention_layernorm.weight", f"{p}/post_attention_layernorm")
        for name in ("gate", "up"):
            inits.append(data.tensor(f"{p}.mlp.{name}_proj.weight_T", [H, I]))
        g = node("MatMul", [x, f"{p}.mlp.gate_proj.weight_T"], [f"{p}/mlp/gate"])
        u = node("MatMul", [x, f"{p}.mlp.up_proj.weight_T"], [f"{p}/mlp/up"])
        sg = node("Sigmoid", [g], [f"{p}/mlp/sigmoid"])
        act = node("Mul", [g, sg], [f"{p}/mlp/silu"])
        gu = node("Mul", [act, u], [f"{p}/mlp/gated"])
        inits.append(data.tensor(f"{p}.mlp.down_proj.weight_T", [I, H]))
        d = node("MatMul", [gu, f"{p}.mlp.down_proj.weight_T"], [f"{p}/mlp/down"])
        h = node("Add", [h, d], [f"{p}/mlp_residual"])

    x = rmsnorm(h, "norm.weight", "norm")
    inits.append(data.tensor("lm_head.weight_T", [H, V]))
    node("MatMul", [x, "lm_head.weight_T"], ["logits"])
    graph = helper.make_graph(
        nodes, "decoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", V])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                             producer_name="infopt-bench-make-decoder")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    for k in ("layers", "hidden", "inter", "vocab", "heads"):
        ap.add_argument(f"--{k}", type=int)
    ap.add_argument("--align", type=int, default=65536)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="decoder")
    a = ap.parse_args()
    cfg = dict(PRESETS[a.preset])
    for k in cfg:
        if getattr(a, k) is not None:
            cfg[k] = getattr(a, k)
    os.makedirs(a.out, exist_ok=True)
    location = f"{a.name}.onnx.data"
    t0 = time.time()
    data = DataWriter(os.path.join(a.out, location), location, a.align, a.seed)
    model = build(cfg, data)
    data.close()
    path = os.path.join(a.out, f"{a.name}.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"{path}: {cfg}, {params / 1e9:.2f} B parameters, "
          f"{os.path.getsize(os.path.join(a.out, location)) / 2**30:.2f} GiB of data, "
          f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
