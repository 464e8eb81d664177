"""`fuse-quick-gelu` output in ONNX Runtime, and the KV-cache decoder fixtures
verified by the command line in ONNX Runtime.

tract cannot run `com.microsoft.QuickGelu`, so the Rust tests check the
structure; here ONNX Runtime runs the original and the fused model on the same
inputs, with its own graph optimizations off (so nothing re-fuses the
original) and at their default.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import _interop

RTOL, ATOL = 1e-4, 1e-5


def _silu_model(path):
    """Conv -> SiLU (both operand orders), CLIP's x*sigmoid(1.702x), and a
    squeeze-excitation gate x*sigmoid(pool(x)) that must stay (opset 17)."""
    rng = np.random.default_rng(19)
    w = rng.uniform(-0.5, 0.5, (4, 4, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(1.702, np.float32), "k")]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["s0"], name="sig0"),
        helper.make_node("Mul", ["c", "s0"], ["a0"], name="silu0"),
        helper.make_node("Sigmoid", ["a0"], ["s1"], name="sig1"),
        helper.make_node("Mul", ["s1", "a0"], ["a1"], name="silu1"),
        helper.make_node("Mul", ["a1", "k"], ["ka"], name="scale"),
        helper.make_node("Sigmoid", ["ka"], ["s2"], name="sig2"),
        helper.make_node("Mul", ["a1", "s2"], ["a2"], name="quick"),
        helper.make_node("GlobalAveragePool", ["a2"], ["p"], name="pool"),
        helper.make_node("Sigmoid", ["p"], ["g"], name="gate"),
        helper.make_node("Mul", ["a2", "g"], ["y"], name="se"),
    ]
    graph = helper.make_graph(
        nodes, "silu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 6, 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def _session(path, optimize: bool):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def test_silu_becomes_quick_gelu_and_matches_in_ort(infopt, tmp_path):
    src = tmp_path / "silu.onnx"
    _silu_model(src)
    out = tmp_path / "fused.onnx"
    proc = _interop.run_cli(
        "optimize", src, "-o", out, "--passes", "fuse-quick-gelu", "--target", "onnxruntime",
        "--no-verify", "--validate",
    )
    assert proc.returncode == 0, _interop.describe(proc)
    model = onnx.load(str(out))
    ops = [(n.domain, n.op_type) for n in model.graph.node]
    assert ops == [("", "Conv"), ("com.microsoft", "QuickGelu"), ("com.microsoft", "QuickGelu"),
                   ("com.microsoft", "QuickGelu"), ("", "GlobalAveragePool"), ("", "Sigmoid"), ("", "Mul")]
    alphas = [helper.get_attribute_value(n.attribute[0]) for n in model.graph.node if n.op_type == "QuickGelu"]
    assert np.allclose(alphas, [1.0, 1.0, 1.702])
    for optimize in (False, True):
        a, b = _session(src, optimize), _session(out, optimize)
        for seed in ("a", "b"):
            feeds = _interop.make_inputs(a, f"silu-{seed}")
            expected, got = _interop.run(a, feeds), _interop.run(b, feeds)
            for name, e in expected.items():
                assert np.allclose(got[name], e, rtol=RTOL, atol=ATOL), name


@pytest.mark.parametrize("fixture", ["kv_decoder.onnx", "kv_decoder_genai.onnx", "kv_decoder_optimum.onnx"])
def test_kv_decoder_verifies_in_ort_with_the_mask_over_past_and_new(infopt, tmp_path, fixture):
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli(
        "optimize", _interop.MODELS / fixture, "-o", out, "--backend", "ort", "--target", "onnxruntime", "--json",
    )
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert report["verification"]["passed"] is True
    shapes = dict((name, dims) for name, dims in report["verification"]["input_shapes"])
    seq = shapes["input_ids"][1]
    past = [dims for name, dims in shapes.items() if "past" in name][0][2]
    assert shapes["attention_mask"][1] == past + seq
