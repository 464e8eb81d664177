"""Classifiers as skl2onnx and onnxmltools write them (ai.onnx.ml ops): class labels as
an int64 output next to the probabilities, the probabilities zipped into a sequence of
maps by ZipMap unless the converter was told `zipmap=False`, a tree ensemble as one node
whose outputs are all graph outputs, a label output declared `[1]` that returns one label
per row, labels that are strings. Every default command (optimize, --fp16, --int8 on both targets) exits 0; the
outputs load in ONNX Runtime and compute the original's labels and probabilities; the
sequence of maps is compared, not skipped; INT8 quantizes the MLP's layers and writes the
float model, saying so, where there is no layer to quantize."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import _interop

CLASSES = 5
FEATURES = 16
OPSETS = [helper.make_opsetid("", 15), helper.make_opsetid("ai.onnx.ml", 3)]


def _save(nodes, outputs, inits, path):
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, FEATURES])],
        outputs, inits,
    )
    model = helper.make_model(graph, opset_imports=OPSETS, ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def _label_head(probabilities, strings=False):
    """ArgMax over the classes, then the class labels: skl2onnx's label output (strings
    for a classifier trained on class names)."""
    last = (helper.make_node("Identity", ["label_raw"], ["label"], name="label") if strings else
            helper.make_node("Cast", ["label_raw"], ["label"], name="cast_label", to=TensorProto.INT64))
    return [
        helper.make_node("ArgMax", [probabilities], ["argmax"], name="argmax", axis=1),
        helper.make_node("ArrayFeatureExtractor", ["classes", "argmax"], ["picked"],
                         name="extract", domain="ai.onnx.ml"),
        helper.make_node("Reshape", ["picked", "flat"], ["label_raw"], name="reshape"),
        last,
    ]


def _label_inits(strings=False):
    classes = (helper.make_tensor("classes", TensorProto.STRING, [CLASSES],
                                  [f"class {c}".encode() for c in range(CLASSES)])
               if strings else numpy_helper.from_array(np.arange(CLASSES, dtype=np.int64), "classes"))
    return [classes, numpy_helper.from_array(np.array([-1], np.int64), "flat")]


def _zipmap_or_tensor(zipmap: bool, probabilities: str):
    if zipmap:
        node = helper.make_node("ZipMap", [probabilities], ["output_probability"], name="zipmap",
                                domain="ai.onnx.ml", classlabels_int64s=list(range(CLASSES)))
        out = helper.make_value_info(
            "output_probability",
            helper.make_sequence_type_proto(helper.make_map_type_proto(
                TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, None))))
        return [node], out
    node = helper.make_node("Identity", [probabilities], ["probabilities"], name="probs")
    return [node], helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, CLASSES])


def mlp(path, zipmap: bool, strings=False):
    """Scaler, two dense layers, Softmax: scikit-learn's MLPClassifier."""
    rng = np.random.default_rng(4)
    inits = _label_inits(strings) + [
        numpy_helper.from_array(rng.normal(0, 0.5, (FEATURES, 32)).astype(np.float32), "w0"),
        numpy_helper.from_array(rng.normal(0, 0.1, (32,)).astype(np.float32), "b0"),
        numpy_helper.from_array(rng.normal(0, 3.0, (32, CLASSES)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.normal(0, 0.1, (CLASSES,)).astype(np.float32), "b1"),
    ]
    nodes = [
        helper.make_node("Scaler", ["X"], ["scaled"], name="scaler", domain="ai.onnx.ml",
                         offset=[0.5] * FEATURES, scale=[2.0] * FEATURES),
        helper.make_node("Cast", ["scaled"], ["cast_input"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["cast_input", "w0"], ["m0"], name="matmul0"),
        helper.make_node("Add", ["m0", "b0"], ["a0"], name="add0"),
        helper.make_node("Relu", ["a0"], ["h0"], name="relu0"),
        helper.make_node("MatMul", ["h0", "w1"], ["m1"], name="matmul1"),
        helper.make_node("Add", ["m1", "b1"], ["a1"], name="add1"),
        helper.make_node("Softmax", ["a1"], ["softmax"], name="softmax", axis=1),
    ] + _label_head("softmax", strings)
    tail, prob_out = _zipmap_or_tensor(zipmap, "softmax")
    label_type = TensorProto.STRING if strings else TensorProto.INT64
    label_out = helper.make_tensor_value_info("label", label_type, [None])
    _save(nodes + tail, [label_out, prob_out], inits, path)


def trees(path, zipmap: bool):
    """One TreeEnsembleClassifier (a stump per class), then ZipMap or not: every float
    tensor of the model is a graph output, so there is nothing to observe."""
    ids = list(range(CLASSES))
    attrs = dict(
        nodes_treeids=[t for t in ids for _ in range(3)],
        nodes_nodeids=[n for _ in ids for n in range(3)],
        nodes_featureids=[t % FEATURES for t in ids for _ in range(3)],
        nodes_values=[0.5 for _ in ids for _ in range(3)],
        nodes_modes=[m for _ in ids for m in ("BRANCH_LEQ", "LEAF", "LEAF")],
        nodes_truenodeids=[t for _ in ids for t in (1, 0, 0)],
        nodes_falsenodeids=[f for _ in ids for f in (2, 0, 0)],
        nodes_missing_value_tracks_true=[0] * (3 * CLASSES),
        nodes_hitrates=[1.0] * (3 * CLASSES),
        class_treeids=[t for t in ids for _ in range(2)],
        class_nodeids=[n for _ in ids for n in (1, 2)],
        class_ids=[t for t in ids for _ in range(2)],
        class_weights=[w for _ in ids for w in (0.2, 0.8)],
        classlabels_int64s=ids,
        post_transform="NONE",
    )
    nodes = [helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "scores"], name="trees",
                              domain="ai.onnx.ml", **attrs)]
    tail, prob_out = _zipmap_or_tensor(zipmap, "scores")
    if not zipmap:
        # skl2onnx with zipmap=False: the ensemble's outputs are the graph's.
        tail = []
        prob_out = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [None, CLASSES])
    # onnxmltools' LightGBM converter declares the labels `[1]`, one per row at run time.
    label_out = helper.make_tensor_value_info("label", TensorProto.INT64, [1])
    _save(nodes + tail, [label_out, prob_out], [], path)


