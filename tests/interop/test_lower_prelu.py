"""`lower-prelu` (PRelu as Relu(x) + slope * Min(x, 0)) in ONNX Runtime, through the default
`optimize` command: the same values as ONNX Runtime's own PRelu, and the rewrite in the file."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import _interop


def _prelu_model(path, slope):
    """A 1x1 Conv, then PRelu with a per-channel slope (opset 13), as MediaPipe's TFLite
    exports write it: slope [1, C, 1, 1]."""
    c = slope.shape[1]
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (c, 3, 1, 1)).astype(np.float32), "w"),
        numpy_helper.from_array(slope, "slope"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("PRelu", ["c", "slope"], ["y"], name="prelu"),
    ]
    graph = helper.make_graph(
        nodes,
        "prelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", c, "h", "w"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def test_prelu_is_lowered_by_the_default_pipeline_and_computes_the_same(infopt, tmp_path):
    # Slopes of either sign, zero and above one.
    slope = np.array([0.25, -1.5, 0.0, 2.0, 0.01, 1.0], np.float32).reshape(1, 6, 1, 1)
    src, out = tmp_path / "prelu.onnx", tmp_path / "lowered.onnx"
    _prelu_model(src, slope)
    proc = _interop.run_cli("optimize", src, "-o", out)
    assert proc.returncode == 0, _interop.describe(proc)
    onnx.checker.check_model(str(out), full_check=True)
    model = onnx.load(str(out))
    assert sorted(n.op_type for n in model.graph.node) == ["Add", "Conv", "Min", "Mul", "Relu"]
    assert [o.name for o in model.graph.output] == ["y"]
    a, b = _interop.ort_session(src), _interop.ort_session(out)
    rng = np.random.default_rng(7)
    for shape in [(1, 3, 8, 6), (2, 3, 33, 17)]:
        x = rng.standard_normal(shape).astype(np.float32)
        # Zeros, infinities and NaN through the Conv's 1x1 sums.
        x[0, :, 0, 0] = 0.0
        x[0, :, 1, 1] = np.inf
        x[0, :, 2, 2] = -np.inf
        x[0, 0, 3, 3] = np.nan
        expected, got = _interop.run(a, {"x": x})["y"], _interop.run(b, {"x": x})["y"]
        assert got.shape == expected.shape
        # The same values, NaN where PRelu gives NaN (the sign of a zero may differ).
        np.testing.assert_array_equal(got, expected)
