//! Transformer fusions: `fuse-attention` (standard Attention, opset 23) and
//! the ONNX Runtime contrib fusions (`fuse-ort-attention`,
//! `fuse-skip-layer-norm`, `fuse-bias-gelu`) on fixtures that reproduce
//! torch.onnx's BERT and GPT-2 blocks. Exact op histograms after the default
//! pipeline here; tract 0.23 runs neither `Attention` nor the contrib ops,
//! so the numbers are compared in ONNX Runtime by
//! tests/interop/test_transformer_fusions.py, and here only for the parts
//! tract runs (the pipeline below opset 23 for the portable target).

mod common;

use std::collections::BTreeMap;

use common::*;
use infopt_ir::Model;
use infopt_passes::{DriverOptions, Flow, PipelineConfig, PipelineRun, Target, run_pipeline};
use infopt_runtime::InputShapes;

const DEFAULT: &str = include_str!("../../configs/default.yaml");

/// The whole default pipeline for `target`.
fn default_pipeline(model: &mut Model, target: Target) -> PipelineRun {
    // fuse-attention is opt-in (ONNX Runtime's fully-masked-row deviation,
    // see the pass's Numerics): these tests add it after fuse-ort-attention.
    let yaml = DEFAULT.replacen(
        "- fuse-ort-attention\n",
        "- fuse-ort-attention\n        - fuse-attention\n",
        1,
    );
    assert_ne!(
        yaml, DEFAULT,
        "fuse-ort-attention is in the default pipeline"
    );
    let mut config = PipelineConfig::from_yaml(&yaml, "configs/default.yaml").expect("default");
    config.target = target;
    // The built-in pipeline, as `optimize --target T` runs it without `--ep`
    // (so fuse-conv-activation leaves the pooler's Gemm + Tanh as they are).
    let options = DriverOptions {
        validate: true,
        builtin_pipeline: true,
        ..Default::default()
    };
    run_pipeline(model, &config, &options, &mut |_, _| Ok(Flow::Continue)).expect("pipeline")
}

fn shapes() -> InputShapes {
    InputShapes::new().with_default_dim(3)
}

/// Node counts by `domain:op` for ops outside the default domain, by op otherwise.
fn ops_by_domain(m: &Model) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, n) in m.graph.nodes() {
        let key = match n.domain() {
            "" => n.op_type.clone(),
            d => format!("{d}:{}", n.op_type),
        };
        *out.entry(key).or_insert(0) += 1;
    }
    out
}

/// Declined rewrites of the transformer passes, for failure messages.
fn ours(run: &PipelineRun) -> Vec<String> {
    run.declined
        .iter()
        .filter(|d| {
            matches!(
                d.pass,
                "fuse-attention" | "fuse-ort-attention" | "fuse-skip-layer-norm" | "fuse-bias-gelu"
            )
        })
        .map(|d| format!("{} at {}: {}", d.pass, d.at, d.reason))
        .collect()
}

fn declined(run: &PipelineRun, pass: &str) -> Vec<String> {
    run.declined
        .iter()
        .filter(|d| d.pass == pass)
        .map(|d| d.reason.clone())
        .collect()
}

/// The first `Attention` node (either domain).
fn first_attention(m: &Model) -> infopt_ir::Node {
    m.graph
        .nodes()
        .find(|(_, n)| n.op_type == "Attention")
        .map(|(_, n)| n.clone())
        .expect("an Attention node")
}

fn ms_opset(m: &Model) -> Option<i64> {
    m.opset("com.microsoft")
}

// ----- fuse-attention (standard, opset 23) -----

#[test]
fn bert_op23_attention_becomes_standard_attention_with_3d_inputs() {
    let original = load("bert_attention_op23.onnx");
    let mut m = original.clone();
    let run = default_pipeline(&mut m, Target::Portable);
    let got = ops_by_domain(&m);
    assert_eq!(
        got,
        histogram(BERT_OP23_PORTABLE),
        "{got:#?} {:#?}",
        ours(&run)
    );
    for (_, n) in m.graph.nodes().filter(|(_, n)| n.is("Attention")) {
        assert_eq!(n.attr_int("q_num_heads").unwrap(), Some(2));
        assert_eq!(n.attr_int("kv_num_heads").unwrap(), Some(2));
        let scale = n.attr_float("scale").unwrap().unwrap();
        assert!((scale - 0.25).abs() < 1e-7, "scale {scale}");
        assert_eq!(n.inputs.len(), 4, "q, k, v and the mask");
    }
    assert_eq!(ms_opset(&m), None);
    // tract 0.23 has no Attention: the numbers are compared in ONNX Runtime
    // (tests/interop/test_transformer_fusions.py).
    assert_eq!(
        original
            .graph
            .nodes()
            .filter(|(_, n)| n.is("Softmax"))
            .count(),
        2
    );
}

