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
