"""`fuse-conv-activation` output in ONNX Runtime.

tract cannot run `com.microsoft.FusedConv`, so the Rust tests check the
structure only; here ONNX Runtime runs the original and the fused model on the
same inputs. ORT's own graph optimizations are switched off for the fused
model's comparison run as well as enabled (the default), so the check does not
depend on ORT re-fusing or splitting the node.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import _interop

RTOL, ATOL = 1e-4, 1e-5

# (activation, extra inputs built by name, attributes, expected activation_params)
ACTIVATIONS = [
    ("Relu", [], {}, None),
    ("Clip", ["clip_lo", "clip_hi"], {}, [-0.5, 0.5]),
    ("LeakyRelu", [], {"alpha": 0.2}, [0.2]),
    ("HardSigmoid", [], {"alpha": 0.3, "beta": 0.4}, [0.3, 0.4]),
    ("Sigmoid", [], {}, None),
    ("Tanh", [], {}, None),
]


def _chain_model(path):
    """Conv -> activation, six times, one of each activation ORT fuses (opset 17)."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array(np.array(-0.5, np.float32), "clip_lo"),
        numpy_helper.from_array(np.array(0.5, np.float32), "clip_hi"),
    ]
    nodes = []
    x = "x"
    for i, (op, extra, attrs, _) in enumerate(ACTIVATIONS):
        w = rng.uniform(-0.5, 0.5, (4, 4, 3, 3)).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, (4,)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]))
        out = "y" if i == len(ACTIVATIONS) - 1 else f"a{i}"
        nodes.append(helper.make_node(op, [f"c{i}", *extra], [out], name=f"act{i}", **attrs))
        x = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 6, 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def _optimize(src, out, passes):
    proc = _interop.run_cli(
        "optimize", src, "-o", out, "--passes", passes, "--target", "onnxruntime", "--no-verify", "--validate"
    )
    assert proc.returncode == 0, _interop.describe(proc)
    return onnx.load(str(out))


def _session(path, optimize: bool):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _assert_same_in_ort(original, fused, tag):
    for optimize in (False, True):
        a = _session(original, optimize)
        b = _session(fused, optimize)
        for seed in ("a", "b"):
            feeds = _interop.make_inputs(a, f"{tag}-{seed}")
            expected = _interop.run(a, feeds)
            got = _interop.run(b, feeds)
            assert list(expected) == list(got)
            for name, e in expected.items():
                g = got[name]
                diff = float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))))
                assert np.allclose(g, e, rtol=RTOL, atol=ATOL), f"{tag}: {name}: max abs diff {diff}"


def _ms_opset(model):
    return [o.version for o in model.opset_import if o.domain == "com.microsoft"]


def test_every_activation_fuses_and_matches(infopt, tmp_path):
    src = tmp_path / "chain.onnx"
    _chain_model(src)
    out = tmp_path / "fused.onnx"
    model = _optimize(src, out, "fuse-conv-activation")
    fused = [n for n in model.graph.node if n.op_type == "FusedConv"]
    assert len(fused) == len(model.graph.node) == len(ACTIVATIONS)
    assert _ms_opset(model) == [1]
    for node, (op, _, _, params) in zip(fused, ACTIVATIONS):
        assert node.domain == "com.microsoft"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert attrs["activation"] == op.encode()
        if params is None:
            assert "activation_params" not in attrs
        else:
            assert np.allclose(attrs["activation_params"], params)
    assert model.graph.output[0].name == "y"
    _assert_same_in_ort(src, out, "chain")


def test_cnn_fixture_bn_then_fused_conv_matches(infopt, tmp_path):
    src = _interop.MODELS / "cnn_bn_relu.onnx"
    out = tmp_path / "cnn.onnx"
    model = _optimize(src, out, "fuse-conv-bn,fuse-conv-activation,eliminate-dead")
    ops = sorted(n.op_type for n in model.graph.node)
    assert ops.count("FusedConv") == 2
    assert ops.count("BatchNormalization") == 1  # the conv whose output is also read by an Add
    assert _ms_opset(model) == [1]
    _assert_same_in_ort(src, out, "cnn")


@pytest.mark.parametrize("target", ["portable", "tensorrt"])
def test_other_targets_leave_the_model_unchanged(infopt, tmp_path, target):
    src = tmp_path / "chain.onnx"
    _chain_model(src)
    out = tmp_path / "same.onnx"
    proc = _interop.run_cli(
        "optimize", src, "-o", out, "--passes", "fuse-conv-activation", "--target", target, "--no-verify"
    )
    assert proc.returncode == 0, _interop.describe(proc)
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node] == [n.op_type for n in onnx.load(str(src)).graph.node]
    assert _ms_opset(model) == []


