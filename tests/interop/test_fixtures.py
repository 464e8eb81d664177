"""The fixtures themselves: reproducible, valid where they should be, rejected where not.

These need no infopt binary.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx.external_data_helper import ExternalDataInfo

import _interop as H

GOOD = H.good_fixtures()
IDS = [H.fixture_id(p) for p in GOOD]
BAD = sorted(H.BAD.glob("*.onnx"))

# Good fixtures allowed to pass only the plain (not full) checker. None today.
PLAIN_CHECK_ONLY: set[str] = set()


def test_generator_reproduces_committed_files(tmp_path):
    proc = subprocess.run([sys.executable, str(H.FIXTURES / "generate.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert made, "generator wrote nothing"
    for rel in made:
        committed = H.FIXTURES / rel
        assert committed.is_file(), f"generator makes {rel} but it is not committed"
        assert committed.read_bytes() == (tmp_path / rel).read_bytes(), \
            f"{rel}: committed file differs from a fresh generate.py run"
    # every generated-area file in the repo comes from the generator
    committed_generated = sorted(
        p.relative_to(H.FIXTURES).as_posix()
        for p in [*H.MODELS.glob("*"), *H.BAD.glob("*"), *(H.FIXTURES / "crafted").glob("*"),
                  H.FIXTURES / "secret.bin"]
        if p.is_file())
    assert committed_generated == made


@pytest.mark.parametrize("src", GOOD, ids=IDS)
def test_good_fixture_passes_checker(src):
    full = H.fixture_id(src) not in PLAIN_CHECK_ONLY
    onnx.checker.check_model(str(src), full_check=full)


@pytest.mark.parametrize("src", GOOD, ids=IDS)
def test_good_fixture_runs_in_ort(src):
    if src.name in H.ORT_CANNOT_RUN:
        try:
            H.ort_session(src)
        except Exception:  # noqa: BLE001
            return
        pytest.fail(f"{src.name} now loads in ORT: drop it from ORT_CANNOT_RUN")
    sess = H.ort_session(src)
    outs = H.run(sess, H.make_inputs(sess, H.fixture_id(src)))
    for name, v in outs.items():
        if v.dtype.kind == "f":
            assert np.isfinite(v).all(), f"{name}: non-finite outputs"


@pytest.mark.parametrize("src", GOOD, ids=IDS)
def test_fixture_is_small(src):
    limit = 2 * 1024 * 1024 if "exported" in src.parts else 200 * 1024
    files = {src}
    for t in H.external_tensors(onnx.load(str(src), load_external_data=False)):
        files.add(src.parent / ExternalDataInfo(t).location)
    for f in sorted(files):
        assert f.stat().st_size < limit, f"{f.name} is {f.stat().st_size} bytes"


@pytest.mark.parametrize("bad", BAD, ids=[p.name for p in BAD])
def test_bad_fixture_rejected_by_onnx(bad):
    with pytest.raises(Exception):
        m = onnx.load(str(bad), load_external_data=True)
        onnx.checker.check_model(m, full_check=True)
