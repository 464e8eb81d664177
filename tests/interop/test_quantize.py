"""`quantize-int8` output in ONNX Runtime.

The quantized fixtures in fixtures/models/quantized/ are written by the Rust
test `calibration/tests/quantize.rs::quantized_fixtures_are_current` (which
also checks they are current). Here: they pass the full ONNX checker, load
and run in ORT, stay close to the FP32 model, and, for the ONNX Runtime
placement, ORT's QDQ transformer turns every quantized Conv into QLinearConv
(no Conv left running in float between DequantizeLinear nodes).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest

import _interop

Q = _interop.MODELS / "quantized"
CASES = [
    ("cnn_int8_tensorrt.onnx", _interop.MODELS / "cnn_bn_relu.onnx"),
    ("cnn_int8_onnxruntime.onnx", _interop.MODELS / "cnn_bn_relu.onnx"),
    ("opset12_int8.onnx", Q / "opset12_fp32.onnx"),
    ("mbconv_int8_onnxruntime.onnx", Q / "mbconv_fp32.onnx"),
]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name,fp32", CASES, ids=[c[0] for c in CASES])
def test_quantized_fixture_is_valid_runs_and_is_close(name, fp32):
    path = Q / name
    onnx.checker.check_model(str(path), full_check=True)
    m = onnx.load(str(path))
    ops = Counter(n.op_type for n in m.graph.node)
    assert ops["QuantizeLinear"] > 0 and ops["DequantizeLinear"] > ops["QuantizeLinear"]
    assert {o.domain: o.version for o in m.opset_import}.get("", 0) >= 13
    q, f = _interop.ort_session(path), _interop.ort_session(fp32)
    rng = np.random.default_rng(7)
    for _ in range(3):
        # The calibration data's distribution (tract's seeded inputs: uniform in [-1, 1)).
        feeds = {
            i.name: rng.uniform(-1, 1, [d if isinstance(d, int) else 2 for d in i.shape]).astype(np.float32)
            for i in f.get_inputs()
        }
        want, got = _interop.run(f, feeds), _interop.run(q, feeds)
        for out, w in want.items():
            assert got[out].shape == w.shape
            assert cosine(got[out], w) >= 0.99, f"{out}: cosine {cosine(got[out], w)}"


def ort_optimized_ops(path, tmp_path) -> Counter:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return Counter(n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node)


def test_onnxruntime_placement_fuses_into_integer_kernels(tmp_path):
    ops = ort_optimized_ops(Q / "cnn_int8_onnxruntime.onnx", tmp_path)
    src = onnx.load(str(Q / "cnn_int8_onnxruntime.onnx"))
    # Convs the pass quantized: those reading a dequantized weight.
    quantized = sum(1 for n in src.graph.node if n.op_type == "Conv" and n.input[1].endswith("_dq"))
    assert quantized >= 3
    assert ops["QLinearConv"] == quantized, ops
    assert ops["QGemm"] == 1, ops
    assert ops["QLinearAdd"] >= 1, ops
    # The one float Conv is the one fuse-conv-bn could not fold (its output
    # also feeds an Add); no float Conv reads a DequantizeLinear.
    assert ops["Conv"] + ops.get("FusedConv", 0) == 1, ops


def test_mbconv_runs_as_one_integer_chain(tmp_path):
    # SiLU (Sigmoid, Mul), the depthwise conv and squeeze-excite stay in INT8:
    # no float Conv/Sigmoid/Mul and no QuantizeLinear in the middle.
    ops = ort_optimized_ops(Q / "mbconv_int8_onnxruntime.onnx", tmp_path)
    assert ops["QLinearConv"] == 5, ops
    assert ops["QLinearSigmoid"] == 4 and ops["QLinearMul"] == 4, ops
    assert ops["QLinearGlobalAveragePool"] == 1, ops
    for float_op in ("Conv", "FusedConv", "Sigmoid", "Mul", "QuickGelu", "GlobalAveragePool"):
        assert ops.get(float_op, 0) == 0, ops
    assert ops["QuantizeLinear"] == 1, ops  # the model input
