"""`infopt convert` must be a lossless, deterministic load -> save.

For every model under fixtures/models (including exported/):
  * convert exits 0;
  * the output equals the input as an onnx ModelProto (external data folded in
    on both sides); byte identity of the files is reported, not asserted;
  * the output passes onnx.checker at the level the input passes it;
  * ONNX Runtime gives bit-identical outputs for input and output;
  * converting the output again gives byte-identical files.
Plus `convert --external-data 1024`: weights move to a side file, and the
result still checks, runs bit-identically and holds the same model.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import numpy as np
import onnx
import pytest
from onnx.external_data_helper import ExternalDataInfo

import _interop as H

GOOD = H.good_fixtures()
IDS = [H.fixture_id(p) for p in GOOD]


@pytest.fixture(scope="module")
def convert(infopt, tmp_path_factory):
    """convert(src) -> (output path, CompletedProcess); each fixture converted once."""
    cache: dict[Path, tuple[Path, object]] = {}

    def go(src: Path):
        if src not in cache:
            work = tmp_path_factory.mktemp("rt-" + src.stem)
            out = work / "first" / src.name
            out.parent.mkdir()
            cache[src] = (out, H.run_cli("convert", src, "-o", out))
        return cache[src]

    return go


def converted(convert, src: Path) -> Path:
    out, proc = convert(src)
    assert proc.returncode == 0, f"infopt convert {H.fixture_id(src)} failed: {H.describe(proc)}"
    assert out.is_file(), f"convert exited 0 but wrote no {out}"
    return out


def ort_reference(src: Path):
    """ORT session on the original fixture, or skip if the fixture is known not to run."""
    try:
        return H.ort_session(src)
    except Exception as e:  # noqa: BLE001
        name = src.name
        if name in H.ORT_CANNOT_RUN:
            pytest.skip(f"ORT cannot run {name}: {H.ORT_CANNOT_RUN[name]}")
        pytest.fail(f"fixture {H.fixture_id(src)} should run in ONNX Runtime but does not: {e}")


def byte_note(src: Path, out: Path) -> str:
    a, b = src.read_bytes(), out.read_bytes()
    if a == b:
        return "identical"
    n = min(len(a), len(b))
    first = next((i for i in range(n) if a[i] != b[i]), n)
    note = f"differs: {len(a)} vs {len(b)} bytes, first difference at offset {first}"
    ext_in = H.external_tensors(onnx.load(str(src), load_external_data=False))
    ext_out = H.external_tensors(onnx.load(str(out), load_external_data=False))
    if len(ext_in) != len(ext_out):
        note += f" (external tensors: {len(ext_in)} in input, {len(ext_out)} in output)"
    loc_in = sorted({ExternalDataInfo(t).location for t in ext_in})
    loc_out = sorted({ExternalDataInfo(t).location for t in ext_out})
    if loc_in != loc_out:
        note += f" (external files {loc_in} -> {loc_out})"
    return note


# --------------------------------------------------------------------------

@pytest.mark.parametrize("src", GOOD, ids=IDS)
def test_convert_exits_zero(convert, src):
    converted(convert, src)


@pytest.mark.parametrize("src", GOOD, ids=IDS)
def test_lossless(convert, src, record_property):
    out = converted(convert, src)
    note = byte_note(src, out)
    H.BYTE_REPORT.append((H.fixture_id(src), note))
    record_property("bytes", note)

    original, roundtripped = H.load_full(src), H.load_full(out)
    if original != roundtripped:
        diffs = H.proto_diff(original, roundtripped)
        pytest.fail("round trip changed the model (original vs output):\n  " + "\n  ".join(diffs))


@pytest.mark.parametrize("src", GOOD, ids=IDS)
def test_checker(convert, src):
    out = converted(convert, src)
    level = H.checker_level(src)
    if level is None:
        pytest.skip("the original fails onnx.checker too")
    # full_check=True also runs strict shape inference; only asked of outputs
    # whose input passes it.
    onnx.checker.check_model(str(out), full_check=level)


@pytest.mark.parametrize("src", GOOD, ids=IDS)
def test_ort_bit_identical(convert, src):
    ref = ort_reference(src)
    out = converted(convert, src)
    feeds = H.make_inputs(ref, H.fixture_id(src))
    expected = H.run(ref, feeds)
    got = H.run(H.ort_session(out), feeds)
    H.assert_bit_identical(expected, got)


@pytest.mark.parametrize("src", GOOD, ids=IDS)
def test_resave_is_deterministic(convert, src):
    first = converted(convert, src)
    second = first.parent.parent / "second" / first.name
    second.parent.mkdir(exist_ok=True)
    proc = H.run_cli("convert", first, "-o", second)
    assert proc.returncode == 0, f"converting the converted {first.name} failed: {H.describe(proc)}"
    files_1 = sorted(p.name for p in first.parent.iterdir())
    files_2 = sorted(p.name for p in second.parent.iterdir())
    assert files_1 == files_2, f"second save wrote different files: {files_1} vs {files_2}"
    for name in files_1:
        assert (first.parent / name).read_bytes() == (second.parent / name).read_bytes(), \
            f"{name}: second save is not byte-identical to the first"


# --------------------------------------------------------------------------
# --external-data

EXTERNAL_CASES = [p for p in GOOD if H.fixture_id(p) in {
    "cnn_bn_relu.onnx", "transformer_block.onnx", "external_data.onnx", "exported/bert_tiny.onnx",
}]

_ITEMSIZE = {
    onnx.TensorProto.FLOAT: 4, onnx.TensorProto.DOUBLE: 8, onnx.TensorProto.FLOAT16: 2,
    onnx.TensorProto.BFLOAT16: 2, onnx.TensorProto.INT64: 8, onnx.TensorProto.INT32: 4,
    onnx.TensorProto.INT8: 1, onnx.TensorProto.UINT8: 1, onnx.TensorProto.BOOL: 1,
}


@pytest.fixture(scope="module")
def convert_external(infopt, tmp_path_factory):
    cache: dict[Path, tuple[Path, object]] = {}

    def go(src: Path):
        if src not in cache:
            out = tmp_path_factory.mktemp("ext-" + src.stem) / src.name
            cache[src] = (out, H.run_cli("convert", src, "-o", out, "--external-data", "1024"))
        out, proc = cache[src]
        assert proc.returncode == 0, f"convert --external-data 1024 failed: {H.describe(proc)}"
        assert out.is_file()
        return out

    return go


@pytest.mark.parametrize("src", EXTERNAL_CASES, ids=[H.fixture_id(p) for p in EXTERNAL_CASES])
def test_external_data_layout(convert_external, src):
    out = convert_external(src)
    m = onnx.load(str(out), load_external_data=False)
    ext = H.external_tensors(m)
    assert ext, "no tensor was written as external data although some are >= 1024 bytes"
    for t in ext:
        info = ExternalDataInfo(t)
        loc = PurePosixPath(info.location)
        assert info.location and not loc.is_absolute() and ".." not in loc.parts, \
            f"{t.name}: external location {info.location!r} is not a plain relative path"
        data = out.parent / info.location
        assert data.is_file(), f"{t.name}: external file {data} missing"
        assert not t.HasField("raw_data"), f"{t.name}: external tensor also carries raw_data"
        offset = info.offset or 0
        size = data.stat().st_size
        if t.data_type in _ITEMSIZE:
            want = int(np.prod(t.dims, dtype=np.int64)) * _ITEMSIZE[t.data_type]
            if info.length is not None:
                assert info.length == want, f"{t.name}: length {info.length}, tensor needs {want}"
            assert offset + want <= size, f"{t.name}: data runs past the end of {data.name}"


@pytest.mark.parametrize("src", EXTERNAL_CASES, ids=[H.fixture_id(p) for p in EXTERNAL_CASES])
def test_external_data_lossless(convert_external, src):
    out = convert_external(src)
    original, written = H.load_full(src), H.load_full(out)
    if original != written:
        pytest.fail("external-data save changed the model:\n  " + "\n  ".join(H.proto_diff(original, written)))


@pytest.mark.parametrize("src", EXTERNAL_CASES, ids=[H.fixture_id(p) for p in EXTERNAL_CASES])
def test_external_data_checker(convert_external, src):
    out = convert_external(src)
    level = H.checker_level(src)
    if level is None:
        pytest.skip("the original fails onnx.checker too")
    onnx.checker.check_model(str(out), full_check=level)


@pytest.mark.parametrize("src", EXTERNAL_CASES, ids=[H.fixture_id(p) for p in EXTERNAL_CASES])
def test_external_data_ort_bit_identical(convert_external, src):
    ref = ort_reference(src)
    out = convert_external(src)
    feeds = H.make_inputs(ref, H.fixture_id(src))
    H.assert_bit_identical(H.run(ref, feeds), H.run(H.ort_session(out), feeds))
