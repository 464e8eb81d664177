"""`fuse-space-to-depth` (a YOLOv5 "Focus" layer as SpaceToDepth + a channel Gather) in ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import _interop

BIG = np.iinfo(np.int64).max


def _focus_model(path, offsets):
    """Concat of x[:, :, a::2, b::2] for (a, b) in offsets, then a 1x1 Conv (opset 13)."""
    inits = [
        numpy_helper.from_array(np.array([BIG, BIG], np.int64), "ends"),
        numpy_helper.from_array(np.array([2, 3], np.int64), "axes"),
        numpy_helper.from_array(np.array([2, 2], np.int64), "steps"),
        numpy_helper.from_array(np.random.default_rng(3).uniform(-1, 1, (4, 12, 1, 1)).astype(np.float32), "w"),
    ]
    nodes = []
    for i, (a, b) in enumerate(offsets):
        inits.append(numpy_helper.from_array(np.array([a, b], np.int64), f"starts{i}"))
        nodes.append(helper.make_node("Slice", ["x", f"starts{i}", "ends", "axes", "steps"], [f"s{i}"], name=f"slice{i}"))
    nodes.append(helper.make_node("Concat", [f"s{i}" for i in range(len(offsets))], ["focus"], name="concat", axis=1))
    nodes.append(helper.make_node("Conv", ["focus", "w"], ["y"], name="conv"))
    graph = helper.make_graph(
        nodes,
        "focus",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "h2", "w2"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def test_focus_layer_is_space_to_depth_in_ort(infopt, tmp_path):
    import onnxruntime as ort

    for offsets, ops in [
        ([(0, 0), (1, 0), (0, 1), (1, 1)], ["Conv", "Gather", "SpaceToDepth"]),  # YOLOv5's order
        ([(0, 0), (0, 1), (1, 0), (1, 1)], ["Conv", "SpaceToDepth"]),
    ]:
        src, out = tmp_path / "focus.onnx", tmp_path / "s2d.onnx"
        _focus_model(src, offsets)
        proc = _interop.run_cli("optimize", src, "-o", out, "--passes", "fuse-space-to-depth", "--no-verify", "--validate")
        assert proc.returncode == 0, _interop.describe(proc)
        model = onnx.load(str(out))
        assert sorted(n.op_type for n in model.graph.node) == ops
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        a = ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
        b = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(7)
        for shape in [(1, 3, 8, 6), (2, 3, 416, 416)]:
            x = rng.standard_normal(shape).astype(np.float32)
            (expected,), (got,) = a.run(None, {"x": x}), b.run(None, {"x": x})
            assert got.shape == expected.shape
            np.testing.assert_array_equal(got, expected)
