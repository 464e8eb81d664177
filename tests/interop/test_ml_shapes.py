"""A scikit-learn MLP as skl2onnx writes it (ai.onnx.ml Scaler, a Cast to float,
MatMul + Add + Relu layers, a final Reshape): with the Scaler's output shape
inferred, the Cast and the Reshape go and the layers become Gemms, FusedGemms
with `--ep cpu`. Outputs compared in ONNX Runtime."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import _interop


def _mlp(path):
    rng = np.random.default_rng(9)
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (12, 16)).astype(np.float32), "w0"),
        numpy_helper.from_array(rng.uniform(-1, 1, (1, 16)).astype(np.float32), "b0"),
        numpy_helper.from_array(rng.uniform(-1, 1, (16, 1)).astype(np.float32), "w1"),
        numpy_helper.from_array(np.array([[0.25]], np.float32), "b1"),
        numpy_helper.from_array(np.array([-1, 1], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Scaler", ["X"], ["scaled"], name="scaler", domain="ai.onnx.ml",
                         offset=[0.5] * 12, scale=[2.0] * 12),
        helper.make_node("Cast", ["scaled"], ["cast_input"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["cast_input", "w0"], ["m0"], name="matmul0"),
        helper.make_node("Add", ["m0", "b0"], ["a0"], name="add0"),
        helper.make_node("Relu", ["a0"], ["h0"], name="relu0"),
        helper.make_node("MatMul", ["h0", "w1"], ["m1"], name="matmul1"),
        helper.make_node("Add", ["m1", "b1"], ["a1"], name="add1"),
        helper.make_node("Reshape", ["a1", "shape"], ["variable"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 12])],
        [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)],
                              ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def test_scaler_output_shape_lets_the_mlp_fuse(infopt, tmp_path):
    import onnxruntime as ort

    src = tmp_path / "mlp.onnx"
    _mlp(src)
    # No --ep: the installed onnxruntime (CPU only) is the provider, as with --ep cpu.
    # --ep cuda: FusedGemm would bind the file to the CPU provider, so the Relu stays.
    for extra, ops in [
        ([], ["FusedGemm", "Gemm", "Scaler"]),
        (["--ep", "cpu"], ["FusedGemm", "Gemm", "Scaler"]),
        (["--ep", "cuda", "--no-verify"], ["Gemm", "Gemm", "Relu", "Scaler"]),
    ]:
        out = tmp_path / "out.onnx"
        proc = _interop.run_cli("optimize", src, "-o", out, "--target", "onnxruntime", "--json", *extra)
        assert proc.returncode == 0, _interop.describe(proc)
        if "--no-verify" not in extra:
            assert json.loads(proc.stdout)["verification"]["passed"] is True
        model = onnx.load(str(out))
        assert sorted(n.op_type for n in model.graph.node) == ops
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        a = ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
        b = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
        x = np.random.default_rng(1).standard_normal((5, 12)).astype(np.float32)
        (expected,), (got,) = a.run(None, {"X": x}), b.run(None, {"X": x})
        assert got.shape == expected.shape == (5, 1)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