def _samples(folder, seed, n=16, rows=8):
    folder.mkdir()
    rng = np.random.default_rng(seed)
    for i in range(n):
        np.savez(folder / f"{i:04d}.npz", X=rng.uniform(0, 1, (rows, FEATURES)).astype(np.float32))


def _rows(session, x):
    """Each output as an array; a sequence of maps as [rows, classes] in key order."""
    out = []
    for o in session.run(None, {"X": x}):
        if isinstance(o, list):
            o = np.array([[m[k] for k in sorted(m)] for m in o], np.float32)
        out.append(np.asarray(o))
    return out


def tree_regressor(path, zipmap: bool):
    """One TreeEnsembleRegressor with a `[rows, 1]` output: a row may fall in [0, 1] on one
    sample and not on the next (judged as a score row before, and INT8 exited 4 on a model
    it left float)."""
    del zipmap
    node = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["variable"], name="trees", domain="ai.onnx.ml",
        n_targets=1, nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
        nodes_values=[0.5, 0, 0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
        nodes_missing_value_tracks_true=[0, 0, 0], nodes_hitrates=[1.0, 1.0, 1.0],
        target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[0.25, 7.5],
        post_transform="NONE")
    # A label-like first output keeps the test's (labels, values) reading.
    cast = helper.make_node("Cast", ["variable"], ["label"], name="cast", to=TensorProto.INT64)
    outputs = [helper.make_tensor_value_info("label", TensorProto.INT64, [None, 1]),
               helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, 1])]
    _save([node, cast], outputs, [], path)


def mlp_named_classes(path, zipmap: bool):
    """The MLP trained on class names: its labels are strings."""
    mlp(path, zipmap, strings=True)


MODELS = [("mlp", mlp, True), ("mlp", mlp, False), ("trees", trees, True), ("trees", trees, False),
          ("mlp", mlp_named_classes, False), ("trees", tree_regressor, False)]


@pytest.mark.parametrize("name,build,zipmap", MODELS,
                         ids=[f"{b.__name__}-{'zipmap' if z else 'tensor'}" for _, b, z in MODELS])
