"""Arrays numpy saves in Fortran order are read as numpy reads them.

`np.save(np.transpose(x))` writes `fortran_order: True` with the elements
first axis fastest; feature pipelines that transpose a spectrogram into
`[batch, frames, bins]` (NSNet2's enhancer does) write such files. infopt
refused them; reading them in the wrong order would be worse: ranges and
verdicts of a different input.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import _interop as H


def _model(path):
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
         helper.make_node("Relu", ["mm"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "frames", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "frames", 3])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return w


def test_fortran_ordered_samples_calibrate_as_their_c_ordered_copies(infopt, tmp_path):
    model = tmp_path / "m.onnx"
    w = _model(model)
    rng = np.random.default_rng(1)
    fortran, c_order = tmp_path / "fortran", tmp_path / "c"
    fortran.mkdir()
    c_order.mkdir()
    products = []
    for i in range(4):
        # [bins, frames] features, transposed to [1, frames, bins] as NSNet2's enhancer does;
        # the bins scaled apart so that a wrong order changes the MatMul's range.
        feat = (rng.standard_normal((4, 5 + i)) * np.arange(1, 5)[:, None]).astype(np.float32)
        x = np.expand_dims(np.transpose(feat), 0)
        assert x.flags["F_CONTIGUOUS"] and not x.flags["C_CONTIGUOUS"]
        np.savez(fortran / f"{i:04d}.npz", x=x)
        np.savez(c_order / f"{i:04d}.npz", x=np.ascontiguousarray(x))
        products.append(x @ w)
    ranges = {}
    for name, data in (("fortran", fortran), ("c", c_order)):
        out = tmp_path / f"{name}.json"
        proc = H.run_cli("calibrate", model, "--data", data, "--method", "minmax", "-o", out)
        assert proc.returncode == 0, H.describe(proc)
        ranges[name] = json.loads(out.read_text())["tensors"]
    assert ranges["fortran"] == ranges["c"]
    mm = ranges["c"]["mm"]
    assert np.isclose(mm["max"], max(p.max() for p in products), rtol=1e-6)
    assert np.isclose(mm["min"], min(p.min() for p in products), rtol=1e-6)

    # One sample given as --inputs: the verification runs on it (its shape fixes the input's).
    proc = H.run_cli("optimize", model, "--inputs", fortran / "0002.npz", "-o", tmp_path / "o.onnx",
                     "--input-shape", "x:1,7,4")
    assert proc.returncode == 0, H.describe(proc)


def test_a_stacked_fortran_ordered_array_is_refused_with_the_way_out(infopt, tmp_path):
    model = tmp_path / "m.onnx"
    _model(model)
    stacked = tmp_path / "stacked.npz"
    np.savez(stacked, x=np.asfortranarray(np.zeros((6, 5, 4), np.float32)))
    proc = H.run_cli("calibrate", model, "--data", stacked, "-o", tmp_path / "r.json")
    assert proc.returncode == 2, H.describe(proc)
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "array `x` is Fortran-ordered, so its samples are not stored one after another; "
        "save np.ascontiguousarray(a) (or one .npz per sample)"), H.describe(proc)
