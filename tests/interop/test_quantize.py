"""`quantize-int8` output in ONNX Runtime.

The quantized fixtures in fixtures/models/quantized/ are written by the Rust
test `calibration/tests/quantize.rs::quantized_fixtures_are_current` (which
also checks they are current). Here: they pass the full ONNX checker, load
and run in ORT, stay close to the FP32 model, and, for the ONNX Runtime
placement, ORT's QDQ transformer turns every quantized Conv into QLinearConv
(no Conv left running in float between DequantizeLinear nodes).
"""

from __future__ import annotations

import json
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


def _assert_close_in_ort(src, out, input_name, shape, output, seed):
    """Three inputs uniform in [-1, 1): `out`'s output within cosine 0.99 of `src`'s, in ORT."""
    q, f = _interop.ort_session(out), _interop.ort_session(src)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        feeds = {input_name: rng.uniform(-1, 1, shape).astype(np.float32)}
        want, got = _interop.run(f, feeds)[output], _interop.run(q, feeds)[output]
        assert cosine(got, want) >= 0.99, cosine(got, want)


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


def _calibration_folder(folder, shape, n, seed):
    folder.mkdir()
    rng = np.random.default_rng(seed)
    for i in range(n):
        np.save(folder / f"{i:03d}.npy", rng.uniform(-1, 1, shape).astype(np.float32))
    return folder


@pytest.mark.parametrize("fixture,shape", [
    (_interop.MODELS / "cnn_bn_relu.onnx", (1, 3, 32, 32)),
    (Q / "mbconv_fp32.onnx", (1, 8, 6, 6)),
], ids=["cnn_bn_relu", "mbconv"])
def test_as_typed_onnxruntime_int8_runs_in_integer_kernels(fixture, shape, tmp_path):
    # The command as typed: the default pipeline with its contrib fusions
    # for the onnxruntime target. quantize-int8 runs before
    # fuse-conv-activation, so no Conv became a float FusedConv first, and
    # ONNX Runtime turns every quantized Conv into a QLinearConv.
    data = _calibration_folder(tmp_path / "calib", shape, 8, 3)
    out = tmp_path / "q.onnx"
    proc = _interop.run_cli("optimize", fixture, "-o", out, "--int8", "--calib-data", data,
                            "--calib-samples", "6", "--target", "onnxruntime")
    assert proc.returncode == 0, _interop.describe(proc)
    m = onnx.load(str(out))
    convs = [n for n in m.graph.node if n.op_type in ("Conv", "FusedConv")]
    quantized = [n for n in convs if n.op_type == "Conv" and n.input[1].endswith("_dq")]
    # Every Conv but the one fuse-conv-bn cannot fold in cnn_bn_relu (its
    # output also feeds an Add, so it has no quantized output of its own).
    assert len(quantized) >= len(convs) - 1 and quantized, Counter(n.op_type for n in m.graph.node)
    for n in quantized:
        producers = {o: p for p in m.graph.node for o in p.output}
        assert producers[n.input[0]].op_type == "DequantizeLinear", n.name
    ops = ort_optimized_ops(out, tmp_path)
    assert ops["QLinearConv"] == len(quantized), ops


def _weight_source(m: onnx.ModelProto, node_name: str) -> str:
    """What feeds `node_name`'s weight: 'dq' (a DequantizeLinear) or the
    initializer's element type name."""
    node = next(n for n in m.graph.node if n.name == node_name)
    producers = {o: n.op_type for n in m.graph.node for o in n.output}
    if producers.get(node.input[1]) == "DequantizeLinear":
        return "dq"
    init = next(t for t in m.graph.initializer if t.name == node.input[1])
    return onnx.TensorProto.DataType.Name(init.data_type)


