//! fold-constants, fix-shapes and infer-shapes: exact op histograms after
//! staticization, symbolic axes that stay symbolic, numerical equivalence in
//! tract, and the declines (budget, Q/DQ weights, non-determinism,
//! unsupported ops) with their reasons.

mod common;

use std::collections::BTreeMap;

use common::*;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType, Dim, Graph, GraphIo, Model, Node, Tensor, Value};
use infopt_passes::fix_shapes::{FixShapesOptions, parse_input_shape};
use infopt_passes::pipeline_edit::apply_pipeline_shapes;
use infopt_passes::{DriverOptions, Flow, PassError, PipelineConfig, PipelineRun, run_pipeline};
use infopt_runtime::{Backend, InputShapes, TractBackend};

const STATIC: &str = "
version: 1
passes:
  - constants-to-initializers
  - fix-shapes: FIX
  - fixed-point:
      passes: [fold-constants, eliminate-identity, eliminate-duplicates, eliminate-dead]
";

fn pipeline(fix: &str) -> PipelineConfig {
    PipelineConfig::from_yaml(&STATIC.replace("FIX", fix), "test.yaml").expect("pipeline parses")
}

fn run_config(model: &mut Model, config: &PipelineConfig) -> Result<PipelineRun, PassError> {
    let options = DriverOptions {
        validate: true,
        ..Default::default()
    };
    run_pipeline(model, config, &options, &mut |_, _| Ok(Flow::Continue))
}

fn run_static(model: &mut Model, fix: &str) -> PipelineRun {
    run_config(model, &pipeline(fix)).unwrap_or_else(|e| panic!("pipeline: {e}"))
}

fn output_shape(m: &Model, k: usize) -> Vec<Dim> {
    let io = &m.graph.outputs[k];
    m.graph
        .value_type(io.value)
        .and_then(|t| t.shape)
        .expect("output shape")
}

fn input_shape(m: &Model, k: usize) -> Vec<Dim> {
    let io = &m.graph.inputs[k];
    m.graph
        .value_type(io.value)
        .and_then(|t| t.shape)
        .expect("input shape")
}

fn reasons(run: &PipelineRun) -> Vec<String> {
    run.declined
        .iter()
        .map(|d| format!("{}: {}", d.at, d.reason))
        .collect()
}

/// Ops that only compute shapes: none may be left once every dim is fixed.
fn no_shape_scaffolding(m: &Model) {
    let h = ops(m);
    for op in ["Shape", "Size", "ConstantOfShape", "Range", "Concat"] {
        assert!(!h.contains_key(op), "{op} left after folding: {h:?}");
    }
}

fn saved_ok(m: &Model) -> Model {
    // A saved model must load back (names unique, graph valid).
    let mut m = m.clone();
    m.graph.assign_unique_names();
    m.graph.validate().expect("valid graph");
    m
}

// ----- fixtures: all inputs fixed -----

#[test]
fn dynamic_reshape_all_fixed_is_the_static_model() {
    let original = load("dynamic_reshape.onnx");
    let mut m = original.clone();
    let run = run_static(&mut m, "{inputs: {x: [1, 4, 8, 8]}}");
    assert_eq!(
        ops(&m),
        histogram(&[("Reshape", 1), ("MatMul", 1), ("Add", 1)]),
        "{:?}",
        reasons(&run)
    );
    assert_eq!(input_shape(&m, 0), dims(&["1", "4", "8", "8"]));
    assert_eq!(output_shape(&m, 0), dims(&["1", "16"]));
    // The Reshape target is now a constant [1, -1] that kept its name.
    let g = &m.graph;
    let (rid, _) = g.nodes().find(|(_, n)| n.is("Reshape")).unwrap();
    let target = g.node(rid).inputs[1].unwrap();
    assert_eq!(g.value(target).name, "new_shape");
    assert_eq!(
        g.constant(target).unwrap().to_i64_vec().unwrap(),
        vec![1, -1]
    );
    assert!(
        run.notes
            .iter()
            .any(|n| n.contains("input 'x' dim 0 (batch) is now 1")),
        "{:?}",
        run.notes
    );
    let m = saved_ok(&m);
    assert_equivalent(
        &original,
        &m,
        &InputShapes::new().with_symbol("batch", 1),
        1e-5,
        1e-5,
    );
}

#[test]
fn transformer_block_all_fixed_is_the_static_model() {
    let original = load("transformer_block.onnx");
    let mut m = original.clone();
    let run = run_static(&mut m, "{symbols: {batch: 1, seq: 8}}");
    // What a hand-written static block has: the mask arithmetic on the
    // attention_mask input stays, every Shape/Gather/Concat is gone.
    let expected = histogram(&[
        ("Unsqueeze", 1),
        ("Cast", 1),
        ("Sub", 1),
        ("Mul", 3),
        ("MatMul", 8),
        ("Add", 10),
        ("Reshape", 4),
        ("Transpose", 4),
        ("Div", 2),
        ("Softmax", 1),
        ("LayerNormalization", 2),
        ("Erf", 1),
    ]);
    assert_eq!(ops(&m), expected, "{:?}", reasons(&run));
    no_shape_scaffolding(&m);
    assert_eq!(output_shape(&m, 0), dims(&["1", "8", "32"]));
    assert_eq!(input_shape(&m, 1), dims(&["1", "8"]));
    let m = saved_ok(&m);
    let shapes = InputShapes::new()
        .with_symbol("batch", 1)
        .with_symbol("seq", 8);
    assert_equivalent(&original, &m, &shapes, 1e-5, 1e-4);
}

#[test]
fn transformer_block_batch_fixed_keeps_seq_symbolic() {
    let original = load("transformer_block.onnx");
    let mut m = original.clone();
    let run = run_static(&mut m, "{symbols: {batch: 1}}");
    assert_eq!(input_shape(&m, 0), dims(&["1", "seq", "32"]));
    assert_eq!(input_shape(&m, 1), dims(&["1", "seq"]));
    assert_eq!(output_shape(&m, 0), dims(&["1", "seq", "32"]));
    // Nobody asked to fix seq: a fact for the JSON report, not a printed note.
    assert!(
        run.details
            .iter()
            .any(|n| n.contains("input 'hidden' dim 1 (seq) stays dynamic")),
        "{:?}",
        run.details
    );
    assert!(
        !run.notes.iter().any(|n| n.contains("stays dynamic")),
        "{:?}",
        run.notes
    );
    assert!(
        run.notes
            .iter()
            .any(|n| n.contains("input 'hidden' dim 0 (batch) is now 1")),
        "{:?}",
        run.notes
    );
    // The batch Gather folded; the seq dim still reads Shape(hidden), its
    // Gather + Unsqueeze now one Slice.
    let h = ops(&m);
    assert_eq!(h.get("Shape"), Some(&1), "{h:?}");
    assert_eq!(h.get("Gather"), None, "{h:?}");
    assert_eq!(h.get("Slice"), Some(&1), "{h:?}");
    let m = saved_ok(&m);
    // It still runs at two different sequence lengths, with the original's outputs.
    for seq in [5, 11] {
        let shapes = InputShapes::new()
            .with_symbol("batch", 1)
            .with_symbol("seq", seq);
        assert_equivalent(&original, &m, &shapes, 1e-5, 1e-4);
    }
}

