"""Transformer fusions in ONNX Runtime.

tract runs neither the opset-23 `Attention` op nor ONNX Runtime's contrib ops,
so the Rust tests check structure; here ONNX Runtime runs the original and the
optimized models on the same inputs (padded attention masks included), with
ORT's own graph optimizations off and on, and `onnx.checker` checks the files.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest

import _interop

RTOL, ATOL = 1e-4, 1e-4

FIXTURES = [
    "bert_attention.onnx",
    "bert_attention_op23.onnx",
    "gpt2_attention.onnx",
    "gpt2_attention_op23.onnx",
    "transformer_block.onnx",
    "exported/bert_tiny.onnx",
    "vit_attention_dynamo.onnx",
    "vit_attention_static.onnx",
    "vit_attention_regrouped.onnx",
]


def _optimize(src, out, target, *extra):
    proc = _interop.run_cli("optimize", src, "-o", out, "--target", target, "--validate", *extra)
    assert proc.returncode == 0, _interop.describe(proc)
    return onnx.load(str(out))


def _session(path, optimize: bool):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _feeds(sess, seed: int, left_padding: bool = True):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        batch, seq = 2, 7
        if i.name == "attention_mask":
            m = np.ones((batch, seq), np.int64)
            m[1, 4:] = 0  # the second sequence is padded on the right,
            if left_padding:
                m[0, :2] = 0  # the first on the left
            m[0, 4] = 0  # with a hole
            feeds[i.name] = m
        elif i.name == "token_type_ids":
            feeds[i.name] = rng.integers(0, 2, (batch, seq), dtype=np.int64)
        elif i.name == "input_ids":
            feeds[i.name] = rng.integers(0, 100, (batch, seq), dtype=np.int64)
        else:
            # Declared dims as they are (a ViT's fixed sequence, a batch of 1).
            shape = [d if isinstance(d, int) else (batch, seq)[k] for k, d in enumerate(i.shape)]
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _assert_same_in_ort(original, optimized, tag, left_padding=True):
    for optimize in (False, True):
        a = _session(original, optimize)
        b = _session(optimized, optimize)
        for seed in (0, 1):
            feeds = _feeds(a, seed, left_padding)
            expected = a.run(None, feeds)
            got = b.run(None, feeds)
            for e, g in zip(expected, got):
                diff = float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))))
                assert np.allclose(g, e, rtol=RTOL, atol=ATOL), f"{tag}: max abs diff {diff}"


def _ops(model):
    return collections.Counter((n.domain + ":" if n.domain else "") + n.op_type for n in model.graph.node)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_onnxruntime_target_matches_and_declares_com_microsoft_1(infopt, tmp_path, fixture):
    src = _interop.MODELS / fixture
    out = tmp_path / "ort.onnx"
    model = _optimize(src, out, "onnxruntime")
    ops = _ops(model)
    ms = [o.version for o in model.opset_import if o.domain == "com.microsoft"]
    if any(k.startswith("com.microsoft:") for k in ops):
        assert ms == [1], ms
    # onnx.checker knows no com.microsoft schemas: it checks the graph and
    # skips those nodes, with the domain declared (an undeclared domain fails).
    onnx.checker.check_model(model, full_check=True)
    _assert_same_in_ort(src, out, fixture)


def test_onnxruntime_target_fuses_the_attention_fixtures(infopt, tmp_path):
    expected = {
        "bert_attention.onnx": {"com.microsoft:Attention": 2, "com.microsoft:BiasGelu": 2,
                                "com.microsoft:SkipLayerNormalization": 4},
        "gpt2_attention.onnx": {"com.microsoft:Attention": 2, "com.microsoft:FastGelu": 2,
                                "com.microsoft:SkipLayerNormalization": 4},
        "exported/bert_tiny.onnx": {"com.microsoft:Attention": 2,
                                    "com.microsoft:EmbedLayerNormalization": 1,
                                    "com.microsoft:SkipLayerNormalization": 4},
        "vit_attention_dynamo.onnx": {"com.microsoft:Attention": 2,
                                      "com.microsoft:SkipLayerNormalization": 1},
        "vit_attention_static.onnx": {"com.microsoft:Attention": 2,
                                      "com.microsoft:SkipLayerNormalization": 1},
    }
    for fixture, want in expected.items():
        # For a GPU provider (named; the output is not run here)...
        model = _optimize(_interop.MODELS / fixture, tmp_path / "o.onnx", "onnxruntime",
                          "--ep", "cuda", "--no-verify")
        ops = _ops(model)
        for op, n in want.items():
            assert ops[op] == n, f"{fixture}: {op}: {dict(ops)}"
        assert ops["Softmax"] == 0, f"{fixture}: {dict(ops)}"
        # ...and for the CPU provider of the ONNX Runtime installed here, where
        # SkipLayerNormalization is slower than Add + LayerNormalization: the
        # same but those, verified.
        model = _optimize(_interop.MODELS / fixture, tmp_path / "c.onnx", "onnxruntime")
        cpu = _ops(model)
        skips = want["com.microsoft:SkipLayerNormalization"]
        assert cpu["com.microsoft:SkipLayerNormalization"] == 0, f"{fixture}: {dict(cpu)}"
        assert cpu["LayerNormalization"] == ops["LayerNormalization"] + skips, f"{fixture}: {dict(cpu)}"
        for op, n in want.items():
            if op != "com.microsoft:SkipLayerNormalization":
                assert cpu[op] == n, f"{fixture}: {op}: {dict(cpu)}"


@pytest.mark.parametrize("target", ["portable", "tensorrt"])
@pytest.mark.parametrize("fixture", FIXTURES)
def test_standard_targets_emit_only_standard_ops_and_match(infopt, tmp_path, fixture, target):
    src = _interop.MODELS / fixture
    out = tmp_path / "std.onnx"
    model = _optimize(src, out, target)
    foreign = sorted({f"{n.domain}:{n.op_type}" for n in model.graph.node if n.domain not in ("", "ai.onnx")})
    assert foreign == [], foreign
    assert all(o.domain in ("", "ai.onnx") for o in model.opset_import), list(model.opset_import)
    onnx.checker.check_model(model, full_check=True)
    # The standard Attention op is opt-in (fuse-attention is not in the
    # default pipeline: see the comment below), so none appears.
    assert _ops(model)["Attention"] == 0, dict(_ops(model))
    # ONNX Runtime (1.31, 1.32) returns zeros for a query row whose mask is
    # the float32 minimum everywhere (left padding in a causal model), where
    # the ONNX reference implementation of Attention, like the decomposed
    # graph, averages V (test_attention_fully_masked_row_*): such rows are
    # left out here.
    _assert_same_in_ort(src, out, f"{fixture} {target}", left_padding="op23" not in fixture)


def _one_attention(mask_row_value):
    from onnx import TensorProto, helper

    n = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], q_num_heads=2, kv_num_heads=2, scale=0.5)
    io = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4, 8]) for x in "qkv"]
    g = helper.make_graph([n], "g", io + [helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((1, 4, 8)).astype(np.float32) for x in "qkv"}
    mask = np.zeros((1, 1, 4, 4), np.float32)
    mask[0, 0, 0, :] = mask_row_value
    feeds["mask"] = mask
    return m, feeds


def test_attention_fully_masked_row_reference_averages_v_like_the_decomposed_graph():
    """What fuse-attention relies on: the ONNX reference implementation gives
    a row masked with the float32 minimum the decomposed graph's result."""
    from onnx.reference import ReferenceEvaluator

    m, feeds = _one_attention(np.finfo(np.float32).min)
    y = ReferenceEvaluator(m).run(None, feeds)[0]
    assert np.abs(y[0, 0]).max() > 0.1, y[0, 0]


def test_attention_fully_masked_row_onnxruntime_gives_zeros():
    """Documents ONNX Runtime's deviation (see fuse-attention's Numerics):
    this test fails the day ORT follows the reference."""
    import onnxruntime as ort

    m, feeds = _one_attention(np.finfo(np.float32).min)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    y = s.run(None, feeds)[0]
    assert np.abs(y[0, 0]).max() == 0.0, y[0, 0]


def test_checker_rejects_com_microsoft_nodes_without_the_opset_import(infopt, tmp_path):
    """Why the passes declare com.microsoft 1: without it the file is invalid."""
    model = _optimize(_interop.MODELS / "bert_attention.onnx", tmp_path / "o.onnx", "onnxruntime")
    del model.opset_import[:]
    model.opset_import.append(onnx.helper.make_opsetid("", 17))
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model, full_check=True)