/// Per layer: Attention, Q/K/V MatMuls and their biases packed into one
/// MatMul + Add (+ Split), output dense, 2 residual Adds + 2 LayerNormalization, the FFN with
/// its GELU as the opset-20 `Gelu` (fuse-gelu). Once: the mask (Shape, 2
/// Slice, Concat, Unsqueeze, Cast, Sub, Mul, Expand).
const BERT_OP23_PORTABLE: &[(&str, usize)] = &[
    ("Add", 12),
    ("Attention", 2),
    ("Cast", 1),
    ("Concat", 1),
    ("Expand", 1),
    ("Gelu", 2),
    ("LayerNormalization", 4),
    ("MatMul", 8),
    ("Mul", 1),
    ("Shape", 1),
    ("Slice", 2),
    ("Split", 2),
    ("Sub", 1),
    ("Unsqueeze", 1),
];

#[test]
fn gpt2_op23_sdpa_scales_on_q_and_k_multiply_into_one_scale() {
    let original = load("gpt2_attention_op23.onnx");
    let mut m = original.clone();
    let run = default_pipeline(&mut m, Target::Portable);
    let got = ops_by_domain(&m);
    assert_eq!(
        got,
        histogram(GPT2_OP23_PORTABLE),
        "{got:#?} {:#?}",
        ours(&run)
    );
    for (_, n) in m.graph.nodes().filter(|(_, n)| n.is("Attention")) {
        // sqrt(1/4) on Q and on Kᵀ: 0.25 in all.
        let scale = n.attr_float("scale").unwrap().unwrap();
        assert!((scale - 0.25).abs() < 1e-6, "scale {scale}");
    }
    assert_eq!(
        original
            .graph
            .nodes()
            .filter(|(_, n)| n.is("Softmax"))
            .count(),
        2
    );
}

const GPT2_OP23_PORTABLE: &[(&str, usize)] = &[
    ("Add", 13),
    ("Attention", 2),
    ("Cast", 1),
    ("Gather", 1),
    ("Gelu", 2),
    ("LayerNormalization", 5),
    ("LessOrEqual", 1),
    ("MatMul", 8),
    ("Max", 1),
    ("Mul", 1),
    ("Range", 1),
    ("Shape", 1),
    ("Split", 2),
    ("Sub", 1),
    ("Unsqueeze", 3),
    ("Where", 1),
];

#[test]
fn below_opset_23_attention_is_left_alone() {
    for f in ["bert_attention.onnx", "gpt2_attention.onnx"] {
        let original = load(f);
        let mut m = original.clone();
        let run = default_pipeline(&mut m, Target::Portable);
        assert_equivalent(&original, &m, &shapes(), 1e-4, 1e-4);
        let got = ops_by_domain(&m);
        assert_eq!(got.get("Softmax"), Some(&2), "{f}: {got:#?}");
        assert_eq!(got.get("Attention"), None, "{f}");
        assert!(
            declined(&run, "fuse-attention").is_empty(),
            "{f}: silent below 23"
        );
    }
}

#[test]
fn attention_probabilities_read_elsewhere_decline_with_reason() {
    let original = load("bert_attention_op23.onnx");
    let mut m = original.clone();
    // Expose the first layer's probabilities as a graph output.
    let g = &mut m.graph;
    let sm = g
        .nodes()
        .find(|(_, n)| n.is("Softmax"))
        .map(|(id, _)| id)
        .unwrap();
    let probs = g.node(sm).outputs[0].unwrap();
    let info = infopt_ir::proto::ValueInfoProto {
        name: Some(g.value(probs).name.clone()),
        ..Default::default()
    };
    g.outputs.push(infopt_ir::GraphIo { value: probs, info });
    let run = default_pipeline(&mut m, Target::Portable);
    assert_eq!(
        ops_by_domain(&m).get("Attention"),
        Some(&1),
        "the other layer fuses"
    );
    let reasons = declined(&run, "fuse-attention");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("probabilities have other readers")),
        "{reasons:?}"
    );
}

