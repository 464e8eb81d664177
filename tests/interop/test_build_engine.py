"""`infopt build-engine --emit-onnx`: the ONNX TensorRT would build passes
`onnx.checker`, loads in ONNX Runtime (CPU) and agrees with the original; the
float32 sibling written for TensorRT 10's builder flags does too; the printed
trtexec commands name those files and the build settings.

No TensorRT here: this is the part of build-engine a CPU machine can check.
"""

from __future__ import annotations

import json
import shlex

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import _interop

MIN_COSINE = 0.999


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return 1.0
    return float(a @ b / (na * nb))


def _emit(tmp_path, fixture: str, *extra: str):
    out = tmp_path / "trt.onnx"
    proc = _interop.run_cli("build-engine", _interop.MODELS / fixture, "--emit-onnx", out,
                            "--workspace", "1G", "--timing-cache", tmp_path / "t.cache",
                            "--json", *extra)
    assert proc.returncode == 0, _interop.describe(proc)
    return out, json.loads(proc.stdout)


def _agrees(original, candidate, key: str, min_cosine: float, exact: bool = False):
    ref = _interop.ort_session(original)
    sess = _interop.ort_session(candidate)
    # Inputs of the candidate's shapes: its inputs may have been fixed by --input-shape.
    feeds = _interop.make_inputs(sess, key)
    expected = _interop.run(ref, feeds)
    got = _interop.run(sess, feeds)
    for name, e in expected.items():
        g = got[name]
        assert g.shape == e.shape and g.dtype == e.dtype, name
        assert np.isfinite(g).all(), f"{name}: inf/NaN"
        assert _cosine(e, g) >= min_cosine, f"{name}: cosine {_cosine(e, g)}"
        if exact:
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fixture,shape", [
    ("cnn_bn_relu.onnx", "input:1x3x32x32/4x3x32x32/8x3x32x32"),
    ("exported/resnet_block.onnx", None),
])
def test_plain_emit_is_valid_and_equivalent(infopt, tmp_path, fixture, shape):
    extra = ["--shapes", shape] if shape else []
    if shape is None:
        # Static the model's dynamic inputs with --input-shape when it has any.
        m = onnx.load(str(_interop.MODELS / fixture))
        inits = {i.name for i in m.graph.initializer}
        for i in m.graph.input:
            dims = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
            if i.name not in inits:
                extra += ["--input-shape", f"{i.name}:{'x'.join(map(str, dims))}"]
    out, report = _emit(tmp_path, fixture, *extra)
    onnx.checker.check_model(str(out), full_check=True)
    _agrees(_interop.MODELS / fixture, out, f"engine-{fixture}", 0.99999, exact=True)
    assert report["verification"]["passed"]
    cmds = {c["tensorrt_major"]: shlex.split(c["command"]) for c in report["trtexec"]}
    assert set(cmds) == {1, 10, 11}
    # TensorRT-RTX (major 1): its own trtexec, without the timing cache it lacks.
    rtx = cmds.pop(1)
    assert rtx[0] == "tensorrt_rtx" and f"--onnx={out}" in rtx, rtx
    assert not any(a.startswith("--timingCacheFile") for a in rtx), rtx
    for major, argv in cmds.items():
        assert argv[0] == "trtexec"
        assert f"--onnx={out}" in argv, argv
        assert "--memPoolSize=workspace:1G" in argv
        assert f"--timingCacheFile={tmp_path / 't.cache'}" in argv
        if shape:
            name = shape.split(":")[0]
            lo, opt, hi = shape.split(":")[1].split("/")
            assert f"--minShapes={name}:{lo}" in argv
            assert f"--optShapes={name}:{opt}" in argv
            assert f"--maxShapes={name}:{hi}" in argv


def test_fp16_emit_is_strongly_typed_and_close(infopt, tmp_path):
    fixture = "cnn_bn_relu.onnx"
    out, report = _emit(tmp_path, fixture, "--fp16", "--input-shape", "input:2x3x32x32")
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out))
    assert any(t.data_type == TensorProto.FLOAT16 for t in m.graph.initializer)
    # Engine bindings stay float32 (Casts at the edges).
    assert m.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    _agrees(_interop.MODELS / fixture, out, "engine-fp16", MIN_COSINE)
    # infopt verified it with the half-precision criterion before writing it.
    v = report["verification"]
    assert v["passed"] and v["criterion"]["min_cosine"] == MIN_COSINE, v["criterion"]
    fp32 = tmp_path / "trt.fp32.onnx"
    onnx.checker.check_model(str(fp32), full_check=True)
    _agrees(_interop.MODELS / fixture, fp32, "engine-fp32", 0.99999, exact=True)
    cmds = {c["tensorrt_major"]: shlex.split(c["command"]) for c in report["trtexec"]}
    assert f"--onnx={out}" in cmds[11] and "--fp16" not in cmds[11]
    assert f"--onnx={fp32}" in cmds[10] and "--fp16" in cmds[10]


def _relu_model(path, dims):
    from onnx import helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_dims_sharing_a_name_get_one_profile_size(tmp_path):
    """TensorRT's parser takes equal dim names for one dimension, so H != W in a profile
    over dims both named `S` is refused up front, naming input and axes."""
    model = tmp_path / "shared.onnx"
    _relu_model(model, ["N", 3, "S", "S"])
    proc = _interop.run_cli("build-engine", model, "--emit-onnx", tmp_path / "out.onnx", "--no-verify",
                            "--shapes", "x:1x3x48x192/2x3x48x192/4x3x48x192")
    assert proc.returncode == 2, _interop.describe(proc)
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error")]
    assert len(errors) == 1, proc.stderr
    assert "`x` dim 3 and `x` dim 2 share the symbolic name `S`" in errors[0], errors[0]
    # Equal sizes are fine.
    proc = _interop.run_cli("build-engine", model, "--emit-onnx", tmp_path / "out.onnx", "--no-verify",
                            "--shapes", "x:1x3x48x48/2x3x64x64/4x3x96x96")
    assert proc.returncode == 0, _interop.describe(proc)


def test_paddle_question_mark_dims_are_left_unnamed_for_tensorrt(tmp_path):
    """Paddle's exporter names every dynamic dim `?` (PP-OCRv2's recognizer: `x` of
    `[-1, 3, ?, ?]`), meaning unknown: the graph written for TensorRT leaves them unnamed,
    so a 32x320 text line's profile builds instead of being refused."""
    model = tmp_path / "qmark.onnx"
    _relu_model(model, ["N", 3, "?", "?"])
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli("build-engine", model, "--emit-onnx", out, "--no-verify", "--json",
                            "--shapes", "x:1x3x32x100/2x3x32x320/4x3x32x1000")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert any("named `?`" in n for n in report["notes"]), report["notes"]
    written = onnx.load(str(out))
    for io in list(written.graph.input) + list(written.graph.output):
        params = [d.dim_param for d in io.type.tensor_type.shape.dim]
        assert params == ["N", "", "", ""], (io.name, params)
    onnx.checker.check_model(written, full_check=True)