#[test]
fn bert_tiny_all_fixed() {
    let original = load("exported/bert_tiny.onnx");
    let mut m = original.clone();
    let run = run_static(&mut m, "{symbols: {batch: 2, seq: 16}}");
    no_shape_scaffolding(&m);
    let h = ops(&m);
    // The attention-mask Where stays (it reads the attention_mask input); the
    // Where/Equal of the shape arithmetic and the position-ids Slice fold away.
    assert_eq!(h.get("Where"), Some(&1), "{h:?}");
    for op in [
        "Identity",
        "Expand",
        "Equal",
        "GreaterOrEqual",
        "Slice",
        "Unsqueeze",
    ] {
        assert!(!h.contains_key(op), "{op} left: {h:?}\n{:?}", reasons(&run));
    }
    assert_eq!(output_shape(&m, 0), dims(&["2", "16", "32"]));
    assert_eq!(output_shape(&m, 1), dims(&["2", "32"]));
    let m = saved_ok(&m);
    let shapes = InputShapes::new()
        .with_symbol("batch", 2)
        .with_symbol("seq", 16);
    assert_equivalent(&original, &m, &shapes, 1e-5, 1e-4);
}

#[test]
fn transformer_encoder_all_fixed() {
    let original = load("exported/transformer_encoder.onnx");
    let mut m = original.clone();
    let run = run_static(&mut m, "{inputs: {src: [2, 7, 32]}}");
    no_shape_scaffolding(&m);
    // Squeeze/Gather here move the packed q/k/v data: they stay (an Unsqueeze
    // feeding a Reshape collapses into the Reshape).
    // One Add adds an all-zero bias (torch initializes it so) and goes.
    let expected = histogram(&[
        ("Add", 4),
        ("Gather", 3),
        ("Gelu", 1),
        ("Gemm", 1),
        ("LayerNormalization", 2),
        ("MatMul", 5),
        ("Mul", 2),
        ("Reshape", 9),
        ("Softmax", 1),
        ("Squeeze", 1),
        ("Transpose", 7),
    ]);
    assert_eq!(ops(&m), expected, "{:?}", reasons(&run));
    assert_eq!(output_shape(&m, 0), dims(&["2", "7", "32"]));
    let m = saved_ok(&m);
    let shapes = InputShapes::new().with_shape("src", vec![2, 7, 32]);
    assert_equivalent(&original, &m, &shapes, 1e-5, 1e-4);
}

#[test]
fn transformer_encoder_batch_fixed_keeps_seq() {
    let original = load("exported/transformer_encoder.onnx");
    let mut m = original.clone();
    run_static(&mut m, "{symbols: {batch: 1}}");
    assert_eq!(output_shape(&m, 0), dims(&["1", "seq", "32"]));
    let m = saved_ok(&m);
    for seq in [3, 9] {
        let shapes = InputShapes::new()
            .with_symbol("batch", 1)
            .with_symbol("seq", seq);
        assert_equivalent(&original, &m, &shapes, 1e-5, 1e-4);
    }
}

#[test]
fn resnet_blocks_fixed_batch() {
    for rel in [
        "exported/resnet_block.onnx",
        "exported/resnet_block_dynamo.onnx",
        "cnn_bn_relu.onnx",
    ] {
        let original = load(rel);
        let mut m = original.clone();
        let before = ops(&m);
        run_static(&mut m, "{symbols: {batch: 3}}");
        // Nothing to fold in a CNN: the ops stay, the shapes become static.
        assert_eq!(ops(&m), before, "{rel}");
        assert_eq!(output_shape(&m, 0)[0], Dim::Known(3), "{rel}");
        let m = saved_ok(&m);
        assert_equivalent(
            &original,
            &m,
            &InputShapes::new().with_symbol("batch", 3),
            1e-5,
            1e-4,
        );
    }
}

#[test]
fn subgraph_fixtures_fold_and_still_agree() {
    for (rel, shapes) in [
        ("if_subgraph.onnx", InputShapes::new().with_symbol("n", 3)),
        ("opset11.onnx", InputShapes::new().with_symbol("N", 2)),
    ] {
        let original = load(rel);
        let mut m = original.clone();
        run_passes(
            &mut m,
            &[
                "constants-to-initializers",
                "fold-constants",
                "eliminate-dead",
            ],
        );
        let m = saved_ok(&m);
        assert_equivalent(&original, &m, &shapes, 1e-6, 1e-6);
    }
    // tract cannot run Loop: structure only. The trip count and condition were
    // Constant nodes: they become initializers; the Loop and its body stay.
    let mut m = load("loop_subgraph.onnx");
    run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Sigmoid", 1), ("Loop", 1)]));
    let m = saved_ok(&m);
    assert_eq!(output_shape(&m, 1), dims(&["5", "3", "4"]));
}

// ----- declines -----

