"""`infopt convert` must refuse each file in fixtures/bad/ cleanly.

Clean means: a non-zero exit code that is not a Rust panic (101) nor a
signal, a message on stderr, and no output file.
"""

from __future__ import annotations

import pytest

import _interop as H

BAD = sorted(H.BAD.glob("*.onnx"))

RUST_PANIC_EXIT = 101


@pytest.mark.parametrize("bad", BAD, ids=[p.name for p in BAD])
def test_convert_rejects(infopt, bad, tmp_path):
    out = tmp_path / "out.onnx"
    proc = H.run_cli("convert", bad, "-o", out)
    assert proc.returncode != 0, f"convert accepted {bad.name}: {H.describe(proc)}"
    assert proc.returncode > 0, f"convert died from signal {-proc.returncode} on {bad.name}"
    assert proc.returncode != RUST_PANIC_EXIT, f"convert panicked on {bad.name}: {H.describe(proc)}"
    assert proc.stderr.strip(), f"convert failed on {bad.name} without saying why"
    assert not out.exists(), f"convert left {out.name} behind after failing"


def test_an_ir_version_newer_than_onnx_runtime_reads_is_said_with_the_way_out(infopt, tmp_path):
    # onnx 1.23's helper.make_model writes IR 14 by default; ONNX Runtime
    # 1.31 reads up to 13 and says so after a C++ source location.
    import onnx
    m = onnx.load(str(H.MODELS / "cnn_bn_relu.onnx"))
    m.ir_version = 99
    path = tmp_path / "ir99.onnx"
    onnx.save(m, str(path))
    proc = H.run_cli("bench", path, "--backend", "ort")
    assert proc.returncode == 3, H.describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, H.describe(proc)
    assert "the model's IR version 99 is newer than this ONNX Runtime reads (at most " in lines[0], lines[0]
    assert "install a newer onnxruntime, or save the model with ir_version" in lines[0], lines[0]
    assert "model.cc" not in lines[0], lines[0]