// ----- ONNX Runtime contrib fusions -----

#[test]
fn bert_for_onnxruntime_becomes_contrib_ops() {
    let mut m = load("bert_attention.onnx");
    let run = default_pipeline(&mut m, Target::Onnxruntime);
    let got = ops_by_domain(&m);
    assert_eq!(got, histogram(BERT_ORT), "{got:#?} {:#?}", ours(&run));
    assert_eq!(ms_opset(&m), Some(1));
    let att = first_attention(&m);
    assert_eq!(att.domain(), "com.microsoft");
    assert_eq!(att.attr_int("num_heads").unwrap(), Some(2));
    let w = m.graph.constant(att.inputs[1].unwrap()).unwrap();
    assert_eq!(w.dims(), [32, 96], "packed Q/K/V weights");
    assert_eq!(att.inputs.len(), 6, "mask as attention_bias (input 5)");
    assert!(att.inputs[3].is_none() && att.inputs[4].is_none());
}

/// Per layer: Attention, output MatMul, SkipLayerNormalization (bias
/// folded), FFN MatMul, BiasGelu, MatMul, SkipLayerNormalization: 7 nodes,
/// as ONNX Runtime's transformers optimizer leaves BERT. The mask (9 nodes)
/// stays as the graph computes it.
const BERT_ORT: &[(&str, usize)] = &[
    ("Cast", 1),
    ("Concat", 1),
    ("Expand", 1),
    ("MatMul", 6),
    ("Mul", 1),
    ("Shape", 1),
    ("Slice", 2),
    ("Sub", 1),
    ("Unsqueeze", 1),
    ("com.microsoft:Attention", 2),
    ("com.microsoft:BiasGelu", 2),
    ("com.microsoft:SkipLayerNormalization", 4),
];

#[test]
fn gpt2_for_onnxruntime_becomes_contrib_ops() {
    let mut m = load("gpt2_attention.onnx");
    let run = default_pipeline(&mut m, Target::Onnxruntime);
    let got = ops_by_domain(&m);
    assert_eq!(got, histogram(GPT2_ORT), "{got:#?} {:#?}", ours(&run));
    assert_eq!(ms_opset(&m), Some(1));
    // Pre-LN: the residual sum feeds the next block through output 3.
    let with_sum = m
        .graph
        .nodes()
        .filter(|(_, n)| n.op_type == "SkipLayerNormalization" && n.outputs.len() == 4)
        .count();
    assert!(with_sum >= 2, "input_skip_bias_sum used: {with_sum}");
}

/// Pre-LN: the first LayerNormalization has no residual before it; every
/// other one (ln_2, next ln_1, ln_f) is a SkipLayerNormalization.
const GPT2_ORT: &[(&str, usize)] = &[
    ("Add", 1),
    ("Cast", 1),
    ("Gather", 1),
    ("LayerNormalization", 1),
    ("LessOrEqual", 1),
    ("MatMul", 6),
    ("Max", 1),
    ("Mul", 1),
    ("Range", 1),
    ("Shape", 1),
    ("Sub", 1),
    ("Unsqueeze", 3),
    ("Where", 1),
    ("com.microsoft:Attention", 2),
    ("com.microsoft:FastGelu", 2),
    ("com.microsoft:SkipLayerNormalization", 4),
];

