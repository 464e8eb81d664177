"""A branch that cannot run once the shapes are fixed (issue 9, silero-vad):
infopt's output must still load in ONNX Runtime and agree with the original
on the inputs the original accepts."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import _interop

MODEL = _interop.MODELS / "if_lstm.onnx"


def _feeds(t, mode, seed):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((1, 4, t)).astype(np.float32),
        "mode": np.array(mode, dtype=np.int64),
    }


def test_fixed_shape_alone_is_refused_by_ort(tmp_path):
    """The fixture reproduces the problem: fixing `t` in the declaration only
    is enough for ORT to refuse the model."""
    m = onnx.load(str(MODEL))
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 3
    fixed = tmp_path / "fixed.onnx"
    onnx.save(m, str(fixed))
    with pytest.raises(Exception, match="ShapeInferenceError"):
        _interop.ort_session(fixed)


def test_failing_branch_is_dropped_and_output_loads(infopt, tmp_path):
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli("optimize", MODEL, "-o", out, "--input-shape", "x:1x4x3", "--vocab", "2", "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    notes = " ".join(report.get("notes", []))
    assert "raw/LSTM" in notes and "rank 4" in notes, notes
    m = onnx.load(str(out))
    onnx.checker.check_model(m, full_check=True)
    assert "If" not in {n.op_type for n in m.graph.node}
    original = _interop.ort_session(MODEL)
    optimized = _interop.ort_session(out)
    for mode, seed in ((0, 1), (1, 2)):
        feeds = _feeds(3, mode, seed)
        a = _interop.run(original, feeds)
        b = _interop.run(optimized, feeds)
        np.testing.assert_allclose(b["y"], a["y"], rtol=1e-4, atol=1e-5)


def test_dynamic_shapes_keep_both_branches(infopt, tmp_path):
    """Without fixed shapes the else branch runs (t = 1) and must stay."""
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli("optimize", MODEL, "-o", out, "--vocab", "2")
    assert proc.returncode == 0, _interop.describe(proc)
    assert "If" in {n.op_type for n in onnx.load(str(out)).graph.node}
    original = _interop.ort_session(MODEL)
    optimized = _interop.ort_session(out)
    for t, mode in ((1, 5), (3, 1)):
        feeds = _feeds(t, mode, t + mode)
        np.testing.assert_allclose(
            _interop.run(optimized, feeds)["y"], _interop.run(original, feeds)["y"],
            rtol=1e-4, atol=1e-5,
        )