#[test]
fn bloater_is_not_folded_and_says_why() {
    // ConstantOfShape to 1 GiB of float32, added to an input.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1"]));
    let shape = b.i64("big_shape", &[3], &[1024, 1024, 256]);
    let big = b.op(
        "ConstantOfShape",
        &[shape],
        vec![Attribute::tensor(
            "value",
            &Tensor::from_f32(vec![1], &[1.0]),
        )],
    );
    let y = b.op("Add", &[big, x], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    let run = run_passes(&mut m, &["fold-constants"]);
    assert_eq!(ops(&m).get("ConstantOfShape"), Some(&1));
    let r = reasons(&run);
    assert!(
        r.iter()
            .any(|s| s.contains("1073741824 bytes") && s.contains("max_tensor_bytes 1048576")),
        "{r:?}"
    );
    // A raised budget is honoured (and still refuses 1 GiB at 512 MiB).
    let cfg = PipelineConfig::from_yaml(
        "version: 1\npasses:\n  - fold-constants: {max_tensor_bytes: 536870912}\n",
        "t.yaml",
    )
    .unwrap();
    let run = run_config(&mut m, &cfg).unwrap();
    assert_eq!(ops(&m).get("ConstantOfShape"), Some(&1));
    assert!(
        reasons(&run)
            .iter()
            .any(|s| s.contains("over max_tensor_bytes 536870912"))
    );
}

/// ONNX's `light` inception_v1: `Reshape(ConstantOfShape([1000, 1024]),
/// [1000, 1024])` before its Gemm. The 4 MB fill is over the budget; the
/// Reshape of it becomes a fill of the new shape, a few bytes.
#[test]
fn a_reshape_of_a_fill_over_the_budget_becomes_a_fill() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "1024"]));
    let shape = b.i64("w_shape", &[2], &[1024, 1000]);
    let fill = b.op(
        "ConstantOfShape",
        &[shape],
        vec![Attribute::tensor(
            "value",
            &Tensor::from_f32(vec![1], &[0.02]),
        )],
    );
    let perm = vec![Attribute::ints("perm", vec![1, 0])];
    let t = b.op("Transpose", &[fill], perm);
    let to = b.i64("to", &[2], &[1000, 1024]);
    let w = b.op("Reshape", &[t, to], vec![]);
    let y = b.op("Gemm", &[x, w], vec![Attribute::int("transB", 1)]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    let run = run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
    assert_eq!(
        ops(&m),
        histogram(&[("ConstantOfShape", 1), ("Gemm", 1)]),
        "{:?}",
        reasons(&run)
    );
    let (_, fill) = m
        .graph
        .nodes()
        .find(|(_, n)| n.op_type == "ConstantOfShape")
        .unwrap();
    let shape = m.graph.constant(fill.inputs[0].unwrap()).unwrap();
    assert_eq!(shape.to_i64_vec().unwrap(), vec![1000, 1024]);
    assert_eq!(
        fill.attr_tensor("value")
            .unwrap()
            .unwrap()
            .to_f64_vec()
            .unwrap(),
        vec![0.02f32 as f64]
    );
    assert!(infopt_ir::stats::GraphStats::of_model(&m).parameter_bytes < 100);
    assert_equivalent(&original, &m, &InputShapes::new(), 0.0, 0.0);
}

/// A fill over 64 KiB stays a ConstantOfShape (written out it would only
/// grow the file); one within folds.
#[test]
fn a_large_fill_is_kept_and_a_small_one_folds() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["128", "256"]));
    let big_shape = b.i64("big_shape", &[2], &[128, 256]);
    let big = b.op("ConstantOfShape", &[big_shape], vec![]);
    let small_shape = b.i64("small_shape", &[1], &[256]);
    let small = b.op("ConstantOfShape", &[small_shape], vec![]);
    let y = b.op("Add", &[x, big], vec![]);
    let y = b.op("Add", &[y, small], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    let run = run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
    assert_eq!(
        ops(&m),
        histogram(&[("ConstantOfShape", 1), ("Add", 2)]),
        "{:?}",
        reasons(&run)
    );
    assert!(
        reasons(&run).contains(
            &"constantofshape_1: ConstantOfShape 'constantofshape_1_out' (128.0 KiB) is kept: a fill a runtime makes at load, which written out would only grow the model".to_string()
        ),
        "{:?}",
        reasons(&run)
    );
}

/// The folding budget bounds what folds add over the whole pipeline.
#[test]
fn folds_stop_at_the_growth_budget() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["32"]));
    let c = b.f32("c", &[1], &[1.0]);
    let reps = b.i64("reps", &[1], &[32]);
    let mut y = x;
    for _ in 0..3 {
        // 128 bytes each (the last frees `c` and `reps`: 116 more).
        let t = b.op("Tile", &[c, reps], vec![]);
        y = b.op("Add", &[y, t], vec![]);
    }
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    let cfg = PipelineConfig::from_yaml(
        "version: 1\npasses:\n  - fold-constants: {max_growth_bytes: 300}\n",
        "t.yaml",
    )
    .unwrap();
    let run = run_config(&mut m, &cfg).unwrap();
    assert_eq!(ops(&m).get("Tile"), Some(&1), "{:?}", reasons(&run));
    assert!(
        reasons(&run).contains(
            &"tile_5: folding has grown the model by 256 B so far; this fold would add 116 B, past max_growth_bytes 300 (300 B)".to_string()
        ),
        "{:?}",
        reasons(&run)
    );
}

#[test]
fn budget_applies_to_small_limits_too() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["4"]));
    let c = b.f32("c", &[4], &[1.0, 2.0, 3.0, 4.0]);
    let t = b.i64("reps", &[1], &[8]);
    let tiled = b.op("Tile", &[c, t], vec![]);
    let s = b.i64("s", &[2], &[8, 4]);
    let r = b.op("Reshape", &[tiled, s], vec![]);
    let y = b.op("Add", &[r, x], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    let cfg = PipelineConfig::from_yaml(
        "version: 1\npasses:\n  - fold-constants: {max_tensor_bytes: 64}\n",
        "t.yaml",
    )
    .unwrap();
    let run = run_config(&mut m, &cfg).unwrap();
    assert_eq!(
        ops(&m),
        histogram(&[("Tile", 1), ("Reshape", 1), ("Add", 1)]),
        "{:?}",
        reasons(&run)
    );
    assert!(
        reasons(&run).iter().any(|s| s.contains("128 bytes")),
        "{:?}",
        reasons(&run)
    );
    let mut m = original.clone();
    run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Add", 1)]));
    assert_equivalent(&original, &m, &InputShapes::new(), 0.0, 0.0);
    let e = PipelineConfig::from_yaml(
        "version: 1\npasses:\n  - fold-constants: {max_bytes: 1}\n",
        "t.yaml",
    )
    .unwrap_err();
    assert!(e.to_string().contains("max_bytes"), "{e}");
}

