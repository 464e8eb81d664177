"""`infopt optimize` outputs checked by the real onnx checker and ONNX Runtime.

For every fixture ORT can run, with the default (portable) pipeline and with
the onnxruntime target: the output passes `onnx.checker` with full checks and
computes the same outputs as the original in ORT (rtol 1e-4, atol 1e-5).
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import _interop

RTOL, ATOL = 1e-4, 1e-5

# Float16 fixtures whose fused normalization computes its statistics in
# float32 where the written-out pattern rounded them through float16: the
# two differ by about one float16 ulp (~1e-3 relative), the fused one being
# the more accurate.
LOOSER = {"rms_variants.onnx": (2e-3, 2e-3)}

RUNNABLE = [p for p in _interop.good_fixtures() if p.name not in _interop.ORT_CANNOT_RUN]


def _assert_close(expected, got, where):
    rtol, atol = LOOSER.get(where, (RTOL, ATOL))
    assert list(expected) == list(got), f"{where}: output names differ: {list(expected)} vs {list(got)}"
    for name, e in expected.items():
        g = got[name]
        assert e.shape == g.shape, f"{where}: {name}: shape {e.shape} vs {g.shape}"
        if e.dtype.kind in "fc":
            ok = np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
            diff = float(np.nanmax(np.abs(g.astype(np.float64) - e.astype(np.float64)))) if e.size else 0.0
            assert ok, f"{where}: {name}: max abs diff {diff}"
        else:
            assert np.array_equal(e, g), f"{where}: {name}: values differ"


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
@pytest.mark.parametrize("fixture", RUNNABLE, ids=_interop.fixture_id)
def test_optimized_model_matches_in_onnxruntime(infopt, tmp_path, fixture, target):
    out = tmp_path / "out.onnx"
    # tract (the default verifier) cannot run every fixture (Loop, contrib ops):
    # ORT is the judge here, so infopt's own verification is not required.
    proc = _interop.run_cli("optimize", fixture, "-o", out, "--target", target, "--json", "--no-verify")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert report["output"]["nodes"] <= report["input"]["nodes"]

    onnx.checker.check_model(str(out), full_check=True)

    original = _interop.ort_session(fixture)
    optimized = _interop.ort_session(out)
    for seed in ("a", "b"):
        feeds = _interop.make_inputs(original, f"{fixture.name}-{seed}")
        _assert_close(_interop.run(original, feeds), _interop.run(optimized, feeds), _interop.fixture_id(fixture))


@pytest.mark.parametrize("fixture", ["cnn_bn_relu.onnx", "transformer_block.onnx", "exported/resnet_block.onnx", "exported/bert_tiny.onnx"])
def test_verified_optimize_succeeds(infopt, tmp_path, fixture):
    """The default command (tract verification on) succeeds on the main fixtures."""
    out = tmp_path / "out.onnx"
    proc = _interop.run_cli("optimize", _interop.MODELS / fixture, "-o", out, "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert report["verification"]["passed"] is True