#[test]
fn old_style_broadcast_mask_declines_ort_attention_with_reason() {
    // transformer_block.onnx: mask [batch, 1, 1, seq] (no Expand).
    let mut m = load("transformer_block.onnx");
    let run = default_pipeline(&mut m, Target::Onnxruntime);
    let got = ops_by_domain(&m);
    assert_eq!(got.get("com.microsoft:Attention"), None, "{got:#?}");
    assert_eq!(got.get("Softmax"), Some(&1));
    let reasons = declined(&run, "fuse-ort-attention");
    assert!(reasons.iter().any(|r| r.contains("mask")), "{reasons:?}");
    // The residual Add and LayerNormalization after the unfused attention
    // stay, for ONNX Runtime's own attention fusion to match; the one after
    // the MLP fuses.
    assert_eq!(
        got.get("com.microsoft:SkipLayerNormalization"),
        Some(&1),
        "{got:#?}"
    );
    assert_eq!(got.get("LayerNormalization"), Some(&1), "{got:#?}");
    let skip = declined(&run, "fuse-skip-layer-norm");
    assert!(
        skip.iter().any(|r| r
            == "it is next to an attention block that ONNX Runtime fuses itself from a LayerNormalization and Add (fuse-ort-attention did not fuse it)"),
        "{skip:?}"
    );
    assert_eq!(
        got.get("com.microsoft:BiasGelu"),
        Some(&1),
        "{got:#?} {:#?}",
        ours(&run)
    );
}

/// `--target tensorrt` (and portable) never emit a non-standard domain, on
/// every transformer fixture, whole default pipeline.
/// Per ViT layer for ONNX Runtime: Attention (packed Q/K/V, heads split by
/// a `[-1, S, H, d]` or `[1, -1, H, d]` target), the output MatMul, and the
/// residual Add; the second layer's pre-LN becomes a SkipLayerNormalization.
const VIT_ORT: &[(&str, usize)] = &[
    ("Add", 2),
    ("LayerNormalization", 1),
    ("MatMul", 2),
    ("com.microsoft:Attention", 2),
    ("com.microsoft:SkipLayerNormalization", 1),
];

#[test]
fn vit_heads_split_by_a_target_with_a_minus_one_row_fuse_for_onnxruntime() {
    for f in ["vit_attention_dynamo.onnx", "vit_attention_static.onnx"] {
        let mut m = load(f);
        let run = default_pipeline(&mut m, Target::Onnxruntime);
        let got = ops_by_domain(&m);
        assert_eq!(got, histogram(VIT_ORT), "{f}: {got:#?} {:#?}", ours(&run));
        let att = first_attention(&m);
        assert_eq!(att.attr_int("num_heads").unwrap(), Some(2), "{f}");
        let w = m.graph.constant(att.inputs[1].unwrap()).unwrap();
        assert_eq!(w.dims(), [32, 96], "{f}: packed Q/K/V weights");
    }
}

#[test]
fn a_minus_one_that_regroups_the_rows_is_not_self_attention() {
    // `[-1, 3, H, d]` on `[B, 9, H·d]`: attention within groups of 3
    // positions. The -1 is B·3, not B.
    let mut m = load("vit_attention_regrouped.onnx");
    let run = default_pipeline(&mut m, Target::Onnxruntime);
    assert_eq!(ops_by_domain(&m).get("com.microsoft:Attention"), None);
    assert_eq!(ops_by_domain(&m).get("Softmax"), Some(&2));
    assert_eq!(
        declined(&run, "fuse-ort-attention"),
        vec!["Q, K or V is not split into heads from a [B, S, H*d] tensor"; 2]
    );
}

#[test]
fn tensorrt_and_portable_targets_emit_no_contrib_ops() {
    let fixtures = [
        "bert_attention.onnx",
        "bert_attention_op23.onnx",
        "gpt2_attention.onnx",
        "gpt2_attention_op23.onnx",
        "transformer_block.onnx",
        "exported/bert_tiny.onnx",
        "exported/transformer_encoder.onnx",
        "vit_attention_dynamo.onnx",
        "vit_attention_static.onnx",
    ];
    for target in [Target::Tensorrt, Target::Portable] {
        for f in fixtures {
            let mut m = load(f);
            let before = m.graph.node_count();
            let run = default_pipeline(&mut m, target);
            let foreign: Vec<String> = m
                .graph
                .nodes()
                .filter(|(_, n)| !n.domain().is_empty())
                .map(|(_, n)| format!("{}:{}", n.domain(), n.op_type))
                .collect();
            assert!(foreign.is_empty(), "{target} {f}: {foreign:?}");
            assert_eq!(ms_opset(&m), None, "{target} {f}");
            assert!(
                m.graph.node_count() < before,
                "{target} {f}: the pipeline did run"
            );
            // A built-in pipeline's ONNX Runtime-only passes say so in the
            // JSON report's details, not in the printed notes.
            assert!(
                run.details
                    .iter()
                    .any(|n| n.contains("fuse-ort-attention does nothing for target")),
                "{target} {f}: {:?}",
                run.details
            );
        }
    }
}

