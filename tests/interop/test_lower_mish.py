"""`lower-mish` (Mish as x / (1 + 2 / (e^x (e^x + 2)))) in ONNX Runtime, through the default
`optimize` command: the values of ONNX Runtime's own Mish (opset 18) and of the Softplus, Tanh
and Mul that older exports write, within a few float32 ulps, with the same special values."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import _interop


def _mish_model(path, as_op):
    """A 1x1 Conv, then Mish: the op (opset 18) or x * tanh(softplus(x)) (opset 13)."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.uniform(-3, 3, (6, 3, 1, 1)).astype(np.float32), "w")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv")]
    if as_op:
        nodes.append(helper.make_node("Mish", ["c"], ["y"], name="mish"))
    else:
        nodes += [
            helper.make_node("Softplus", ["c"], ["s"], name="softplus"),
            helper.make_node("Tanh", ["s"], ["t"], name="tanh"),
            helper.make_node("Mul", ["c", "t"], ["y"], name="mish"),
        ]
    graph = helper.make_graph(
        nodes,
        "mish",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, "h", "w"])],
        inits,
    )
    opset = 18 if as_op else 13
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


@pytest.mark.parametrize("as_op", [True, False], ids=["mish-op", "softplus-tanh-mul"])
def test_mish_is_lowered_by_the_default_pipeline_and_computes_the_same(infopt, tmp_path, as_op):
    src, out = tmp_path / "mish.onnx", tmp_path / "lowered.onnx"
    _mish_model(src, as_op)
    proc = _interop.run_cli("optimize", src, "-o", out)
    assert proc.returncode == 0, _interop.describe(proc)
    onnx.checker.check_model(str(out), full_check=True)
    model = onnx.load(str(out))
    assert sorted(n.op_type for n in model.graph.node) == ["Add", "Add", "Conv", "Div", "Div", "Exp", "Mul"]
    assert [o.name for o in model.graph.output] == ["y"]
    a, b = _interop.ort_session(src), _interop.ort_session(out)
    rng = np.random.default_rng(7)
    for shape in [(1, 3, 8, 6), (2, 3, 33, 17)]:
        # Wide enough that e^x overflows (x > 88.7) and underflows (x < -87) after the Conv.
        x = (rng.standard_normal(shape) * 12).astype(np.float32)
        x[0, :, 0, 0] = 0.0
        x[0, :, 1, 1] = np.inf
        x[0, :, 2, 2] = -np.inf
        x[0, 0, 3, 3] = np.nan
        expected, got = _interop.run(a, {"x": x})["y"], _interop.run(b, {"x": x})["y"]
        assert got.shape == expected.shape
        # NaN and infinities where Mish gives them, and nowhere else.
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
        finite = np.isfinite(expected)
        assert np.abs(expected[finite]).max() > 88.7  # e^x overflowed somewhere
        # A few ulps, where the value is not negligible (Mish's own kernel flushes values
        # below ~1e-38 that the lowered form keeps).
        np.testing.assert_allclose(got[finite], expected[finite], rtol=2e-6, atol=1e-30)
