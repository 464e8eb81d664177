"""Keywords become the command's options without a command line, samples and arrays
cross in memory: no temporary file for a model given by path, a one-shot generator
calibrates INT8, and a wrong keyword is a one-line UsageError naming it."""

from __future__ import annotations

import itertools
import json
import tempfile

import numpy as np
import onnx
import pytest

import infopt
from infopt import _api


def batch1(rng):
    return {"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}


@pytest.fixture
def no_temp_files(tmp_path, monkeypatch):
    """Any temporary file or folder (Python's or the native module's) fails the test or
    lands in an empty folder checked afterwards; numpy never saves."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def refuse(*args, **kwargs):
        raise AssertionError("a temporary file was made")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", refuse)
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    monkeypatch.setattr(np, "savez", refuse)
    monkeypatch.setattr(np, "save", refuse)
    yield
    # ONNX Runtime keeps its session id in $TMPDIR/.ses: not a file of infopt's.
    assert [p.name for p in scratch.iterdir() if p.name != ".ses"] == []


def test_a_one_shot_generator_calibrates_int8_without_a_file(fixture_path, tmp_path,
                                                              no_temp_files):
    rng = np.random.default_rng(4)
    pulled = []

    def samples():
        for i in range(12):
            pulled.append(i)
            yield batch1(rng)

    out = tmp_path / "q.onnx"
    model, report = infopt.optimize(fixture_path("cnn_bn_relu.onnx"), out, int8=True,
                                    calib_data=samples(), calib_samples=8, held_out=4,
                                    input_shapes={"input": {"batch": 1}})
    assert model == out
    ops = {n.op_type for n in onnx.load(str(out)).graph.node}
    assert "QuantizeLinear" in ops
    q = report.to_dict()["int8"]
    assert q is not None
    # Read once from Python, then again from memory (calibration, then held out).
    assert pulled == list(range(12))


def test_an_endless_generator_is_read_only_as_far_as_the_command_needs(fixture_path,
                                                                       tmp_path):
    rng = np.random.default_rng(5)
    pulled = itertools.count()

    def endless():
        for _ in pulled:
            yield batch1(rng)

    infopt.optimize(fixture_path("cnn_bn_relu.onnx"), tmp_path / "q.onnx", int8=True,
                    calib_data=endless(), calib_samples=4, held_out=2,
                    input_shapes={"input": {"batch": 1}})
    assert next(pulled) <= 8


def test_calibrate_from_a_generator_and_its_exception_reaches_the_caller(fixture_path,
                                                                         tmp_path):
    rng = np.random.default_rng(6)
    ranges = tmp_path / "ranges.json"
    report = infopt.calibrate(fixture_path("cnn_bn_relu.onnx"),
                              (batch1(rng) for _ in range(3)), ranges, method="minmax")
    assert report.samples == 3 and json.loads(ranges.read_text())

    class Broken(Exception):
        pass

    def broken():
        yield batch1(rng)
        raise Broken("sample 1 is unreadable")

    with pytest.raises(Broken, match="sample 1 is unreadable"):
        infopt.calibrate(fixture_path("cnn_bn_relu.onnx"), broken(), ranges)
    with pytest.raises(infopt.UsageError, match="yielded no samples"):
        infopt.calibrate(fixture_path("cnn_bn_relu.onnx"), iter([]), ranges)


def test_an_unknown_keyword_is_named():
    with pytest.raises(infopt.UsageError) as e:
        infopt.optimize("m.onnx", fp61=True)
    assert str(e.value) == (
        "unknown option 'fp61' for optimize; did you mean 'fp16'? "
        "(a similar argument exists: '--fp16')"
    )
    assert e.value.exit_code == 2
    with pytest.raises(infopt.UsageError, match="^unknown option 'colour' for bench$"):
        infopt.bench("m.onnx", colour="red")


def test_a_value_of_the_wrong_type_is_named(fixture_path):
    with pytest.raises(infopt.UsageError) as e:
        infopt.bench(fixture_path("cnn_bn_relu.onnx"), runs="many")
    assert str(e.value) == (
        "invalid value 'many' for '--runs <RUNS>'; expected a whole number (0 or more)"
    )
    with pytest.raises(infopt.UsageError, match="invalid value 'yes' for '--verify <VERIFY>'"):
        infopt.optimize(fixture_path("cnn_bn_relu.onnx"), verify="yes")
    with pytest.raises(infopt.UsageError, match="'fp16' cannot be used with 'bf16'"):
        infopt.optimize(fixture_path("cnn_bn_relu.onnx"), fp16=True, bf16=True)


def test_options_reach_the_command(fixture_path, tmp_path):
    model = fixture_path("cnn_bn_relu.onnx")
    with pytest.raises(infopt.UsageError, match="no_such"):
        infopt.optimize(model, tmp_path / "m.onnx", fp16=True, precision={"no_such": "fp32"})
    bench = infopt.bench(model, runs=2, warmup=0, input_shapes={"input": [3, 3, 32, 32]})
    assert bench.models[0]["input_shapes"] == [["input", [3, 3, 32, 32]]]
    assert bench.runs == 2 and bench.warmup == 0


def test_inputs_as_arrays_and_a_pipeline_dict_stay_in_memory(fixture_path, tmp_path,
                                                              no_temp_files):
    model = fixture_path("cnn_bn_relu.onnx")
    x = np.random.default_rng(7).standard_normal((2, 3, 32, 32)).astype(np.float32)
    report = infopt.compare(model, model, inputs={"input": x})
    assert report.input_source == {"kind": "file", "path": "arrays given in memory"}
    assert report.input_shapes == [["input", [2, 3, 32, 32]]]
    out = tmp_path / "m.onnx"
    pipeline = {"version": 1, "target": "portable", "passes": ["fold-constants"]}
    _, report = infopt.optimize(model, out, pipeline=pipeline)
    assert report.pipeline == "pipeline (given as text)"


def test_report_files_are_written(fixture_path, tmp_path):
    paths = [tmp_path / "r.json", tmp_path / "r.md"]
    report = infopt.optimize(fixture_path("cnn_bn_relu.onnx"), tmp_path / "m.onnx",
                             report=paths).report
    assert json.loads(paths[0].read_text()) == report.to_dict()
    assert "infopt optimize" in paths[1].read_text().splitlines()[0]


def test_a_model_in_memory_still_goes_through_one_temporary_file(fixture_path, monkeypatch):
    made = []
    real = _api._Workspace.folder.fget

    def folder(self):
        path = real(self)
        made.append(path)
        return path

    monkeypatch.setattr(_api._Workspace, "folder", property(folder))
    infopt.inspect(fixture_path("cnn_bn_relu.onnx"))
    assert made == []
    infopt.inspect(fixture_path("cnn_bn_relu.onnx").read_bytes())
    assert made


def test_a_string_input_takes_numpy_strings(tmp_path):
    # A categorical feature (CategoryMapper): the dict's str_ array is fed as strings.
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node("CategoryMapper", ["c"], ["i"], domain="ai.onnx.ml",
                          cats_strings=["a", "b", "c"], cats_int64s=[0, 1, 2], default_int64=3),
         helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("Identity", ["f"], ["g"]),
         helper.make_node("Mul", ["g", "k"], ["y"])],
        "categories",
        [helper.make_tensor_value_info("c", TensorProto.STRING, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])],
        [numpy_helper.from_array(np.array([2.0], np.float32), "k")],
    )
    model = helper.make_model(graph, ir_version=8, opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 2)])
    words = np.array(["b", "zz", "a", "c", "a"])
    _, report = infopt.optimize(model, tmp_path / "out.onnx", inputs={"c": words})
    v = report.to_dict()["verification"]
    assert v["passed"] is True
    assert v["inputs"].startswith("c str [5]"), v["inputs"]
    assert v["outputs"][0]["elements"] == 5
