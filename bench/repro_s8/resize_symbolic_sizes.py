"""Resize whose `sizes` is Concat(Shape(x)[0:2], [2, 2]) -- DETR's pixel mask downsampled to the
feature map (transformers DetrConvEncoder: interpolate(pixel_mask[None], size=feature.shape[-2:])).
infopt's Resize rule reads `sizes` only when fully constant (cx.ints(3)), so the output dims stay
unknown and Shape(Flatten(y))[1] (= 4) does not fold; onnxsim folds it."""
import numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
I = lambda n, v: nh.from_array(np.asarray(v, np.int64), n)
nodes = [
    h.make_node("Shape", ["x"], ["s"]),
    h.make_node("Slice", ["s", "z1", "two1"], ["nc"]),
    h.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
    h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest", coordinate_transformation_mode="asymmetric",
                nearest_mode="floor"),
    h.make_node("Flatten", ["y"], ["f"], axis=1),                  # [batch, 4]
    h.make_node("Shape", ["f"], ["fs"]),
    h.make_node("Gather", ["fs", "one"], ["L"], axis=0),           # 4
    h.make_node("Unsqueeze", ["L", "z1"], ["L1"]),
    h.make_node("Concat", ["m1", "L1"], ["tgt"], axis=0),
    h.make_node("Reshape", ["f", "tgt"], ["out"]),                 # [batch, 4]
]
g = h.make_graph(nodes, "resize_sizes", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 1, 64, 64])],
                 [h.make_tensor_value_info("out", T.FLOAT, ["batch", 4])],
                 [I("z1", [0]), I("two1", [2]), I("hw", [2, 2]), I("one", 1), I("m1", [-1])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(m, full_check=True)
onnx.save(m, "resize_symbolic_sizes.onnx")
print("nodes", len(m.graph.node))