// ----- unflatten-gemm -----

/// GPT-2's Conv1D as torch exports it: Reshape [-1, D], Gemm, Reshape back
/// to the input's own batch and sequence (Shape/Gather/Unsqueeze/Concat).
fn conv1d_model(trans_b: i64, second_dim_from_other: bool) -> Model {
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "seq", "8"]));
    let other = b.input("other", DataType::Float, dims(&["batch", "seq2", "8"]));
    let w: Vec<f32> = (0..8 * 12)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
        .collect();
    let bias: Vec<f32> = (0..12).map(|i| i as f32 / 20.0).collect();
    let w = b.f32("w", &[8, 12], &w);
    let bias = b.f32("b", &[12], &bias);
    let flat_shape = b.i64("flat", &[2], &[-1, 8]);
    let flat = b.op("Reshape", &[x, flat_shape], vec![]);
    let gemm = b.op(
        "Gemm",
        &[flat, w, bias],
        vec![Attribute::int("transB", trans_b)],
    );
    let shape = b.op("Shape", &[x], vec![]);
    let shape2 = b.op("Shape", &[other], vec![]);
    let i0 = b.i64("i0", &[], &[0]);
    let i1 = b.i64("i1", &[], &[1]);
    let ax = b.i64("ax", &[1], &[0]);
    let d0 = b.op("Gather", &[shape, i0], vec![]);
    let d1 = b.op(
        "Gather",
        &[if second_dim_from_other { shape2 } else { shape }, i1],
        vec![],
    );
    let u0 = b.op("Unsqueeze", &[d0, ax], vec![]);
    let u1 = b.op("Unsqueeze", &[d1, ax], vec![]);
    let n = b.i64("n", &[1], &[12]);
    let target = b.op("Concat", &[u0, u1, n], vec![Attribute::int("axis", 0)]);
    let y = b.op("Reshape", &[gemm, target], vec![]);
    let o = b.op("Relu", &[y], vec![]);
    let o2 = b.op("ReduceSum", &[other], vec![]);
    b.output(o, "y", DataType::Float, None);
    b.output(o2, "s", DataType::Float, None);
    b.build(17)
}

#[test]
fn unflatten_gemm_turns_conv1d_into_matmul_add() {
    let original = conv1d_model(0, false);
    let mut m = original.clone();
    run_passes(&mut m, &["unflatten-gemm", "eliminate-dead"]);
    assert_eq!(
        ops_by_domain(&m),
        histogram(&[("Add", 1), ("MatMul", 1), ("ReduceSum", 1), ("Relu", 1)])
    );
    assert_equivalent(&original, &m, &default_shapes(), 1e-5, 1e-5);
}

#[test]
fn unflatten_gemm_leaves_other_forms_alone() {
    // transB=1 (weight stored [N, D]) and a target whose sequence dim is
    // another tensor's: unchanged.
    for m0 in [conv1d_model(1, false), conv1d_model(0, true)] {
        let mut m = m0.clone();
        let run = run_passes(&mut m, &["unflatten-gemm"]);
        assert_eq!(ops_by_domain(&m), ops_by_domain(&m0));
        assert_eq!(run.records.iter().map(|r| r.rewrites).sum::<usize>(), 0);
    }
}

// ----- fuse-skip-layer-norm -----

