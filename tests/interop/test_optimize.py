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


def _detector_with_nms(path):
    """A detection head with its NonMaxSuppression, as torchvision and ultralytics'
    `nms=True` export them: x [1, 8, 16] → Conv (1x1) → [1, 6, 16] → boxes (4 rows,
    transposed to [1, 16, 4]) and Sigmoid scores (2 classes), then NMS at a score
    threshold of 0.9 and the kept boxes, scores and labels. On generated inputs the
    scores stay near 0.5: nothing is kept."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("w", rng.normal(0, 0.2, (6, 8, 1)).astype(np.float32)),
        ("b", np.array([8, 8, 4, 4, -1, -1], np.float32)),
        ("s0", np.array([0], np.int64)), ("e0", np.array([4], np.int64)),
        ("s1", np.array([4], np.int64)), ("e1", np.array([6], np.int64)), ("ax", np.array([1], np.int64)),
        ("most", np.array([10], np.int64)), ("iou", np.array([0.5], np.float32)),
        ("thr", np.array([0.9], np.float32)), ("two", np.array(2, np.int64)), ("one", np.array(1, np.int64)),
        ("ax0", np.array([0], np.int64)),
    ]]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["head"], name="head"),
        helper.make_node("Slice", ["head", "s0", "e0", "ax"], ["box_rows"], name="box_rows"),
        helper.make_node("Transpose", ["box_rows"], ["nms_boxes"], perm=[0, 2, 1], name="to_boxes"),
        helper.make_node("Slice", ["head", "s1", "e1", "ax"], ["logits"], name="class_rows"),
        helper.make_node("Sigmoid", ["logits"], ["nms_scores"], name="sigmoid"),
        helper.make_node("NonMaxSuppression", ["nms_boxes", "nms_scores", "most", "iou", "thr"], ["sel"],
                         center_point_box=1, name="nms"),
        helper.make_node("Gather", ["sel", "two"], ["box_idx"], axis=1, name="box_idx"),
        helper.make_node("Gather", ["sel", "one"], ["labels"], axis=1, name="labels"),
        helper.make_node("Squeeze", ["nms_boxes", "ax0"], ["boxes0"], name="squeeze"),
        helper.make_node("Gather", ["boxes0", "box_idx"], ["boxes"], axis=0, name="kept_boxes"),
        helper.make_node("GatherND", ["nms_scores", "sel"], ["scores"], name="kept_scores"),
    ]
    g = helper.make_graph(
        nodes, "nms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["K", 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["K"]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, ["K"])],
        initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


@pytest.mark.parametrize("flags", [[], ["--fp16"]], ids=["float32", "fp16"])
def test_verification_compares_what_a_selection_reads_when_it_keeps_nothing(tmp_path, flags):
    # Before, a detector with its NMS verified "PASSED" on 0 of 0 values: the outputs
    # held only what the NMS kept, nothing on generated inputs, so what feeds it was
    # never compared, in float32 or in float16.
    src = _detector_with_nms(tmp_path / "det.onnx")
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    proc = _interop.run_cli("optimize", src, "-o", out, "--report", report, *flags)
    assert proc.returncode == 0, _interop.describe(proc)
    onnx.checker.check_model(str(out), full_check=True)
    r = json.loads(report.read_text())
    v = r["verification"]
    compared = {o["name"]: o["elements"] for o in v["outputs"]}
    assert compared == {"boxes": 0, "scores": 0, "labels": 0, "nms_boxes": 64, "nms_scores": 32}, compared
    assert v["passed"] is True
    said = ("what the model's data-dependent selections (NonMaxSuppression, TopK, NonZero, Compress) read: "
            "nms_boxes, nms_scores")
    assert any(said in n for n in r["notes"]), r["notes"]
    # The written model computes the same boxes and scores in ONNX Runtime.
    sess = _interop.ort_session
    x = {"x": np.random.default_rng(1).normal(0, 4, (1, 8, 16)).astype(np.float32)}
    want, got = _interop.run(sess(src), x), _interop.run(sess(out), x)
    assert want["labels"].size > 0
    np.testing.assert_array_equal(want["labels"], got["labels"])
    np.testing.assert_allclose(got["scores"], want["scores"], atol=2e-3 if flags else 1e-5)


def test_a_watched_tensor_the_pipeline_folds_away_is_said_not_compared(tmp_path):
    # The boxes an NMS reads are computed from constants only: folding makes them a
    # weight of the optimized model, which computes no tensor of that name any more.
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("anchors", np.array([[[0.2, 0.2, 0.1, 0.1], [0.6, 0.6, 0.2, 0.2]]], np.float32)),
        ("shift", np.array([0.01], np.float32)), ("most", np.array([5], np.int64)),
        ("iou", np.array([0.5], np.float32)), ("thr", np.array([0.5], np.float32))]]
    nodes = [
        helper.make_node("Add", ["anchors", "shift"], ["nms_boxes"], name="boxes"),
        helper.make_node("Sigmoid", ["x"], ["nms_scores"], name="scores"),
        helper.make_node("NonMaxSuppression", ["nms_boxes", "nms_scores", "most", "iou", "thr"], ["sel"],
                         center_point_box=1, name="nms"),
    ]
    g = helper.make_graph(nodes, "folded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2])],
                          [helper.make_tensor_value_info("sel", TensorProto.INT64, ["K", 3])], initializer=inits)
    src = tmp_path / "folded.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(src))
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    proc = _interop.run_cli("optimize", src, "-o", out, "--report", report)
    assert proc.returncode == 0, _interop.describe(proc)
    r = json.loads(report.read_text())
    compared = [o["name"] for o in r["verification"]["outputs"]]
    assert compared == ["sel", "nms_scores"], compared
    said = ("verification did not compare nms_boxes: read by a data-dependent selection in the original, "
            "but the optimized model computes no tensor of that name")
    assert any(n.startswith(said) for n in r["notes"]), r["notes"]
