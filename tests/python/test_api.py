"""The Python API as export scripts use it: ModelProto / bytes / path in, the same kind
out, run in ONNX Runtime; each exception class with the command's one-line message;
calibration from a Python iterable; a failed gate caught and read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import pytest

import infopt


def run_ort(model, feeds):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    if isinstance(data, Path):
        data = str(data)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def cnn_feeds(seed=0):
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)}


def test_model_proto_in_model_proto_out_runs_the_same_in_onnxruntime(fixture_path):
    model = onnx.load(fixture_path("cnn_bn_relu.onnx"))
    optimized, report = infopt.optimize(model)
    assert isinstance(optimized, onnx.ModelProto)
    onnx.checker.check_model(optimized)
    assert len(optimized.graph.node) < len(model.graph.node)
    assert report.verification["passed"] is True
    assert report.output["nodes"] == len(optimized.graph.node)
    feeds = cnn_feeds()
    for want, got in zip(run_ort(model, feeds), run_ort(optimized, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # The caller's model is untouched.
    assert len(model.graph.node) == report.input["nodes"]


def test_bytes_in_bytes_out(fixture_path):
    data = fixture_path("cnn_bn_relu.onnx").read_bytes()
    optimized, report = infopt.optimize(data)
    assert isinstance(optimized, bytes)
    assert onnx.load_from_string(optimized).graph.node
    assert report.command == "optimize"


def test_a_path_with_external_data_goes_through_paths(copied, tmp_path):
    model = copied("external_data.onnx", "external_data.bin")
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    optimized, report = infopt.optimize(model, out, external_data=0)
    assert optimized == out
    assert report.output["external_bytes"] > 0
    written = sorted(p.name for p in out.parent.iterdir())
    assert written == ["m.onnx", "m.onnx.data"], written
    loaded = onnx.load(str(out))
    original = onnx.load(str(model))
    feeds = {
        i.name: np.ones([d.dim_value or 2 for d in i.type.tensor_type.shape.dim], np.float32)
        for i in original.graph.input
        if i.name not in {t.name for t in original.graph.initializer}
    }
    for want, got in zip(run_ort(model, feeds), run_ort(out, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert loaded.graph.node


def test_a_model_proto_without_its_external_data_is_refused(fixture_path):
    model = onnx.load(fixture_path("external_data.onnx"), load_external_data=False)
    with pytest.raises(infopt.UsageError, match="refer to external data files") as e:
        infopt.optimize(model)
    assert "pass the model's path" in str(e.value)


def test_usage_error_has_the_commands_message(fixture_path):
    with pytest.raises(infopt.UsageError) as e:
        infopt.optimize(fixture_path("cnn_bn_relu.onnx"), target="gpu")
    assert str(e.value) == (
        "invalid value 'gpu' for '--target <TARGET>'; "
        "possible values: portable, onnxruntime, tensorrt"
    )
    assert e.value.exit_code == 2
    assert isinstance(e.value, infopt.InfoptError) and isinstance(e.value, ValueError)
    with pytest.raises(infopt.UsageError, match="a similar argument exists: '--fp16'"):
        infopt.optimize(fixture_path("cnn_bn_relu.onnx"), fp61=True)
    with pytest.raises(infopt.UsageError, match="unknown pass 'fold-everything'"):
        infopt.optimize(fixture_path("cnn_bn_relu.onnx"), passes=["fold-everything"])


def test_model_error_for_a_missing_file_and_for_bytes_that_are_not_onnx(tmp_path):
    with pytest.raises(infopt.ModelError) as e:
        infopt.inspect(tmp_path / "missing.onnx")
    assert str(e.value) == f"{tmp_path / 'missing.onnx'} does not exist"
    assert e.value.exit_code == 3
    with pytest.raises(infopt.ModelError):
        infopt.optimize(b"this is not a model")


def test_verification_error_when_the_result_leaves_the_tolerance(fixture_path, tmp_path,
                                                                 monkeypatch):
    # A test-only pass that plants a wrong weight.
    monkeypatch.setenv("INFOPT_TEST_PASSES", "1")
    out = tmp_path / "m.onnx"
    with pytest.raises(infopt.VerificationError) as e:
        infopt.optimize(fixture_path("cnn_bn_relu.onnx"), out, passes=["perturb-weight"])
    assert str(e.value).startswith("the optimized model does not match the original")
    assert "output not written" in str(e.value)
    assert e.value.exit_code == 4
    assert e.value.report.verification["passed"] is False
    assert not out.exists()
    with pytest.raises(infopt.VerificationError, match="pass 'perturb-weight' broke numerical"):
        infopt.optimize(fixture_path("cnn_bn_relu.onnx"), out, passes=["perturb-weight"],
                        verify_each_pass=True)


def test_a_failed_gate_is_caught_and_read(fixture_path, tmp_path):
    with pytest.raises(infopt.GateError) as e:
        infopt.optimize(fixture_path("cnn_bn_relu.onnx"), tmp_path / "m.onnx",
                        gates={"max_nodes": 2, "min_cosine": 0.999})
    err = e.value
    assert err.exit_code == 5
    assert "max_nodes" in str(err)
    gates = {g["gate"]: g for g in err.report.gates["results"]}
    assert gates["max_nodes"]["passed"] is False
    assert gates["min_cosine@logits"]["passed"] is True
    assert str(err) == "1 of 2 release gates failed: max_nodes (13 nodes (subgraphs included) > 2)"
    markdown = err.report.to_markdown()
    assert "| max_nodes" in markdown and "FAIL 13 nodes" in markdown


def test_runtime_missing_error_without_tensorrt(fixture_path, tmp_path, monkeypatch):
    monkeypatch.delenv("INFOPT_TRT_SHIM", raising=False)
    monkeypatch.delenv("TENSORRT_LIB", raising=False)
    with pytest.raises(infopt.RuntimeMissingError, match="TensorRT is not available") as e:
        infopt.build_engine(fixture_path("cnn_bn_relu.onnx"), tmp_path / "m.engine",
                            trt_shim="/nonexistent/libinfopt_trt_shim.so")
    assert e.value.exit_code == 8


def test_calibration_from_a_python_iterable(fixture_path, tmp_path):
    rng = np.random.default_rng(1)

    def samples():
        for _ in range(5):
            yield {"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}

    ranges = tmp_path / "ranges.json"
    report = infopt.calibrate(fixture_path("cnn_bn_relu.onnx"), samples(), ranges, method="minmax")
    assert report.samples == 5
    assert report.meaningful is True
    table = json.loads(ranges.read_text())
    assert report.tensors > 0 and table
    with pytest.raises(infopt.UsageError, match="sample 0 is a list"):
        infopt.calibrate(fixture_path("cnn_bn_relu.onnx"), [[1, 2]], ranges)


def test_int8_with_calibration_data_from_an_iterable(fixture_path):
    rng = np.random.default_rng(2)
    data = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(12)]
    model = onnx.load(fixture_path("cnn_bn_relu.onnx"))
    # Samples of batch 1: the shape verification runs with too.
    quantized, report = infopt.optimize(model, int8=True, calib_data=data, calib_samples=8,
                                        held_out=4, input_shapes={"input": {"batch": 1}})
    ops = {n.op_type for n in quantized.graph.node}
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    assert report.int8 is not None
    run_ort(quantized, {"input": cnn_feeds()["input"][:1]})


def test_int8_timings_of_an_earlier_run_write_the_same_bytes(fixture_path, tmp_path):
    # The timings an INT8 run decided by are in its report; given back as
    # int8_timings, they answer the next run instead of the clock.
    rng = np.random.default_rng(3)
    data = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(12)]
    options = dict(int8=True, calib_data=data, calib_samples=8, held_out=4,
                   input_shapes={"input": {"batch": 1}})
    earlier = tmp_path / "earlier.json"
    first, report = infopt.optimize(fixture_path("cnn_bn_relu.onnx"), tmp_path / "a.onnx",
                                    report=[earlier], **options)
    timings = report.to_dict()["int8"]["timings"]
    assert timings and all(t["what"] and t["ms"] for t in timings)
    again, replayed = infopt.optimize(fixture_path("cnn_bn_relu.onnx"), tmp_path / "b.onnx",
                                      int8_timings=earlier, **options)
    assert Path(again).read_bytes() == Path(first).read_bytes()
    assert replayed.to_dict()["int8"]["timings"] == timings


def test_the_report_renders_every_way(fixture_path):
    report = infopt.inspect(fixture_path("cnn_bn_relu.onnx"))
    d = report.to_dict()
    assert d["schema_version"] == 1 and report["path"] == d["path"]
    assert json.loads(report.to_json()) == d
    assert report.to_markdown().startswith("## infopt inspect: ")
    assert repr(report).startswith("<infopt inspect report>\n")
    assert "<pre>" in report._repr_html_()
    with pytest.raises(AttributeError, match="has no field 'nope'"):
        report.nope


def test_compare_and_bench(fixture_path):
    model = onnx.load(fixture_path("cnn_bn_relu.onnx"))
    optimized, _ = infopt.optimize(model)
    report = infopt.compare(model, optimized)
    assert report.passed is True
    bench = infopt.bench(optimized, runs=3, warmup=1)
    assert bench.models[0]["latency"]["runs"] == 3


def test_compare_mismatch_raises_unless_check_is_off(fixture_path):
    a = onnx.load(fixture_path("cnn_bn_relu.onnx"))
    b = onnx.load(fixture_path("cnn_bn_relu.onnx"))
    weight = max(b.graph.initializer, key=lambda t: len(t.raw_data) or len(t.float_data))
    doubled = onnx.numpy_helper.to_array(weight) * 2
    weight.CopyFrom(onnx.numpy_helper.from_array(doubled, weight.name))
    with pytest.raises(infopt.VerificationError, match="does not match") as e:
        infopt.compare(a, b)
    assert e.value.exit_code == 4
    report = infopt.compare(a, b, check=False)
    assert report.passed is False


def test_progress_reaches_the_callback_and_an_exception_there_stops_the_call(fixture_path):
    lines = []
    infopt.optimize(fixture_path("cnn_bn_relu.onnx").read_bytes(),
                    progress=lambda stage, line: lines.append((stage, line)))
    stages = [s for s, _ in lines]
    assert "load" in stages and "verify" in stages and "pass" in stages

    class Stop(Exception):
        pass

    def stop(stage, line):
        raise Stop(line)

    with pytest.raises(Stop, match="loaded"):
        infopt.optimize(fixture_path("cnn_bn_relu.onnx").read_bytes(), progress=stop)


def test_the_wheels_command_line_works():
    script = Path(sys.executable).parent / "infopt"
    o = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert o.returncode == 0, o.stderr
    assert "Offline ONNX model optimizer" in o.stdout
    o = subprocess.run([str(script), "optimize", "/nonexistent.onnx"], capture_output=True,
                       text=True)
    assert o.returncode == 3
    assert o.stderr.strip() == "error: /nonexistent.onnx does not exist"


def test_the_module_carries_the_built_in_tensorrt_shims():
    # The wheel's module is what builds engines for a pip user: its doctor lists the
    # shims compiled into it. scripts/test.sh (INFOPT_REQUIRE_TRT_SHIMS=1) requires them,
    # as scripts/build-wheel.sh does for a release wheel.
    script = Path(sys.executable).parent / "infopt"
    env = {k: v for k, v in os.environ.items() if k != "INFOPT_TRT_SHIM"}
    o = subprocess.run([str(script), "doctor", "--json"], capture_output=True, text=True,
                       env=env)
    assert o.returncode == 0, o.stderr
    row = [i for i in json.loads(o.stdout)["items"] if i["name"] == "TensorRT shims (built in)"]
    assert len(row) == 1, o.stdout
    if os.environ.get("INFOPT_REQUIRE_TRT_SHIMS") == "1":
        assert row[0]["status"] == "ok", row[0]
    if row[0]["status"] == "ok":
        assert "TensorRT-RTX 1.3, 1.4, 1.5, 1.6, 1.7" in row[0]["version"], row[0]
    else:
        assert "network access to crates.io" in row[0]["fix"], row[0]


def test_int8_with_your_own_metric_keeps_its_score_within_the_drop(fixture_path):
    rng = np.random.default_rng(3)
    data = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(16)]
    model = onnx.load(fixture_path("cnn_bn_relu.onnx"))
    # The task's labels: the float model's classes on the held-out samples
    # (the metric sees only the outputs of the model judged).
    labels = [int(run_ort(model, d)[0].argmax()) for d in data[8:]]
    calls = []

    def accuracy(outputs):
        calls.append(len(outputs))
        first = [next(iter(o.values())) for o in outputs]
        return np.mean([int(y.argmax()) == t for y, t in zip(first, labels)])

    _, report = infopt.optimize(model, int8=True, calib_data=data, calib_samples=8, held_out=8,
                                metric=accuracy, int8_max_drop=0.05,
                                input_shapes={"input": {"batch": 1}})
    q = report.to_dict()["int8"]
    assert q["max_drop"] == 0.05
    m = q["held_out"]["metric"]
    assert m["original"] == 1.0
    assert m["candidate"] >= 0.95
    assert q["target_met"] is True
    # Called on every held-out sample for the judgements.
    assert 8 in calls
    # A metric that cannot score fails the command, naming it.
    with pytest.raises(infopt.VerificationError, match="the metric failed"):
        infopt.optimize(model, int8=True, calib_data=data, calib_samples=8, held_out=8,
                        metric=lambda outputs: "not a number", input_shapes={"input": {"batch": 1}})
