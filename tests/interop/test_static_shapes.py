"""Staticization checked in ONNX Runtime: fixing only `batch` keeps `seq`
dynamic, and the optimized model matches the original at two sequence
lengths; fixing every dim leaves no Shape node."""

from __future__ import annotations

import json

import numpy as np
import onnx

import _interop

MODEL = _interop.MODELS / "transformer_block.onnx"


def _feeds(batch, seq, seed):
    rng = np.random.default_rng(seed)
    return {
        "hidden": rng.standard_normal((batch, seq, 32)).astype(np.float32),
        "attention_mask": np.ones((batch, seq), dtype=np.int64),
    }


def test_batch_fixed_seq_stays_dynamic(infopt, tmp_path):
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli("optimize", MODEL, "-o", out, "--input-shape", "hidden:batch=1", "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    m = onnx.load(str(out))
    onnx.checker.check_model(m, full_check=True)
    dims = [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, "seq", 32], dims
    original = _interop.ort_session(MODEL)
    optimized = _interop.ort_session(out)
    for seq in (3, 7):
        feeds = _feeds(1, seq, seq)
        a = _interop.run(original, feeds)
        b = _interop.run(optimized, feeds)
        for name in a:
            np.testing.assert_allclose(b[name], a[name], rtol=1e-4, atol=1e-5)


def test_all_fixed_leaves_no_shape_scaffolding(infopt, tmp_path):
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli(
        "optimize", MODEL, "-o", out,
        "--input-shape", "hidden:2x5x32", "--input-shape", "attention_mask:2x5", "--json",
    )
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert report["verification"]["passed"] is True
    m = onnx.load(str(out))
    ops = {n.op_type for n in m.graph.node}
    assert not ops & {"Shape", "Gather", "Concat", "ConstantOfShape"}, ops
    feeds = _feeds(2, 5, 0)
    a = _interop.run(_interop.ort_session(MODEL), feeds)
    b = _interop.run(_interop.ort_session(out), feeds)
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-4, atol=1e-5)