#[test]
fn qdq_weights_random_and_unsupported_ops_are_declined() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "4"]));
    let w = b.initializer(
        "w_q",
        Tensor::from_raw(DataType::Int8, vec![4, 4], vec![1u8; 16].into()),
    );
    let scale = b.f32("w_scale", &[], &[0.1]);
    let zp = b.initializer(
        "w_zp",
        Tensor::from_raw(DataType::Int8, vec![], vec![0u8].into()),
    );
    let wd = b.op("DequantizeLinear", &[w, scale, zp], vec![]);
    let mm = b.op("MatMul", &[x, wd], vec![]);
    let half = b.f32("half", &[4], &[0.5, -0.5, 1.0, 0.0]);
    let e = b.op("Erf", &[half], vec![]);
    let y = b.op("Add", &[mm, e], vec![]);
    let shape = b.i64("rshape", &[2], &[2, 4]);
    let rnd = b.op("RandomNormalLike", &[shape], vec![]);
    let z = b.op("Add", &[y, rnd], vec![]);
    b.output(z, "z", DataType::Float, None);
    let mut m = b.build(17);
    let run = run_passes(&mut m, &["fold-constants"]);
    let h = ops(&m);
    assert_eq!(h.get("DequantizeLinear"), Some(&1));
    assert_eq!(h.get("Erf"), Some(&1));
    assert_eq!(h.get("RandomNormalLike"), Some(&1));
    let r = reasons(&run);
    assert!(
        r.iter()
            .any(|s| s.contains("DequantizeLinear of constant weight 'w_q' is kept")),
        "{r:?}"
    );
    assert!(
        r.iter().any(|s| s.contains("unsupported op \"Erf\"")),
        "{r:?}"
    );
    assert!(
        r.iter()
            .any(|s| s.contains("non-deterministic op \"RandomNormalLike\"")),
        "{r:?}"
    );
}

#[test]
fn kernel_errors_are_declines_not_wrong_values() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Int64, dims(&["2"]));
    let a = b.i64("a", &[2], &[7, 8]);
    let zero = b.i64("zero", &[2], &[1, 0]);
    let d = b.op("Div", &[a, zero], vec![]);
    let y = b.op("Add", &[d, x], vec![]);
    b.output(y, "y", DataType::Int64, None);
    let mut m = b.build(17);
    let run = run_passes(&mut m, &["fold-constants"]);
    assert_eq!(ops(&m).get("Div"), Some(&1));
    assert!(
        reasons(&run)
            .iter()
            .any(|s| s.contains("cannot evaluate Div") && s.contains("by zero")),
        "{:?}",
        reasons(&run)
    );
}

// ----- If with a constant condition, folding inside subgraphs -----

fn branch(name: &str, op: &str, outer_x: &str, outer_c: &str) -> Graph {
    let mut g = Graph::new(name);
    let x = g.add_value(Value {
        outer: true,
        ..Value::named(outer_x)
    });
    let c = g.add_value(Value {
        outer: true,
        ..Value::named(outer_c)
    });
    // A constant computation inside the branch, on an outer constant: folds.
    let two = g.add_initializer(&format!("{name}_two"), Tensor::from_f32(vec![], &[2.0]));
    let k = g.add_node(
        Node {
            op_type: "Mul".into(),
            inputs: vec![Some(c), Some(two)],
            ..Default::default()
        },
        &[&format!("{name}_k")],
    );
    let k = g.node(k).outputs[0].unwrap();
    let n = g.add_node(
        Node {
            op_type: op.into(),
            inputs: vec![Some(x), Some(k)],
            ..Default::default()
        },
        &[&format!("{name}_out")],
    );
    let out = g.node(n).outputs[0].unwrap();
    g.outputs.push(GraphIo {
        value: out,
        info: Default::default(),
    });
    g
}

fn if_model(cond: Option<bool>) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["3"]));
    let _c = b.f32("c", &[3], &[1.0, 2.0, 3.0]);
    let cond_v = match cond {
        Some(v) => b.initializer(
            "cond",
            Tensor::from_raw(DataType::Bool, vec![], vec![v as u8].into()),
        ),
        None => b.input("cond", DataType::Bool, vec![]),
    };
    let y = b.op(
        "If",
        &[cond_v],
        vec![
            Attribute::graph("then_branch", branch("then", "Add", "x", "c")),
            Attribute::graph("else_branch", branch("else", "Sub", "x", "c")),
        ],
    );
    let z = b.op("Relu", &[y], vec![]);
    b.output(z, "z", DataType::Float, Some(dims(&["3"])));
    let _ = x;
    b.build(13)
}

#[test]
fn if_with_constant_condition_is_inlined() {
    for (cond, op) in [(true, "Add"), (false, "Sub")] {
        let original = if_model(Some(cond));
        let mut m = original.clone();
        run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
        // The taken branch's constant Mul folded too; its op remains.
        assert_eq!(ops(&m), histogram(&[(op, 1), ("Relu", 1)]), "cond {cond}");
        let m = saved_ok(&m);
        assert_equivalent(&original, &m, &InputShapes::new(), 0.0, 0.0);
    }
}

#[test]
fn folding_inside_subgraphs_uses_outer_constants() {
    let original = if_model(None);
    let mut m = original.clone();
    let run = run_passes(&mut m, &["fold-constants"]);
    assert_eq!(ops(&m), histogram(&[("If", 1), ("Relu", 1)]));
    let stats = infopt_ir::stats::GraphStats::of_model(&m);
    let expected: BTreeMap<String, usize> = histogram(&[("Add", 1), ("Sub", 1)]);
    assert_eq!(stats.subgraph_ops, expected, "{:?}", reasons(&run));
    let m = saved_ok(&m);
    let bytes = m.to_bytes().unwrap();
    let loaded = TractBackend
        .load(&bytes, None, &InputShapes::new())
        .expect("loads in tract");
    assert_eq!(loaded.inputs().len(), 2);
}

// ----- fix-shapes: validation and notes -----

fn fix_error(model: &Model, fix: &str) -> String {
    let mut m = model.clone();
    let e = run_config(&mut m, &pipeline(fix)).unwrap_err().to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    e
}

