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


def _assert_int8_refused(tmp_path, data, expected_errors):
    """`optimize cnn_bn_relu.onnx -o OUT --int8 --calib-data DATA`, as typed: exit 2 with
    exactly these error lines, and no output written."""
    out = tmp_path / "q.onnx"
    proc = H.run_cli("optimize", H.MODELS / "cnn_bn_relu.onnx", "-o", out, "--int8",
                     "--calib-data", data)
    assert proc.returncode == 2, H.describe(proc)
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert errors == expected_errors, H.describe(proc)
    assert not out.exists()


def test_a_calibration_sample_whose_nan_reaches_the_outputs_is_named(infopt, tmp_path):
    # A NaN in an image reaches every output of a CNN: the float model's
    # outputs are no reference there, and the search used to end at exit 4
    # ("out of reach of this model's float arithmetic") after trying every
    # keep-set. Now a usage error names the sample, the input and the fix.
    import numpy as np
    data = tmp_path / "calib"
    data.mkdir()
    rng = np.random.default_rng(7)
    for i in range(8):
        x = rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
        if i == 3:
            x[0, 0, 0, :5] = np.nan
        np.savez(data / f"{i:04d}.npz", input=x)
    _assert_int8_refused(tmp_path, data, [
        f"error: {data / '0003.npz'}: input `input` holds 5 NaN or infinite value(s), and the float "
        "model's output `logits` is not finite there, so no quantized model can be judged against "
        "it: clean or drop that sample"
    ])


def test_a_folder_of_images_without_preprocess_is_refused_with_the_way_out(infopt, tmp_path):
    # The most common calibration data: the message used to speak only of
    # .npz and .npy files. (Only the names are read before --preprocess.)
    data = tmp_path / "images"
    data.mkdir()
    for name in ("a.png", "b.jpg", "c.JPEG"):
        (data / name).write_bytes(b"not decoded")
    _assert_int8_refused(tmp_path, data, [
        f"error: {data}: the folder holds 3 images and no .npz/.npy samples: give --preprocess "
        "FILE.yaml saying how an image becomes the model's input (input name, size, scale, "
        "mean/std, layout: docs/quantization.md \"Calibration data\")"
    ])
