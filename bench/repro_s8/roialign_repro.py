"""RoiAlign has no shape/dtype rule in infopt: the Cast(to=FLOAT) after it stays, and the
Shape(RoiAlign)[1:4] chain (channels, output_height, output_width: all static) does not fold.
Pattern from torchvision MultiScaleRoIAlign (keypointrcnn/fasterrcnn box_roi_pool)."""
import numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
c = lambda n, v: nh.from_array(np.asarray(v, np.int64), n)
nodes = [
    h.make_node("RoiAlign", ["X", "rois", "bi"], ["r"], output_height=7, output_width=7, sampling_ratio=2,
                spatial_scale=0.25, coordinate_transformation_mode="output_half_pixel", mode="avg"),
    h.make_node("Cast", ["r"], ["rc"], to=T.FLOAT),
    h.make_node("Shape", ["rc"], ["s"]),
    h.make_node("Gather", ["s", "i1"], ["g1"], axis=0),
    h.make_node("Gather", ["s", "i2"], ["g2"], axis=0),
    h.make_node("Gather", ["s", "i3"], ["g3"], axis=0),
    h.make_node("Unsqueeze", ["g1", "ax0"], ["u1"]),
    h.make_node("Mul", ["g2", "g3"], ["hw"]),
    h.make_node("Unsqueeze", ["hw", "ax0"], ["u2"]),
    h.make_node("Concat", ["m1", "u1", "u2"], ["shp"], axis=0),
    h.make_node("Reshape", ["rc", "shp"], ["Y"]),
]
g = h.make_graph(nodes, "roialign_shape",
                 [h.make_tensor_value_info("X", T.FLOAT, [1, 16, 20, 20]),
                  h.make_tensor_value_info("rois", T.FLOAT, ["n", 4]),
                  h.make_tensor_value_info("bi", T.INT64, ["n"])],
                 [h.make_tensor_value_info("Y", T.FLOAT, ["n", 16, 49])],
                 [c("i1", 1), c("i2", 2), c("i3", 3), c("ax0", [0]), c("m1", [-1])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(m, full_check=True)
onnx.save(m, "roialign_shape.onnx")
print("nodes", len(m.graph.node))