#[test]
fn fix_shapes_rejects_what_does_not_fit_the_model() {
    let m = load("transformer_block.onnx");
    let e = fix_error(&m, "{inputs: {hiden: [1, 8, 32]}}");
    assert!(
        e.contains("'hiden' is not an input") && e.contains("hidden, attention_mask"),
        "{e}"
    );
    let e = fix_error(&m, "{inputs: {hidden: [1, 8]}}");
    assert!(
        e.contains("input 'hidden' has rank 3") && e.contains("rank 2"),
        "{e}"
    );
    let e = fix_error(&m, "{inputs: {hidden: [1, 8, 64]}}");
    assert!(e.contains("input 'hidden' dim 2 is fixed at 32"), "{e}");
    let e = fix_error(&m, "{inputs: {hidden: [1, 0, 32]}}");
    assert!(
        e.contains("input 'hidden': dim 1 is 0") && e.contains("positive"),
        "{e}"
    );
    let e = fix_error(&m, "{symbols: {sequence: 8}}");
    assert!(
        e.contains("symbol 'sequence' is not used by any input") && e.contains("batch, seq"),
        "{e}"
    );
    let e = fix_error(&m, "{symbols: {batch: -1}}");
    assert!(e.contains("symbol 'batch' is -1"), "{e}");
    let e = fix_error(&m, "{inputs: {hidden: [1, 8, 32], attention_mask: [1, 9]}}");
    assert!(
        e.contains("is symbol 'seq', given as")
            && e.contains("'seq' = ")
            && e.contains('8')
            && e.contains('9'),
        "{e}"
    );
    let e = fix_error(&m, "{inputs: {hidden: [2, 8, 32]}, symbols: {batch: 1}}");
    assert!(
        e.contains("symbol 'batch'") && e.contains("given as 2"),
        "{e}"
    );
    let e = PipelineConfig::from_yaml(&STATIC.replace("FIX", "{input: {x: [1]}}"), "t.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("input"), "{e}");
}

#[test]
fn cli_specs_bind_symbols_of_the_named_input() {
    let m = load("transformer_block.onnx");
    // --input-shape attention_mask:seq=4 binds seq everywhere.
    let extra = FixShapesOptions::from_specs(&[parse_input_shape("attention_mask:seq=4").unwrap()])
        .unwrap();
    let mut cfg = pipeline("{}");
    assert!(apply_pipeline_shapes(&mut cfg, &extra).unwrap());
    let mut fixed = m.clone();
    run_config(&mut fixed, &cfg).unwrap();
    assert_eq!(input_shape(&fixed, 0), dims(&["batch", "4", "32"]));
    // A symbol the named input does not have is an error naming the input.
    let extra =
        FixShapesOptions::from_specs(&[parse_input_shape("attention_mask:heads=2").unwrap()])
            .unwrap();
    let mut cfg = pipeline("{}");
    apply_pipeline_shapes(&mut cfg, &extra).unwrap();
    let e = run_config(&mut m.clone(), &cfg).unwrap_err().to_string();
    assert!(
        e.contains("input 'attention_mask' has no dim named 'heads'") && e.contains("[batch,seq]"),
        "{e}"
    );
    // Pipeline-level `symbols:` reach the fix-shapes step.
    let mut cfg = PipelineConfig::from_yaml(
        &format!(
            "{}symbols: {{batch: 1, seq: 3}}\n",
            STATIC.replace("FIX", "{}")
        ),
        "t.yaml",
    )
    .unwrap();
    apply_pipeline_shapes(&mut cfg, &FixShapesOptions::default()).unwrap();
    let mut fixed = m.clone();
    run_config(&mut fixed, &cfg).unwrap();
    assert_eq!(input_shape(&fixed, 1), dims(&["1", "3"]));
    no_shape_scaffolding(&fixed);
}

#[test]
fn fix_shapes_updates_value_info_and_outputs() {
    // The dynamo export carries value_info with `2*batch`, `batch*seq`, ...
    let mut m = load("exported/transformer_encoder.onnx");
    run_passes(&mut m, &["constants-to-initializers"]);
    let cfg = PipelineConfig::from_yaml(
        "version: 1\npasses:\n  - fix-shapes: {symbols: {batch: 3, seq: 5}}\n",
        "t.yaml",
    )
    .unwrap();
    let run = run_config(&mut m, &cfg).unwrap();
    let g = &m.graph;
    for &v in g.value_info_ids() {
        if let Some(s) = g.value(v).tensor_type().and_then(|t| t.shape) {
            assert!(
                s.iter().all(|d| !matches!(d, Dim::Sym(_))),
                "{}: {s:?}",
                g.value(v).name
            );
        }
    }
    let view1 = g.find_value("view_1").unwrap();
    assert_eq!(
        g.value_type(view1).unwrap().shape,
        Some(dims(&["5", "6", "16"]))
    );
    // A consequence of what was asked: recorded, not printed.
    assert!(
        run.details
            .iter()
            .any(|n| n == "fix-shapes: output 'out' dim 0 (batch) is now 3"),
        "{:?}",
        run.details
    );
    assert!(
        run.notes
            .iter()
            .any(|n| n == "fix-shapes: input 'src' dim 0 (batch) is now 3"),
        "{:?}",
        run.notes
    );
}

#[test]
fn infer_shapes_pass_reports_blocked_ops() {
    let mut m = load("custom_domain.onnx");
    let run = run_passes(&mut m, &["infer-shapes"]);
    assert!(
        reasons(&run)
            .iter()
            .any(|s| s.contains("no shape inference rule for \"com.example::FancyActivation\"")),
        "{:?}",
        reasons(&run)
    );
}

// ----- If branches that cannot run with the fixed shapes (issue 9) -----

/// `if_lstm.onnx` with `t` fixed to 3: the else branch feeds its LSTM a rank-4
/// tensor, so it is dropped and the then branch inlined, with a note. Neither
/// ORT nor tract loads the original with `t` fixed (both infer through the
/// else branch), so the numbers are checked in ORT by
/// tests/interop/test_if_branches.py against the original with `t` dynamic.
#[test]
fn if_branch_that_cannot_run_with_fixed_shapes_is_dropped() {
    let mut m = load("if_lstm.onnx");
    let run = run_static(&mut m, "{inputs: {x: [1, 4, 3]}}");
    assert_eq!(
        ops(&m),
        histogram(&[
            ("LSTM", 1),
            ("ReduceMean", 1),
            ("Squeeze", 2),
            ("Tanh", 1),
            ("Unsqueeze", 1),
        ]),
        "{:?}",
        run.notes
    );
    let note = run
        .notes
        .iter()
        .find(|n| n.contains("If 'If'"))
        .expect("a note on the dropped branch");
    assert!(
        note.contains("else branch") && note.contains("'raw/LSTM'") && note.contains("rank 4"),
        "{note}"
    );
    saved_ok(&m);
}

/// With `t` dynamic the else branch runs (t = 1): both branches stay. (tract
/// cannot load this model: its nested Ifs return different ranks; ORT runs
/// it in tests/interop/test_if_branches.py.)
#[test]
fn if_branches_that_can_run_are_kept() {
    let mut m = load("if_lstm.onnx");
    let run = run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("If", 1), ("Less", 1), ("Tanh", 1)]));
    assert!(
        !run.notes.iter().any(|n| n.contains("cannot run")),
        "{:?}",
        run.notes
    );
    saved_ok(&m);
}