/// `LayerNormalization(Add(x, pos))` with `x: [batch, 5, 8]` and a constant
/// `pos: [1, 5, 8]` (position embeddings), the sum also read elsewhere.
fn embeddings_model(pos_batch: i64) -> Model {
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "5", "8"]));
    let pos: Vec<f32> = (0..pos_batch * 40).map(|i| (i % 7) as f32 / 10.0).collect();
    let pos = b.f32("pos", &[pos_batch, 5, 8], &pos);
    let gamma = b.f32("gamma", &[8], &[1.0; 8]);
    let beta = b.f32("beta", &[8], &[0.1; 8]);
    let s = b.op("Add", &[x, pos], vec![]);
    let y = b.op(
        "LayerNormalization",
        &[s, gamma, beta],
        vec![Attribute::float("epsilon", 1e-5)],
    );
    let r = b.op("Relu", &[s], vec![]);
    let o = b.op("Add", &[y, r], vec![]);
    b.output(o, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn skip_of_shape_1_s_h_fuses_and_the_sum_is_output_3() {
    let mut m = embeddings_model(1);
    run_passes_for(
        &mut m,
        &["fuse-skip-layer-norm", "eliminate-dead"],
        Target::Onnxruntime,
    );
    assert_eq!(
        ops_by_domain(&m),
        histogram(&[
            ("Add", 1),
            ("Relu", 1),
            ("com.microsoft:SkipLayerNormalization", 1)
        ])
    );
    let (_, n) = m
        .graph
        .nodes()
        .find(|(_, n)| n.op_type == "SkipLayerNormalization")
        .unwrap();
    assert_eq!(
        m.graph.value(n.inputs[0].unwrap()).name,
        "x",
        "the full operand is the input"
    );
    assert_eq!(
        m.graph.value(n.inputs[1].unwrap()).name,
        "pos",
        "the [1,S,H] one the skip"
    );
    assert_eq!(n.outputs.len(), 4, "the sum, read by Relu, is output 3");
    assert_eq!(ms_opset(&m), Some(1));
}

#[test]
fn skip_layer_norm_declines_other_broadcasts_and_other_targets() {
    // pos [2, 5, 8] against x [batch, 5, 8]: not a form the kernel takes.
    let mut m = embeddings_model(2);
    let run = run_passes_for(&mut m, &["fuse-skip-layer-norm"], Target::Onnxruntime);
    assert_eq!(ops_by_domain(&m).get("LayerNormalization"), Some(&1));
    assert!(
        declined(&run, "fuse-skip-layer-norm")
            .iter()
            .any(|r| r.contains("not both 3-D of the same shape")),
        "{:?}",
        declined(&run, "fuse-skip-layer-norm")
    );
    let mut m = embeddings_model(1);
    let run = run_passes_for(&mut m, &["fuse-skip-layer-norm"], Target::Tensorrt);
    assert_eq!(ops_by_domain(&m).get("LayerNormalization"), Some(&1));
    assert!(
        run.notes
            .iter()
            .any(|n| n.contains("does nothing for target tensorrt"))
    );
}

// ----- fuse-embed-layer-norm -----

#[test]
fn bert_tiny_export_for_onnxruntime_with_embed_layer_norm() {
    let mut m = load("exported/bert_tiny.onnx");
    let run = default_pipeline(&mut m, Target::Onnxruntime);
    let got = ops_by_domain(&m);
    assert_eq!(got, histogram(BERT_TINY_ORT), "{got:#?} {:#?}", ours(&run));
    let (_, e) = m
        .graph
        .nodes()
        .find(|(_, n)| n.op_type == "EmbedLayerNormalization")
        .unwrap();
    let name = |i: usize| m.graph.value(e.inputs[i].unwrap()).name.clone();
    assert_eq!(name(2), "bert.embeddings.word_embeddings.weight");
    assert_eq!(name(3), "bert.embeddings.position_embeddings.weight");
    assert_eq!(name(4), "bert.embeddings.token_type_embeddings.weight");
    assert_eq!(
        e.outputs.len(),
        2,
        "ORT's inference wants mask_index declared"
    );
}

/// transformers 5's BertModel (2 layers): EmbedLayerNormalization (+ 3
/// Casts: ids, segment ids, and the mask's own), per layer Attention,
/// MatMul, SkipLayerNormalization, MatMul, Gelu (the zero biases were
/// folded away), MatMul, SkipLayerNormalization; the pooler (Gather, Gemm,
/// Tanh: fuse-conv-activation, which would make it a FusedGemm, fuses only
/// with `--ep cpu`); the rest is the mask transformers builds (Range, And, Where,
/// Expand, ...), which stays as computed.
const BERT_TINY_ORT: &[(&str, usize)] = &[
    ("Add", 1),
    ("And", 1),
    ("Cast", 3),
    ("Concat", 1),
    ("Equal", 1),
    ("Expand", 1),
    ("Flatten", 1),
    ("Gather", 6),
    ("Gemm", 1),
    ("GreaterOrEqual", 1),
    ("MatMul", 6),
    ("Mul", 1),
    ("Range", 3),
    ("Reshape", 1),
    ("Shape", 2),
    ("Tanh", 1),
    ("Unsqueeze", 6),
    ("Where", 2),
    ("com.microsoft:Attention", 2),
    ("com.microsoft:EmbedLayerNormalization", 1),
    ("com.microsoft:Gelu", 2),
    ("com.microsoft:SkipLayerNormalization", 4),
];

#[test]
fn embed_layer_norm_declines_positions_it_cannot_prove() {
    // The position table replaced by a reversed one: not 0..S-1.
    let mut m = load("exported/bert_tiny.onnx");
    run_passes(&mut m, &["constants-to-initializers"]);
    let g = &mut m.graph;
    let table = g
        .nodes()
        .find(|(_, n)| n.is("Slice") && n.inputs.len() >= 3)
        .and_then(|(_, n)| n.inputs[0])
        .unwrap();
    let t = g
        .constant(table)
        .cloned()
        .expect("the position table is a constant");
    let mut v = t.to_i64_vec().unwrap();
    v.reverse();
    let dims = t.dims().to_vec();
    g.value_mut(table).initializer = Some(infopt_ir::Tensor::from_i64(dims, &v));
    let run = default_pipeline(&mut m, Target::Onnxruntime);
    assert_eq!(
        ops_by_domain(&m).get("com.microsoft:EmbedLayerNormalization"),
        None
    );
    assert!(
        declined(&run, "fuse-embed-layer-norm")
            .iter()
            .any(|r| r.contains("0..S-1")),
        "{:?}",
        ours(&run)
    );
}

/// `convert-float16` after the contrib fusions: with `contrib_ops: true` the
/// fused com.microsoft ops compute in float16 (ONNX Runtime's CUDA provider
/// has float16 kernels for them); without it they stay float32 islands with a
/// Cast on each side.
#[test]
fn contrib_ops_convert_to_float16_on_request() {
    let convert = |contrib: bool| {
        let mut m = load("bert_attention.onnx");
        default_pipeline(&mut m, Target::Onnxruntime);
        let yaml = format!(
            "version: 1\ntarget: onnxruntime\npasses:\n  - convert-float16:\n      contrib_ops: {contrib}\nprecision: {{ default: fp16 }}\n"
        );
        let config = PipelineConfig::from_yaml(&yaml, "test.yaml").expect("pipeline");
        let options = DriverOptions {
            validate: true,
            ..Default::default()
        };
        let run = run_pipeline(&mut m, &config, &options, &mut |_, _| Ok(Flow::Continue))
            .expect("pipeline");
        (m, run)
    };
    let out_dtype = |m: &Model, op: &str| -> Vec<infopt_ir::DataType> {
        m.graph
            .nodes()
            .filter(|(_, n)| n.domain() == "com.microsoft" && n.op_type == op)
            .map(|(_, n)| m.graph.value_type(n.outputs[0].unwrap()).unwrap().dtype)
            .collect()
    };
    let casts = |m: &Model| ops_by_domain(m).get("Cast").copied().unwrap_or(0);
    let (on, _) = convert(true);
    for op in ["Attention", "BiasGelu", "SkipLayerNormalization"] {
        let d = out_dtype(&on, op);
        assert!(!d.is_empty(), "{op}");
        assert!(
            d.iter().all(|&t| t == infopt_ir::DataType::Float16),
            "{op}: {d:?}"
        );
    }
    // The attention mask stays an integer/float32 computation into input 5
    // of a float16 Attention only through a Cast; weights are float16.
    let att = first_attention(&on);
    let w = on.graph.constant(att.inputs[1].unwrap()).unwrap();
    assert_eq!(w.dtype(), infopt_ir::DataType::Float16);
    let (off, run) = convert(false);
    for op in ["Attention", "BiasGelu", "SkipLayerNormalization"] {
        assert!(
            out_dtype(&off, op)
                .iter()
                .all(|&t| t == infopt_ir::DataType::Float),
            "{op}"
        );
    }
    assert!(
        run.declined.iter().any(|d| d
            .reason
            .contains("Attention is not on the float16 allow-list")),
        "{:?}",
        run.declined
    );
    assert!(
        casts(&on) < casts(&off),
        "{} vs {}",
        casts(&on),
        casts(&off)
    );
}
