"""A model with a sequence output (SplitToSequence of a MatMul's result) next to a tensor
one: every default command exits 0 (it stopped at "cannot run the original model"),
the sequence is compared element by element (its tensors one after the other), and the
outputs load in ONNX Runtime, pass the full checker and compute the original's values."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import _interop


def _model(path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 1, (16, 12)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
         helper.make_node("SplitToSequence", ["y"], ["s"], name="split", axis=1, keepdims=1),
         helper.make_node("Relu", ["y"], ["r"], name="relu")],
        "sequence",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", 12])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


@pytest.mark.parametrize("extra", [[], ["--fp16"], ["--int8", "--calib-data", "random:8"]],
                         ids=["optimize", "fp16", "int8"])
def test_a_sequence_output_is_compared_and_kept(infopt, tmp_path, extra):
    import onnxruntime as ort

    src = tmp_path / "seq.onnx"
    _model(src)
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli("optimize", src, "-o", out, "--json", *extra)
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    compared = {o["name"]: o["elements"] for o in report["verification"]["outputs"]}
    assert set(compared) == {"s", "r"}, compared
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    (s0, r0), (s1, r1) = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"x": x})
                          for p in (src, out))
    assert len(s1) == len(s0) == 12
    tolerance = 0.05 if extra else 1e-6
    for a, b in zip(s1, s0):
        np.testing.assert_allclose(a, b, atol=tolerance * 10, rtol=tolerance)
    np.testing.assert_allclose(r1, r0, atol=tolerance * 10, rtol=tolerance)