// ----- Loop that runs once -----

/// `Loop(M=trips, cond=true, v0=x)` whose body computes `v' = v*w + i`
/// (w an outer initializer) and scans out `Relu(v')`.
fn loop_model(trips: i64) -> Model {
    let mut body = GraphBuilder::new();
    let i = body.input("i", DataType::Int64, vec![]);
    let c = body.input("c", DataType::Bool, vec![]);
    let v = body.input("v", DataType::Float, dims(&["2", "3"]));
    let w = body.graph_mut().add_value(Value {
        outer: true,
        ..Value::named("w")
    });
    let scaled = body.op("Mul", &[v, w], vec![]);
    let i_f = body.op("Cast", &[i], vec![Attribute::int("to", 1)]);
    let next = body.op("Add", &[scaled, i_f], vec![]);
    let scan = body.op("Relu", &[next], vec![]);
    body.output(c, "c_out", DataType::Bool, Some(vec![]));
    body.output(next, "v_out", DataType::Float, None);
    body.output(scan, "scan_out", DataType::Float, None);
    let body = body.into_graph();

    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3"]));
    b.f32("w", &[3], &[0.5, -1.0, 2.0]);
    let m = b.i64("trips", &[], &[trips]);
    let cond = b.initializer(
        "keep_going",
        Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
    );
    let outs = b.op_n(
        "Loop",
        &[m, cond, x],
        vec![Attribute::graph("body", body)],
        2,
    );
    b.output(outs[0], "v_final", DataType::Float, None);
    b.output(outs[1], "scanned", DataType::Float, None);
    b.build(13)
}

#[test]
fn loop_that_runs_once_is_its_body() {
    let original = loop_model(1);
    let mut m = original.clone();
    run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
    assert_eq!(
        ops(&m),
        histogram(&[("Mul", 1), ("Add", 1), ("Relu", 1), ("Unsqueeze", 1)])
    );
    // tract has no Loop: check the result against the body computed by hand
    // (v_final = x*w + 0, scanned = [relu(x*w)]).
    let m = saved_ok(&m);
    let loaded = TractBackend
        .load(&m.to_bytes().unwrap(), None, &InputShapes::new())
        .expect("result loads in tract");
    let x: Vec<f32> = vec![1.0, 2.0, -3.0, -0.5, 0.25, 4.0];
    let input = infopt_runtime::HostTensor::from_vec(vec![2, 3], x.clone()).unwrap();
    let outs = loaded.run(&[input]).unwrap();
    let w = [0.5f32, -1.0, 2.0];
    let v: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &a)| (a * w[i % 3]) as f64)
        .collect();
    assert_eq!(outs[0].to_f64_vec(), v);
    assert_eq!(outs[1].shape(), &[1, 2, 3]);
    let relu: Vec<f64> = v.iter().map(|&a| a.max(0.0)).collect();
    assert_eq!(outs[1].to_f64_vec(), relu);
    // Two trips: the Loop stays.
    let mut m = loop_model(2);
    run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Loop", 1)]));
}

// ----- shape arithmetic with one symbolic dim -----

const DEFAULT_FOLDS: &str = "
version: 1
passes:
  - constants-to-initializers
  - fixed-point:
      passes: [fold-constants, simplify-reshape, eliminate-identity, eliminate-duplicates, eliminate-dead]
";

#[test]
fn window_partition_and_reverse_fold_with_a_dynamic_batch() {
    // Pad for window alignment, Roll as Slice+Concat, Reshape targets
    // computed from other tensors' shapes (4·batch windows, batch back).
    let original = load("window_attention.onnx");
    let mut m = original.clone();
    let config = PipelineConfig::from_yaml(DEFAULT_FOLDS, "test.yaml").unwrap();
    run_config(&mut m, &config).unwrap();
    assert_eq!(
        ops(&m),
        histogram(&[
            ("Add", 4),
            ("Concat", 4),
            ("Gather", 3),
            ("MatMul", 4),
            ("Mul", 1),
            ("Reshape", 8),
            ("Slice", 8),
            ("Softmax", 1),
            ("Transpose", 5),
        ])
    );
    let m = saved_ok(&m);
    for batch in [1, 3] {
        let shapes = InputShapes::new().with_symbol("batch", batch);
        assert_equivalent(&original, &m, &shapes, 1e-5, 1e-4);
    }
}

/// `Reshape(x, Concat(k·batch, rest))` where x is `[batch, n, c]`.
fn reshape_by_product(k: i64, rest: &[i64]) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "8", "6"]));
    let s = b.op("Shape", &[x], vec![]);
    let i0 = b.i64("i0", &[], &[0]);
    let n = b.op("Gather", &[s, i0], vec![Attribute::int("axis", 0)]);
    let kc = b.i64("k", &[], &[k]);
    let rows = b.op("Mul", &[n, kc], vec![]);
    let ax = b.i64("ax", &[1], &[0]);
    let rows = b.op("Unsqueeze", &[rows, ax], vec![]);
    let rest = b.i64("rest", &[rest.len() as i64], rest);
    let target = b.op("Concat", &[rows, rest], vec![Attribute::int("axis", 0)]);
    let y = b.op("Reshape", &[x, target], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(13)
}

#[test]
fn a_target_with_one_symbolic_element_the_volume_leaves_becomes_minus_one() {
    let original = reshape_by_product(4, &[2, 6]);
    let mut m = original.clone();
    let config = PipelineConfig::from_yaml(DEFAULT_FOLDS, "test.yaml").unwrap();
    run_config(&mut m, &config).unwrap();
    assert_eq!(ops(&m), histogram(&[("Reshape", 1)]));
    let (_, node) = m.graph.nodes().next().unwrap();
    let target = m.graph.constant(node.inputs[1].unwrap()).unwrap();
    assert_eq!(target.to_i64_vec().unwrap(), vec![-1, 2, 6]);
    let m = saved_ok(&m);
    assert_equivalent(
        &original,
        &m,
        &InputShapes::new().with_symbol("batch", 3),
        0.0,
        0.0,
    );
    // 3·batch rows of 2·6 is not the volume (8·6·batch): the element stays.
    let mut m = reshape_by_product(3, &[2, 6]);
    let run = run_config(&mut m, &config).unwrap();
    assert_eq!(ops(&m).get("Shape"), Some(&1), "{:?}", ops(&m));
    assert!(
        reasons(&run)
            .iter()
            .any(|r| r.contains("target shape depends on dims")),
        "{:?}",
        reasons(&run)
    );
}