def test_every_default_command_keeps_a_classifier(infopt, tmp_path, name, build, zipmap):
    import onnxruntime as ort

    src = tmp_path / f"{name}.onnx"
    build(src, zipmap)
    calib = tmp_path / "calib"
    _samples(calib, 1)
    if build is tree_regressor:
        # The first sample's first row in [0, 1], its other rows far above.
        first = np.full((8, FEATURES), 0.9, np.float32)
        first[0, 0] = 0.1
        np.savez(calib / "0000.npz", X=first)
    x = np.random.default_rng(7).uniform(0, 1, (32, FEATURES)).astype(np.float32)
    original = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    expected = _rows(original, x)
    runs = {
        # --bench times both models with outputs bound once and reused: the labels
        # declared `[1]` take plain runs instead.
        "optimize": ["--bench"],
        "fp16": ["--fp16"],
        "int8": ["--int8", "--calib-data", calib],
        "int8-ort": ["--int8", "--calib-data", calib, "--target", "onnxruntime"],
    }
    before = src.read_bytes()
    for kind, extra in runs.items():
        out = tmp_path / f"{kind}.onnx"
        proc = _interop.run_cli("optimize", src, "-o", out, "--json", *extra)
        assert proc.returncode == 0, f"{kind}: {_interop.describe(proc)}"
        report = json.loads(proc.stdout)
        onnx.checker.check_model(onnx.load(str(out)), full_check=True)
        got = _rows(ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]), x)
        labels, probabilities = got
        if kind.startswith("int8") and name == "mlp":
            # The layers are in INT8: the labels of nearly every row, and the probabilities
            # near the original's.
            assert any(n.op_type == "DequantizeLinear" for n in onnx.load(str(out)).graph.node), kind
            assert (labels == expected[0]).mean() >= 0.9, kind
            np.testing.assert_allclose(probabilities, expected[1], atol=0.1)
            # The probabilities are judged as a classifier's (top-1), not as embeddings.
            classifiers = report["int8"]["classifier_outputs"]
            assert classifiers == ["output_probability" if zipmap else "probabilities"], classifiers
        else:
            # float16 logits move a probability by a few 1e-3; the labels stay.
            tolerance = 1e-2 if kind == "fp16" else 1e-5
            np.testing.assert_array_equal(labels, expected[0])
            np.testing.assert_allclose(probabilities, expected[1], rtol=0, atol=tolerance)
        if kind.startswith("int8") and name == "trees":
            assert any("no layer of this model could be put in INT8" in n for n in report["notes"]), report["notes"]
        if kind == "optimize" and name == "mlp":
            # Compared output by output, the sequence of maps among them.
            compared = [o["name"] for o in report["verification"]["outputs"]]
            assert compared == ["label", "output_probability" if zipmap else "probabilities"], compared
    assert src.read_bytes() == before


def test_a_string_input_is_fed_strings_its_readers_know(infopt, tmp_path):
    # CategoryMapper reads strings (a categorical feature). Before, no runtime here was fed
    # one, so a rewrite could not be verified (exit 7, "holds strings"). Now ONNX Runtime is
    # fed the categories the mapper lists (generated), or the user's own str_ array.
    graph = helper.make_graph(
        [helper.make_node("CategoryMapper", ["c"], ["i"], name="map", domain="ai.onnx.ml",
                          cats_strings=["a", "b", "c"], cats_int64s=[0, 1, 2], default_int64=3),
         helper.make_node("Cast", ["i"], ["f"], name="cast", to=TensorProto.FLOAT),
         helper.make_node("Identity", ["f"], ["g"], name="same"),
         helper.make_node("Mul", ["g", "k"], ["y"], name="scale")],
        "categories",
        [helper.make_tensor_value_info("c", TensorProto.STRING, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])],
        [numpy_helper.from_array(np.array([2.0], np.float32), "k")],
    )
    src = tmp_path / "categories.onnx"
    onnx.save(helper.make_model(graph, opset_imports=OPSETS, ir_version=8), str(src))
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    proc = _interop.run_cli("optimize", src, "-o", out, "--report", report)
    assert proc.returncode == 0, _interop.describe(proc)
    r = json.loads(report.read_text())
    assert r["verification"]["passed"] is True
    (y,) = r["verification"]["outputs"]
    assert y["name"] == "y" and y["elements"] >= 2, y
    assert "input `c` holds strings: generated from 3 string(s) that the ops reading it list" in r["notes"], r["notes"]
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == ["CategoryMapper", "Cast", "Mul"]
    # The user's strings, as numpy writes them (str_ and bytes_ arrays).
    for i, words in enumerate([np.array(["b", "zz", "a", "c"]), np.array([b"c", b"a"])]):
        data = tmp_path / f"words{i}.npz"
        np.savez(data, c=words)
        proc = _interop.run_cli("optimize", src, "-o", tmp_path / f"w{i}.onnx", "--inputs", data, "--report", report)
        assert proc.returncode == 0, _interop.describe(proc)
        v = json.loads(report.read_text())["verification"]
        assert v["passed"] is True and v["outputs"][0]["elements"] == len(words), v
    # Without ONNX Runtime nothing here is fed strings: the message says so and the way out.
    env = {**os.environ, **_interop.TEST_ENV, "ORT_DYLIB_PATH": str(tmp_path / "no-onnxruntime.so")}
    lone = tmp_path / "lone.onnx"
    proc = subprocess.run([str(_interop.infopt_bin()), "optimize", str(src), "-o", str(lone)],
                          capture_output=True, text=True, env=env, timeout=_interop.CLI_TIMEOUT_S)
    assert proc.returncode == 7, _interop.describe(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert last == ("error: cannot verify: the model's input `c` holds strings, which only ONNX Runtime is "
                    "fed here and it is not available: install it (pip install onnxruntime), or pass "
                    "--no-verify to write the model unverified"), last
    assert not lone.exists()