@pytest.mark.parametrize("command,target", [
    ("optimize", "tensorrt"),
    ("optimize", "onnxruntime"),
    ("build-engine", "tensorrt"),
])
def test_int8_override_keeps_the_layer_float_in_ort(command, target, tmp_path):
    """`--int8 --precision conv2/Conv=fp32`: the written graph keeps conv2's
    weight float32 while its neighbours read INT8 weights; the model passes
    the checker, runs in ONNX Runtime close to the float original, and ORT
    runs conv2 as a float Conv (no QLinearConv for it)."""
    fixture = _interop.MODELS / "cnn_bn_relu.onnx"
    data = _calibration_folder(tmp_path / "calib", (1, 3, 32, 32), 12, 5)
    out = tmp_path / "q.onnx"
    common = ["--int8", "--calib-data", data, "--calib-samples", "8",
              "--precision", "conv2/Conv=fp32", "--json"]
    if command == "optimize":
        args = ["optimize", fixture, "-o", out, "--target", target, *common]
    else:
        args = ["build-engine", fixture, "--emit-onnx", out, "--input-shape", "input:1x3x32x32", *common]
    proc = _interop.run_cli(*args)
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert report["int8"]["kept_by_user"] == ["conv2/Conv (fp32)"]
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out))
    assert _weight_source(m, "conv2/Conv") == "FLOAT"
    assert _weight_source(m, "conv1/Conv") == "dq"
    assert _weight_source(m, "fc/Gemm") == "dq"

    ref, q = _interop.ort_session(fixture), _interop.ort_session(out)
    rng = np.random.default_rng(11)
    for _ in range(3):
        shape = (1, 3, 32, 32) if command == "build-engine" else (2, 3, 32, 32)
        feeds = {"input": rng.uniform(-1, 1, shape).astype(np.float32)}
        want, got = _interop.run(ref, feeds), _interop.run(q, feeds)
        for name, w in want.items():
            assert cosine(got[name], w) >= 0.99, f"{name}: cosine {cosine(got[name], w)}"
    if target == "onnxruntime":
        ops = ort_optimized_ops(out, tmp_path)
        quantized = sum(1 for n in m.graph.node if n.op_type == "Conv" and _weight_source(m, n.name) == "dq")
        assert ops["QLinearConv"] == quantized, ops
        # conv2 and the Conv fuse-conv-bn cannot fold stay float.
        assert ops["Conv"] + ops.get("FusedConv", 0) == 2, ops


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_int8_on_a_model_already_quantized_says_so_and_keeps_it(target, tmp_path):
    # ONNX Runtime's quantize_static output (QDQ, INT32 biases): nothing to calibrate.
    # Judged against itself, the search compared ONNX Runtime's integer kernels with
    # its own Q/DQ emulation and exited 4, or 0, by a timing's noise.
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    shape = (1, 3, 32, 32)
    rng = np.random.default_rng(5)
    feeds = [{"input": rng.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    src = _interop.MODELS / "cnn_bn_relu.onnx"
    assert [i.name for i in onnx.load(str(src)).graph.input] == ["input"]
    qdq = tmp_path / "qdq.onnx"
    quantize_static(str(src), str(qdq), Reader(), quant_format=QuantFormat.QDQ)
    data = _calibration_folder(tmp_path / "calib", shape, 8, 3)
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli("optimize", qdq, "-o", out, "--int8", "--calib-data", data,
                            "--target", target, "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert any("the model is already quantized" in n for n in report["notes"]), report["notes"]
    assert "calibrat" not in proc.stderr.split("already quantized")[0].lower(), proc.stderr
    before = Counter(n.op_type for n in onnx.load(str(qdq)).graph.node)
    after = Counter(n.op_type for n in onnx.load(str(out)).graph.node)
    assert after["DequantizeLinear"] == before["DequantizeLinear"], (before, after)
    a = ort.InferenceSession(str(qdq), providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for f in feeds[:3]:
        np.testing.assert_allclose(b.run(None, f)[0], a.run(None, f)[0], rtol=1e-4, atol=1e-4)


def test_fp16_on_a_model_with_quantized_activations_keeps_float32(tmp_path):
    # float16 error before a QuantizeLinear moves values across INT8 steps (Smart Turn
    # v3.2, shipped INT8: 4% of its decisions changed, verified on two generated inputs).
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    rng = np.random.default_rng(6)
    feeds = iter([{"input": rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)} for _ in range(4)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(feeds, None)

    qdq = tmp_path / "qdq.onnx"
    quantize_static(str(_interop.MODELS / "cnn_bn_relu.onnx"), str(qdq), Reader(), quant_format=QuantFormat.QDQ)
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli("optimize", qdq, "-o", out, "--fp16", "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert any("activations are already quantized" in n for n in report["notes"]), report["notes"]
    m = onnx.load(str(out))
    halves = [t.name for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16]
    casts = [n.name for n in m.graph.node if n.op_type == "Cast"]
    assert not halves and not casts, (halves, casts)


def _relu6_block(path):
    """x → Conv → Clip(0, 6) → depthwise Conv → Clip(0, 6) → Conv → Clip(0, 6)
    → GlobalAveragePool → Flatten → Gemm: a MobileNetV2 block's ReLU6 as torch,
    Keras and TFLite export it (bounds as inputs, opset 13)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    inits, nodes = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    const("zero", 0.0)
    const("six", 6.0)
    x = "x"
    for i, (cout, cin, k, group) in enumerate([(16, 3, 3, 1), (16, 16, 3, 16), (8, 16, 1, 1)]):
        w = const(f"w{i}", rng.normal(0, (2.0 / (cin // group * k * k)) ** 0.5, (cout, cin // group, k, k)))
        b = const(f"b{i}", rng.normal(0, 0.2, cout))
        nodes.append(helper.make_node("Conv", [x, w, b], [f"c{i}"], name=f"conv{i}", group=group,
                                      pads=[k // 2] * 4, kernel_shape=[k, k]))
        nodes.append(helper.make_node("Clip", [f"c{i}", "zero", "six"], [f"r{i}"], name=f"relu6_{i}"))
        x = f"r{i}"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["p"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["p"], ["f"], name="flatten"))
    const("wg", rng.normal(0, 0.3, (5, 8)))
    const("bg", rng.normal(0, 0.1, 5))
    nodes.append(helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], name="head", transB=1))
    g = helper.make_graph(nodes, "relu6", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def test_onnxruntime_int8_quantizes_after_relu6_so_ort_drops_the_clip(tmp_path):
    # Before, the Conv output in front of each ReLU6 was quantized with its
    # whole range (MediaPipe's hand landmarks: [-28, 35] where the ReLU6
    # keeps 0..6, 20 dB after the first layer) and ORT ran every Clip in
    # float between a DequantizeLinear and a QuantizeLinear.
    fp32 = _relu6_block(tmp_path / "relu6.onnx")
    data = _calibration_folder(tmp_path / "calib", (1, 3, 8, 8), 12, 4)
    out = tmp_path / "q.onnx"
    proc = _interop.run_cli("optimize", fp32, "-o", out, "--int8", "--calib-data", data,
                            "--calib-samples", "8", "--target", "onnxruntime")
    assert proc.returncode == 0, _interop.describe(proc)
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out))
    producers = {o: p for p in m.graph.node for o in p.output}
    clips = [n for n in m.graph.node if n.op_type == "Clip"]
    assert len(clips) == 3, Counter(n.op_type for n in m.graph.node)
    for c in clips:
        # The Clip reads the Conv itself; its output goes to a UINT8 Q with
        # zero point 0 and a range within 0..6.
        assert producers[c.input[0]].op_type == "Conv", c.name
        (q,) = [n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == c.output[0]]
        inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
        assert inits[q.input[2]].dtype == np.uint8 and int(inits[q.input[2]]) == 0, c.name
        assert 0 < float(inits[q.input[1]]) * 255 <= 6.0 + 1e-5, c.name
    ops = ort_optimized_ops(out, tmp_path)
    assert ops["QLinearConv"] == 3, ops
    assert ops.get("Clip", 0) == 0, ops
    f, q = _interop.ort_session(fp32), _interop.ort_session(out)
    rng = np.random.default_rng(9)
    for _ in range(4):
        feeds = {"x": rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)}
        want, got = _interop.run(f, feeds)["y"], _interop.run(q, feeds)["y"]
        assert cosine(got, want) >= 0.99, cosine(got, want)


@pytest.mark.parametrize("layout", ["stacked_npy", "positional_npz"])
def test_a_one_input_model_takes_an_unnamed_array_as_its_input(layout, tmp_path):
    # A model of one input: `np.save("calib.npy", stacked)` names its array
    # after the file, `np.savez(f, x)` calls it arr_0. Nothing else could be
    # meant, so both calibrate (they were refused as "not model inputs").
    fixture = _interop.MODELS / "cnn_bn_relu.onnx"
    rng = np.random.default_rng(5)
    # Stacked: the leading axis counts the samples, each one row of the batch.
    stacked = rng.uniform(-1, 1, (8, 3, 32, 32)).astype(np.float32)
    if layout == "stacked_npy":
        data = tmp_path / "calib.npy"
        np.save(data, stacked)
    else:
        data = tmp_path / "calib"
        data.mkdir()
        for i, x in enumerate(stacked):
            np.savez(data / f"{i:03d}.npz", x[None])
    out = tmp_path / "q.onnx"
    proc = _interop.run_cli("optimize", fixture, "-o", out, "--int8", "--calib-data", data,
                            "--calib-samples", "6")
    assert proc.returncode == 0, _interop.describe(proc)
    assert "calibrated" in proc.stderr, _interop.describe(proc)
    m = onnx.load(str(out))
    assert any(n.op_type == "DequantizeLinear" for n in m.graph.node)


def _multi_task_head(path):
    """x → Gemm → Relu, then three dense heads as MTCNN's O-Net has them
    (keras2onnx names): box offsets `dense_5` [N, 4], landmarks `dense_6`
    [N, 10] and a face probability `softmax_2` [N, 2]."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    inits = []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    nodes = [
        helper.make_node("Gemm", ["x", const("w0", rng.normal(0, 0.3, (16, 32))), const("b0", rng.normal(0, 0.1, 32))],
                         ["h0"], name="dense_3"),
        helper.make_node("Relu", ["h0"], ["h"], name="relu"),
    ]
    outputs = []
    for name, k in [("dense_5", 4), ("dense_6", 10), ("dense_4", 2)]:
        w, b = const(f"{name}_w", rng.normal(0, 0.3, (32, k))), const(f"{name}_b", rng.normal(0.5, 0.1, k))
        nodes.append(helper.make_node("Gemm", ["h", w, b], [name], name=name))
    nodes.append(helper.make_node("Softmax", ["dense_4"], ["softmax_2"], name="softmax_2", axis=1))
    for name, k in [("dense_5", 4), ("dense_6", 10), ("softmax_2", 2)]:
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", k]))
    g = helper.make_graph(nodes, "heads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          outputs, initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def test_int8_judges_box_and_landmark_heads_across_samples_not_as_classes(tmp_path):
    # Before, the dense box and landmark outputs beside the face probability
    # were judged as classifiers (top-1 of 4 offsets, of 10 coordinates).
    fp32 = _multi_task_head(tmp_path / "heads.onnx")
    data = _calibration_folder(tmp_path / "calib", (1, 16), 40, 6)
    out = tmp_path / "q.onnx"
    report = tmp_path / "r.json"
    proc = _interop.run_cli("optimize", fp32, "-o", out, "--int8", "--calib-data", data, "--calib-samples", "24",
                            "--report", report)
    assert proc.returncode == 0, _interop.describe(proc)
    onnx.checker.check_model(str(out), full_check=True)
    q = json.loads(report.read_text())["int8"]
    assert q["classifier_outputs"] == ["softmax_2"], q["classifier_outputs"]
    assert q["regression_outputs"] == ["dense_5", "dense_6"], q.get("regression_outputs")
    held = q["held_out"]
    assert held["samples"] == 16 and not held["on_calibration_samples"], held["samples"]
    assert sorted(held["top1_agreement"]) == ["softmax_2"], held["top1_agreement"]
    assert sorted(held["correlation"]) == ["dense_5", "dense_6"], held["correlation"]
    assert "neighbour_judged" not in held and held["parts"] == [], held.get("neighbour_judged")
    said = "correlation across samples >= 0.99 for each value of the regression outputs (dense_5, dense_6)"
    assert said in proc.stdout, proc.stdout
    # The written model keeps the landmarks: each coordinate follows FP32's.
    f, i8 = _interop.ort_session(fp32), _interop.ort_session(out)
    x = np.random.default_rng(8).uniform(-1, 1, (32, 16)).astype(np.float32)
    want, got = _interop.run(f, {"x": x})["dense_6"], _interop.run(i8, {"x": x})["dense_6"]
    for k in range(10):
        assert np.corrcoef(got[:, k], want[:, k])[0, 1] >= 0.99, k


def _mbconv_reduce_mean(path, opset):
    """An MBConv block whose squeeze-excite pools as timm writes it, `x.mean((2, 3),
    keepdim=True)`: ReduceMean with axes as an attribute (opset 13) or an input (18)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    inits, nodes = [], []

    def conv(x, name, cout, cin, k=1, group=1):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(cin // group * k * k)).astype(np.float32),
            f"{name}.w"))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}.b"))
        nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], name=name,
                                      kernel_shape=[k, k], pads=[k // 2] * 4, group=group))
        return name

    def silu(x):
        nodes.append(helper.make_node("Sigmoid", [x], [x + ".sig"], name=x + ".sigmoid"))
        nodes.append(helper.make_node("Mul", [x, x + ".sig"], [x + ".silu"], name=x + ".mul"))
        return x + ".silu"

    e = silu(conv("x", "expand", 32, 8))
    d = silu(conv(e, "dw", 32, 32, k=3, group=32))
    if opset >= 18:
        inits.append(numpy_helper.from_array(np.array([2, 3], np.int64), "se.axes"))
        nodes.append(helper.make_node("ReduceMean", [d, "se.axes"], ["se.mean"], name="se.mean", keepdims=1))
    else:
        nodes.append(helper.make_node("ReduceMean", [d], ["se.mean"], name="se.mean", axes=[2, 3], keepdims=1))
    s = conv("se.mean", "se1", 8, 32)
    nodes.append(helper.make_node("Relu", [s], ["se1.relu"], name="se1.relu"))
    s = conv("se1.relu", "se2", 32, 8)
    nodes.append(helper.make_node("Sigmoid", [s], ["se.gate"], name="se.gate"))
    nodes.append(helper.make_node("Mul", [d, "se.gate"], ["se.out"], name="se.scale"))
    p = conv("se.out", "project", 8, 32)
    nodes.append(helper.make_node("Add", [p, "x"], ["y"], name="residual"))
    graph = helper.make_graph(
        nodes, "mbconv_reduce_mean",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 12, 12])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


@pytest.mark.parametrize("opset", [13, 18])
def test_a_spatial_reduce_mean_runs_as_a_quantized_global_average_pool(opset, tmp_path):
    # The default command on target onnxruntime: the squeeze-excite's ReduceMean becomes a
    # GlobalAveragePool between a DQ and a Q, which ONNX Runtime runs as
    # QLinearGlobalAveragePool; as a ReduceMean it had no integer kernel.
    src, out = tmp_path / "timm_mbconv.onnx", tmp_path / "q.onnx"
    _mbconv_reduce_mean(src, opset)
    data = _calibration_folder(tmp_path / "calib", (1, 8, 12, 12), 8, 3)
    proc = _interop.run_cli("optimize", src, "-o", out, "--int8", "--calib-data", data,
                            "--calib-samples", "6", "--target", "onnxruntime")
    assert proc.returncode == 0, _interop.describe(proc)
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out))
    pool = next(n for n in m.graph.node if n.name == "se.mean")
    assert pool.op_type == "GlobalAveragePool" and len(pool.input) == 1, pool
    producers = {o: p for p in m.graph.node for o in p.output}
    assert producers[pool.input[0]].op_type == "DequantizeLinear"
    assert all(n.op_type != "ReduceMean" for n in m.graph.node)
    ops = ort_optimized_ops(out, tmp_path)
    assert ops["QLinearGlobalAveragePool"] == 1, ops
    assert ops.get("GlobalAveragePool", 0) == 0 and ops.get("ReduceMean", 0) == 0, ops
    _assert_close_in_ort(src, out, "x", (1, 8, 12, 12), "y", seed=5)


def _opset9_detector(path):
    # What pytorch 1.2 wrote for Ultra-Light-Fast's face detector: opset 9, IR 4 with every
    # initializer listed as a graph input, Conv + BatchNormalization + Relu, a Softmax over
    # two classes per anchor.
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(9)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "g"),
        numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), "b"),
        numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), "mean"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "var"),
        numpy_helper.from_array(rng.normal(0, 0.3, (2, 8, 1, 1)).astype(np.float32), "w2"),
        numpy_helper.from_array(np.array([1, -1, 2], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "b", "mean", "var"], ["bn"], name="bn1"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu1"),
        helper.make_node("Conv", ["r", "w2"], ["c2"], name="cls"),
        helper.make_node("Transpose", ["c2"], ["t"], name="nhwc", perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["logits"], name="anchors"),
        helper.make_node("Softmax", ["logits"], ["scores"], name="softmax", axis=2),
    ]
    graph = helper.make_graph(
        nodes, "ulfd_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 24, 32])]
        + [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 768, 2])],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 4
    onnx.save(m, str(path))


def test_int8_raises_an_opset_9_model_to_13_instead_of_refusing_it(tmp_path):
    # Per-channel DequantizeLinear needs opset 13: a pytorch 1.2 export (opset 9) was refused
    # with "convert it first"; the quantize step now runs the converter --upgrade-opset 13 runs.
    src, out = tmp_path / "opset9.onnx", tmp_path / "q.onnx"
    _opset9_detector(src)
    data = _calibration_folder(tmp_path / "calib", (1, 3, 24, 32), 8, 9)
    proc = _interop.run_cli("optimize", src, "-o", out, "--int8", "--calib-data", data,
                            "--int8-min-cosine", "0.9", "--int8-min-top1", "0.5")
    assert proc.returncode == 0, _interop.describe(proc)
    assert "note: quantize-int8: default-domain opset raised from 9 to 13 for per-channel DequantizeLinear" in proc.stdout, \
        _interop.describe(proc)
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out))
    assert {o.domain: o.version for o in m.opset_import}.get("", None) == 13
    assert any(n.op_type == "DequantizeLinear" for n in m.graph.node)
    _assert_close_in_ort(src, out, "x", (1, 3, 24, 32), "scores", seed=11)