/// YOLOv8's DFL head: `Reshape(x, [dim0(x), 4, 16, dim2(x)])` where `x`'s
/// last dim is stated as text infopt does not parse (another tool's sympy
/// shape inference left `floor(h/2 - 1/2) + 1`-style dims in the model).
fn dfl_reshape_with_opaque_dim() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input(
        "x",
        DataType::Float,
        dims(&["batch", "64", "floor(n/2 - 1/2) + 1"]),
    );
    let shape = b.op("Shape", &[x], vec![]);
    let (s0, e0) = (b.i64("s0", &[1], &[0]), b.i64("e0", &[1], &[1]));
    let (s2, e2) = (b.i64("s2", &[1], &[2]), b.i64("e2", &[1], &[3]));
    let lead = b.op("Slice", &[shape, s0, e0], vec![]);
    let last = b.op("Slice", &[shape, s2, e2], vec![]);
    let mid = b.i64("mid", &[2], &[4, 16]);
    let target = b.op(
        "Concat",
        &[lead, mid, last],
        vec![Attribute::int("axis", 0)],
    );
    let y = b.op("Reshape", &[x, target], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(13)
}

#[test]
fn an_element_spelled_as_unparsed_text_becomes_minus_one() {
    let original = dfl_reshape_with_opaque_dim();
    let mut m = original.clone();
    let config = PipelineConfig::from_yaml(DEFAULT_FOLDS, "test.yaml").unwrap();
    run_config(&mut m, &config).unwrap();
    assert_eq!(ops(&m), histogram(&[("Reshape", 1)]));
    let (_, node) = m.graph.nodes().next().unwrap();
    let target = m.graph.constant(node.inputs[1].unwrap()).unwrap();
    assert_eq!(target.to_i64_vec().unwrap(), vec![0, 4, 16, -1]);
    let m = saved_ok(&m);
    let shapes = InputShapes::new().with_shape("x", vec![2, 64, 21]);
    assert_equivalent(&original, &m, &shapes, 0.0, 0.0);
}

/// A window partition along a dynamic axis: `x: [batch, h, 6]` padded to a
/// multiple of 7 by `(7 - h % 7) % 7` (a Pad whose extent inference cannot
/// name), cut into `batch * (padded_h / 7)` windows of 7 rows.
fn pad_and_partition() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "h", "6"]));
    let shape = b.op("Shape", &[x], vec![]);
    let i0 = b.i64("i0", &[], &[0]);
    let i1 = b.i64("i1", &[], &[1]);
    let n = b.op("Gather", &[shape, i0], vec![Attribute::int("axis", 0)]);
    let h = b.op("Gather", &[shape, i1], vec![Attribute::int("axis", 0)]);
    let seven = b.i64("seven", &[], &[7]);
    let rem = b.op("Mod", &[h, seven], vec![]);
    let short = b.op("Sub", &[seven, rem], vec![]);
    let pad_h = b.op("Mod", &[short, seven], vec![]);
    let ax = b.i64("ax", &[1], &[0]);
    let pad_h = b.op("Unsqueeze", &[pad_h, ax], vec![]);
    let zeros4 = b.i64("zeros4", &[4], &[0, 0, 0, 0]);
    let zero1 = b.i64("zero1", &[1], &[0]);
    let pads = b.op(
        "Concat",
        &[zeros4, pad_h, zero1],
        vec![Attribute::int("axis", 0)],
    );
    let padded = b.op("Pad", &[x, pads], vec![]);
    let padded_shape = b.op("Shape", &[padded], vec![]);
    let ph = b.op(
        "Gather",
        &[padded_shape, i1],
        vec![Attribute::int("axis", 0)],
    );
    let windows = b.op("Div", &[ph, seven], vec![]);
    let rows = b.op("Mul", &[n, windows], vec![]);
    let rows = b.op("Unsqueeze", &[rows, ax], vec![]);
    let rest = b.i64("rest", &[2], &[7, 6]);
    let target = b.op("Concat", &[rows, rest], vec![Attribute::int("axis", 0)]);
    let y = b.op("Reshape", &[padded, target], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(13)
}

#[test]
fn a_window_count_behind_a_symbolic_pad_becomes_minus_one() {
    let original = pad_and_partition();
    let mut m = original.clone();
    let config = PipelineConfig::from_yaml(DEFAULT_FOLDS, "test.yaml").unwrap();
    run_config(&mut m, &config).unwrap();
    // The window count's Shape/Gather/Div/Mul/Unsqueeze/Concat go; the
    // padding arithmetic stays (it sizes the Pad).
    let reshape = m
        .graph
        .nodes()
        .find(|(_, n)| n.is("Reshape"))
        .map(|(_, n)| n.clone())
        .unwrap();
    let target = m.graph.constant(reshape.inputs[1].unwrap()).unwrap();
    assert_eq!(target.to_i64_vec().unwrap(), vec![-1, 7, 6]);
    assert_eq!(ops(&m).get("Div"), None, "{:?}", ops(&m));
    assert_eq!(ops(&m).get("Mul"), None, "{:?}", ops(&m));
    assert_eq!(ops(&m).get("Shape"), Some(&1), "{:?}", ops(&m));
    let m = saved_ok(&m);
    // Heights below, at and above a multiple of 7, batch 1 and 3.
    for (batch, h) in [(1, 5), (3, 14), (2, 9)] {
        let shapes = InputShapes::new()
            .with_symbol("batch", batch)
            .with_symbol("h", h);
        assert_equivalent(&original, &m, &shapes, 0.0, 0.0);
    }
}

// ----- Loop whose carried value grows -----