def test_gemm_activations_fuse_into_fused_gemm_and_match(infopt, tmp_path):
    """Gemm -> Relu / LeakyRelu / Sigmoid / Tanh / HardSigmoid (a scikit-learn MLP's layers)."""
    rng = np.random.default_rng(23)
    acts = [("Relu", {}), ("LeakyRelu", {"alpha": 0.1}), ("Sigmoid", {}), ("Tanh", {}), ("HardSigmoid", {})]
    inits, nodes, x = [], [], "x"
    for i, (op, attrs) in enumerate(acts):
        inits += [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (8, 8)).astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(rng.uniform(-0.1, 0.1, (8,)).astype(np.float32), f"c{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"c{i}"], [f"g{i}"], name=f"gemm{i}", transB=1))
        out = "y" if i == len(acts) - 1 else f"a{i}"
        nodes.append(helper.make_node(op, [f"g{i}"], [out], name=f"act{i}", **attrs))
        x = out
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        inits,
    )
    src = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(src))
    out = tmp_path / "fused.onnx"
    model = _optimize(src, out, "fuse-conv-activation")
    assert [n.op_type for n in model.graph.node] == ["FusedGemm"] * len(acts)
    attrs = [{a.name: helper.get_attribute_value(a) for a in n.attribute} for n in model.graph.node]
    assert [a["activation"] for a in attrs] == [op.encode() for op, _ in acts]
    assert np.isclose(attrs[1]["activation_alpha"], 0.1)
    assert np.allclose([attrs[4]["activation_alpha"], attrs[4]["activation_beta"]], [0.2, 0.5])
    _assert_same_in_ort(src, out, "mlp")


def _conv1d_model(path):
    """silero-vad's shape of layer: 1-D Conv -> Relu, then 1-D Conv -> Sigmoid (opset 17)."""
    rng = np.random.default_rng(11)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (6, 4, 3)).astype(np.float32), "w0"),
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, (6,)).astype(np.float32), "b0"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (2, 6, 1)).astype(np.float32), "w1"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="conv0", pads=[1, 1], strides=[2]),
        helper.make_node("Relu", ["c0"], ["a0"], name="relu0"),
        helper.make_node("Conv", ["a0", "w1"], ["c1"], name="conv1"),
        helper.make_node("Sigmoid", ["c1"], ["y"], name="sigmoid1"),
    ]
    graph = helper.make_graph(
        nodes,
        "conv1d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 8])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def test_one_dimensional_convs_fuse_and_match(infopt, tmp_path):
    src = tmp_path / "conv1d.onnx"
    _conv1d_model(src)
    out = tmp_path / "fused.onnx"
    model = _optimize(src, out, "fuse-conv-activation")
    assert [n.op_type for n in model.graph.node] == ["FusedConv", "FusedConv"]
    acts = [helper.get_attribute_value(a) for n in model.graph.node for a in n.attribute if a.name == "activation"]
    assert acts == [b"Relu", b"Sigmoid"]
    _assert_same_in_ort(src, out, "conv1d")


def _target_onnxruntime(src, out, *extra):
    """The built-in pipeline for ONNX Runtime, verification on (in ONNX Runtime)."""
    proc = _interop.run_cli("optimize", src, "-o", out, "--target", "onnxruntime", "--json", *extra)
    assert proc.returncode == 0, _interop.describe(proc)
    return onnx.load(str(out)), json.loads(proc.stdout)


def test_built_in_pipeline_fuses_only_for_the_cpu_provider(infopt, tmp_path):
    src = tmp_path / "chain.onnx"
    _chain_model(src)
    # No --ep: the installed onnxruntime (PyPI's, CPU only) is the provider, so the pairs fuse.
    assert set(ort.get_available_providers()) <= {"CPUExecutionProvider", "AzureExecutionProvider"}
    out = tmp_path / "default.onnx"
    model, report = _target_onnxruntime(src, out)
    assert [n.op_type for n in model.graph.node] == ["FusedConv"] * len(ACTIVATIONS)
    assert any("fused for ONNX Runtime's CPU provider" in d for d in report["details"]), report["details"]
    _assert_same_in_ort(src, out, "chain-default")
    # --ep cuda: the output must load in CUDA's provider, so the pairs stay (ORT fuses them at load).
    model, report = _target_onnxruntime(src, tmp_path / "cuda.onnx", "--ep", "cuda", "--no-verify")
    assert [n.op_type for n in model.graph.node].count("FusedConv") == 0
    assert _ms_opset(model) == []
    # --ep cpu: every pair is one FusedConv, verified in ONNX Runtime's CPU provider.
    out = tmp_path / "cpu.onnx"
    model, report = _target_onnxruntime(src, out, "--ep", "cpu")
    assert [n.op_type for n in model.graph.node] == ["FusedConv"] * len(ACTIVATIONS)
    assert report["verification"]["passed"] is True
    assert report["verification"]["backend"]["name"] == "ort", report["verification"]["backend"]
    _assert_same_in_ort(src, out, "chain-cpu")
