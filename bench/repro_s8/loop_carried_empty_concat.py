"""A Loop whose carried tensor starts empty and grows by Concat each iteration, with the body's
carried input declared at the initial value's static shape [0, 4] -- as torch's TorchScript exporter
writes torchvision's Mask R-CNN paste-masks loop (`res_append = cat((res_append, mask_res))`,
body input `res_append.11` typed [0, 320, 320]). infopt's eliminate-identity drops the Concat input
that is "empty along the axis", so every iteration returns just the new row: output [1, 4]
instead of [M, 4]."""
import numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
body = h.make_graph(
    [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
     h.make_node("Add", ["x", "fi"], ["row"]),                    # [4]
     h.make_node("Unsqueeze", ["row", "ax0"], ["row2"]),          # [1, 4]
     h.make_node("Concat", ["acc_in", "row2"], ["acc_out"], axis=0),
     h.make_node("Identity", ["cond_in"], ["cond_out"])],
    "body",
    [h.make_tensor_value_info("i", T.INT64, []),
     h.make_tensor_value_info("cond_in", T.BOOL, []),
     h.make_tensor_value_info("acc_in", T.FLOAT, [0, 4])],       # the exporter's (wrong) static type
    [h.make_tensor_value_info("cond_out", T.BOOL, []),
     h.make_tensor_value_info("acc_out", T.FLOAT, ["n", 4])],
    [nh.from_array(np.array([0], np.int64), "ax0")])
g = h.make_graph(
    [h.make_node("Constant", [], ["acc0"], value=nh.from_array(np.zeros((0, 4), np.float32))),
     h.make_node("Constant", [], ["true"], value=nh.from_array(np.array(True))),
     h.make_node("Loop", ["M", "true", "acc0"], ["Y"], body=body)],
    "loop_concat",
    [h.make_tensor_value_info("x", T.FLOAT, [4]), h.make_tensor_value_info("M", T.INT64, [])],
    [h.make_tensor_value_info("Y", T.FLOAT, ["m", 4])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(m, full_check=True)
onnx.save(m, "loop_carried_empty_concat.onnx")
import onnxruntime as ort
r = ort.InferenceSession("loop_carried_empty_concat.onnx").run(None, {"x": np.ones(4, np.float32), "M": np.array(3)})
print("ORT on the original: Y", r[0].shape)
