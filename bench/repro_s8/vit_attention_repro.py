"""One ViT self-attention block as torch's dynamo exporter writes it (yolos/mobilevit/segformer
dynamo exports): x[batch, 75, 64] -> 3x (MatMul + Add bias) -> Reshape [-1, 75, 4, 16] (allowzero=1)
-> Transposes (K to [0,2,3,1]) -> MatMul -> Mul 0.25 -> Softmax -> MatMul -> Transpose ->
Reshape [-1, 75, 64] -> output projection. No mask, no cache.
onnxsim 0.8.1 fuses it into com.microsoft.Attention (1 node + Reshape + out proj);
infopt's default (target portable) keeps 13 nodes, and with --target onnxruntime
fuse-ort-attention declines: 'Q, K or V is not split into heads from a [B, S, H*d] tensor'."""
import sys
import numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
S, D, H, d = 75, 64, 4, 16
rng = np.random.default_rng(0)
W = lambda n, *s: nh.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
I = lambda n, v: nh.from_array(np.asarray(v, np.int64), n)
split_target = [-1, S, H, d] if "--zero" not in sys.argv else [0, 0, H, d]
merge_target = [-1, S, D] if "--zero" not in sys.argv else [0, 0, D]
nodes = []
for p in "qkv":
    nodes += [h.make_node("MatMul", ["x", f"W{p}"], [f"{p}0"]), h.make_node("Add", [f"{p}0", f"b{p}"], [f"{p}1"]),
              h.make_node("Reshape", [f"{p}1", "split"], [f"{p}2"], allowzero=0 if "--zero" in sys.argv else 1)]
nodes += [h.make_node("Transpose", ["q2"], ["q3"], perm=[0, 2, 1, 3]),
          h.make_node("Transpose", ["k2"], ["k3"], perm=[0, 2, 3, 1]),
          h.make_node("Transpose", ["v2"], ["v3"], perm=[0, 2, 1, 3]),
          h.make_node("MatMul", ["q3", "k3"], ["s0"]),
          h.make_node("Mul", ["s0", "scale"], ["s1"]),
          h.make_node("Softmax", ["s1"], ["p"], axis=-1),
          h.make_node("MatMul", ["p", "v3"], ["c0"]),
          h.make_node("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
          h.make_node("Reshape", ["c1", "merge"], ["c2"], allowzero=0 if "--zero" in sys.argv else 1),
          h.make_node("MatMul", ["c2", "Wo"], ["y0"]),
          h.make_node("Add", ["y0", "x"], ["y"])]
inits = [W("Wq", D, D), W("Wk", D, D), W("Wv", D, D), W("Wo", D, D), W("bq", D), W("bk", D), W("bv", D),
         I("split", split_target), I("merge", merge_target), nh.from_array(np.array(0.25, np.float32), "scale")]
g = h.make_graph(nodes, "vit_attention", [h.make_tensor_value_info("x", T.FLOAT, ["batch", S, D])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["batch", S, D])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)], ir_version=8)
onnx.checker.check_model(m, full_check=True)
out = "vit_attention_zero.onnx" if "--zero" in sys.argv else "vit_attention.onnx"
onnx.save(m, out)
print(out, len(m.graph.node), "nodes")