/// torchvision's Mask R-CNN paste loop as the TorchScript exporter writes
/// it: a carried list that starts empty, `acc' = Concat(acc, row)`, with
/// the body input declared at the initial value's shape [0, 4]. The
/// iterations do not keep that 0, so the Concat is not "empty along the
/// axis" and stays (it was dropped, and every iteration returned one row),
/// and the body input's declaration no longer says 0.
#[test]
fn a_loop_carried_value_declared_empty_that_grows_keeps_its_concat() {
    let mut body = GraphBuilder::new();
    let i = body.input("i", DataType::Int64, vec![]);
    let c = body.input("c", DataType::Bool, vec![]);
    let acc = body.input("acc", DataType::Float, dims(&["0", "4"]));
    let x = body.graph_mut().add_value(Value {
        outer: true,
        ..Value::named("x")
    });
    let i_f = body.op("Cast", &[i], vec![Attribute::int("to", 1)]);
    let row = body.op("Add", &[x, i_f], vec![]);
    let axes = body.i64("axes", &[1], &[0]);
    let row2 = body.op("Unsqueeze", &[row, axes], vec![]);
    let grown = body.op("Concat", &[acc, row2], vec![Attribute::int("axis", 0)]);
    body.output(c, "c_out", DataType::Bool, Some(vec![]));
    body.output(grown, "acc_out", DataType::Float, None);
    let body = body.into_graph();

    let mut b = GraphBuilder::new();
    let _x = b.input("x", DataType::Float, dims(&["4"]));
    let m = b.input("m", DataType::Int64, vec![]);
    let cond = b.initializer(
        "keep_going",
        Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
    );
    let empty = b.f32("empty", &[0, 4], &[]);
    let y = b.op(
        "Loop",
        &[m, cond, empty],
        vec![Attribute::graph("body", body)],
    );
    b.output(y, "y", DataType::Float, None);
    let mut model = b.build(17);
    // fix-shapes runs inference over the model (the default pipeline's
    // order), which writes the body input's corrected declaration.
    run_passes(&mut model, &["fix-shapes", "eliminate-identity"]);
    let g = &model.graph;
    let (_, looped) = g
        .nodes()
        .find(|(_, n)| n.op_type == "Loop")
        .expect("the Loop stays");
    let body = &looped.attr("body").expect("a body").subgraphs[0];
    let concat_inputs: Vec<usize> = body
        .nodes()
        .filter(|(_, n)| n.op_type == "Concat")
        .map(|(_, n)| n.inputs.len())
        .collect();
    let body_ops: Vec<&str> = body.nodes().map(|(_, n)| n.op_type.as_str()).collect();
    assert_eq!(
        concat_inputs,
        vec![2],
        "the Concat keeps both inputs: {body_ops:?}"
    );
    let declared = body.value_type(body.inputs[2].value).unwrap();
    assert_eq!(declared.shape.unwrap()[0], infopt_ir::Dim::Unknown);
    saved_ok(&model);
}

/// DETR's pixel mask resized to the feature map: `Resize(x, sizes =
/// Concat(Shape(x)[0:2], [2, 2]))`. Its output is `[batch, 1, 2, 2]`, so the
/// flattened width read back through Shape → Gather is the constant 4, the
/// Reshape's target folds to `[-1, 4]` and the Reshape goes as an identity;
/// the batch stays symbolic.
#[test]
fn resize_to_sizes_that_keep_the_input_dims_has_a_known_shape() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "1", "16", "16"]));
    let shape = b.op("Shape", &[x], vec![]);
    let (z, two) = (b.i64("z", &[1], &[0]), b.i64("two", &[1], &[2]));
    let nc = b.op("Slice", &[shape, z, two], vec![]);
    let hw = b.i64("hw", &[2], &[2, 2]);
    let sizes = b.op("Concat", &[nc, hw], vec![Attribute::int("axis", 0)]);
    let resize = Node {
        name: Some("resize".into()),
        op_type: "Resize".into(),
        inputs: vec![Some(x), None, None, Some(sizes)],
        attributes: vec![Attribute::string("mode", "nearest")],
        ..Default::default()
    };
    let id = b.graph_mut().add_node(resize, &["resized"]);
    let y = b.graph_mut().node(id).outputs[0].unwrap();
    let flat = b.op("Flatten", &[y], vec![Attribute::int("axis", 1)]);
    let fshape = b.op("Shape", &[flat], vec![]);
    let one = b.i64("one", &[], &[1]);
    let width = b.op("Gather", &[fshape, one], vec![Attribute::int("axis", 0)]);
    let width = b.op("Unsqueeze", &[width, z], vec![]);
    let minus_one = b.i64("minus_one", &[1], &[-1]);
    let target = b.op(
        "Concat",
        &[minus_one, width],
        vec![Attribute::int("axis", 0)],
    );
    let out = b.op("Reshape", &[flat, target], vec![]);
    b.output(out, "out", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_static(&mut m, "");
    let h = ops(&m);
    assert_eq!(
        h,
        histogram(&[
            ("Concat", 1),
            ("Flatten", 1),
            ("Resize", 1),
            ("Shape", 1),
            ("Slice", 1)
        ]),
        "the width folds; the sizes keep reading the batch"
    );
    assert_eq!(output_shape(&m, 0), dims(&["batch", "4"]));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn fix_shapes_leaves_paddles_question_mark_dims_unnamed_for_tensorrt() {
    use infopt_ir::proto::tensor_shape::DimValue;
    use infopt_ir::unknown_dims::{declared_dims, declared_dims_mut};
    // `x: [batch, 3, ?, ?]` as Paddle declares it; `?` means unknown.
    let mut b = infopt_ir::builder::GraphBuilder::new();
    let x = b.input(
        "x",
        infopt_ir::DataType::Float,
        dims(&["batch", "3", "8", "8"]),
    );
    let y = b.op("Relu", &[x], vec![]);
    b.output(y, "y", infopt_ir::DataType::Float, None);
    let mut m = b.build(17);
    let params = |m: &infopt_ir::Model| -> Vec<Option<DimValue>> {
        declared_dims(&m.graph.inputs[0].info)
            .expect("a shape")
            .iter()
            .map(|d| d.value.clone())
            .collect()
    };
    for d in &mut declared_dims_mut(&mut m.graph.inputs[0].info).expect("a shape")[2..] {
        d.value = Some(DimValue::DimParam("?".into()));
    }
    for (target, unnamed) in [("portable", false), ("tensorrt", true)] {
        let mut model = m.clone();
        let cfg = PipelineConfig::from_yaml(
            &format!("version: 1\ntarget: {target}\npasses:\n  - fix-shapes: {{}}\n"),
            "t.yaml",
        )
        .unwrap();
        let run = run_config(&mut model, &cfg).unwrap();
        let p = params(&model);
        assert_eq!(p[0], Some(DimValue::DimParam("batch".into())), "{target}");
        let expected = if unnamed {
            None
        } else {
            Some(DimValue::DimParam("?".into()))
        };
        assert_eq!(
            (p[2].clone(), p[3].clone()),
            (expected.clone(), expected),
            "{target}"
        );
        assert_eq!(
            run.notes.iter().any(|n| n.contains("named `?`")),
            unnamed,
            "{target}: {:?}",
            run.notes
        );
    }
}
