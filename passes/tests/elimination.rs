//! Golden structure + tract equivalence tests of the elimination passes and
//! constants-to-initializers.

mod common;

use common::*;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType};

#[test]
fn constants_become_initializers_on_the_transformer_fixture() {
    let original = load("transformer_block.onnx");
    let mut m = original.clone();
    let before = ops(&m);
    assert_eq!(before["Constant"], 12);
    let run = run_passes(&mut m, &["constants-to-initializers"]);
    assert_eq!(run.records[0].rewrites, 12);
    let mut expected = before.clone();
    expected.remove("Constant");
    assert_eq!(ops(&m), expected);
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn identity_chain_and_transpose_pair_are_removed() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "4", "5"]));
    let i1 = b.op("Identity", &[x], vec![]);
    let t1 = b.op(
        "Transpose",
        &[i1],
        vec![Attribute::ints("perm", vec![0, 2, 3, 1])],
    );
    let t2 = b.op(
        "Transpose",
        &[t1],
        vec![Attribute::ints("perm", vec![0, 3, 1, 2])],
    );
    let r = b.op("Relu", &[t2], vec![]);
    let i2 = b.op("Identity", &[r], vec![]);
    b.output(
        i2,
        "y",
        DataType::Float,
        Some(dims(&["batch", "3", "4", "5"])),
    );
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Relu", 1)]));
    // The graph output keeps its name.
    let out = m.graph.outputs[0].value;
    assert_eq!(m.graph.value(out).name, "y");
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn transpose_pair_that_is_not_inverse_merges_into_one() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3", "4"]));
    let t1 = b.op(
        "Transpose",
        &[x],
        vec![Attribute::ints("perm", vec![1, 0, 2])],
    );
    let t2 = b.op(
        "Transpose",
        &[t1],
        vec![Attribute::ints("perm", vec![0, 2, 1])],
    );
    b.output(t2, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity"]);
    assert_eq!(ops(&m), histogram(&[("Transpose", 1)]));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn identity_between_input_and_output_is_declined() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2"]));
    let i = b.op("Identity", &[x], vec![]);
    b.output(i, "y", DataType::Float, None);
    let mut m = b.build(17);
    let before = bytes(&m);
    let run = run_passes(&mut m, &["eliminate-identity"]);
    assert_eq!(bytes(&m), before);
    assert_eq!(run.declined.len(), 1);
    assert_eq!(
        run.declined[0].reason,
        "bypassing would rename 'x' to graph output 'y'"
    );
}

#[test]
fn dropout_cast_concat_pad_and_reshape_noops() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3"]));
    let d = b.op("Dropout", &[x], vec![]);
    let c = b.op("Cast", &[d], vec![Attribute::int("to", 1)]);
    let k = b.op("Concat", &[c], vec![Attribute::int("axis", 0)]);
    let pads = b.i64("pads", &[4], &[0, 0, 0, 0]);
    let p = b.op("Pad", &[k, pads], vec![]);
    let shape = b.i64("shape", &[2], &[2, 3]);
    let r = b.op("Reshape", &[p, shape], vec![]);
    let e = b.op("Exp", &[r], vec![]);
    b.output(e, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    // Cast and Reshape need the input type: it comes from the graph input here,
    // and each bypass exposes the next no-op to the following node.
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Exp", 1)]));
    assert_eq!(
        m.graph.initializers().count(),
        0,
        "unused pads/shape initializers are removed"
    );
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn dropout_with_used_mask_is_declined() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2"]));
    let outs = b.op_n("Dropout", &[x], vec![], 2);
    b.output(outs[0], "y", DataType::Float, None);
    b.output(outs[1], "mask", DataType::Bool, None);
    let mut m = b.build(17);
    let run = run_passes(&mut m, &["eliminate-identity"]);
    assert_eq!(ops(&m), histogram(&[("Dropout", 1)]));
    assert_eq!(run.declined[0].reason, "the Dropout mask output is used");
}

#[test]
fn duplicates_merge_and_cascade() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "4"]));
    let w1 = b.f32("w1", &[4], &[1.0, 2.0, 3.0, 4.0]);
    let w2 = b.f32("w2", &[4], &[1.0, 2.0, 3.0, 4.0]);
    let m1 = b.op("Mul", &[x, w1], vec![]);
    let m2 = b.op("Mul", &[x, w2], vec![]);
    let r1 = b.op("Relu", &[m1], vec![]);
    let r2 = b.op("Relu", &[m2], vec![]);
    let s = b.op("Add", &[r1, r2], vec![]);
    b.output(s, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-duplicates", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Add", 1), ("Mul", 1), ("Relu", 1)]));
    assert_eq!(m.graph.initializers().count(), 1);
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn duplicate_graph_outputs_are_declined() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2"]));
    let a = b.op("Relu", &[x], vec![]);
    let c = b.op("Relu", &[x], vec![]);
    b.output(a, "a", DataType::Float, None);
    b.output(c, "c", DataType::Float, None);
    let mut m = b.build(17);
    let before = bytes(&m);
    let run = run_passes(&mut m, &["eliminate-duplicates"]);
    assert_eq!(bytes(&m), before);
    assert!(
        run.declined[0]
            .reason
            .contains("both outputs are part of the graph's interface"),
        "{:?}",
        run.declined
    );
}

#[test]
fn dead_code_removes_nodes_initializers_and_unused_opsets() {
    let mut m = load("cnn_bn_relu.onnx");
    let before = ops(&m);
    // Plant dead code: a Shape of the input and an unused initializer.
    let x = m.graph.inputs[0].value;
    let node = infopt_ir::Node {
        op_type: "Shape".into(),
        inputs: vec![Some(x)],
        ..Default::default()
    };
    m.graph.add_node(node, &["dead_shape"]);
    m.graph.add_initializer(
        "dead_weight",
        infopt_ir::Tensor::from_f32(vec![2], &[1.0, 2.0]),
    );
    m.meta
        .opset_import
        .push(infopt_ir::proto::OperatorSetIdProto {
            domain: Some("com.unused".into()),
            version: Some(1),
        });
    let run = run_passes(&mut m, &["eliminate-dead"]);
    assert_eq!(ops(&m), before);
    assert!(m.graph.find_value("dead_weight").is_none());
    assert_eq!(m.meta.opset_import.len(), 1);
    assert_eq!(run.records[0].rewrites, 3);
}

#[test]
fn unused_custom_op_is_kept_and_reported() {
    let mut m = load("custom_domain.onnx");
    // Make the custom op's output dead by pointing the graph output elsewhere.
    let x = m.graph.inputs[0].value;
    let relu = infopt_ir::Node {
        op_type: "Relu".into(),
        inputs: vec![Some(x)],
        ..Default::default()
    };
    let id = m.graph.add_node(relu, &["y2"]);
    let y2 = m.graph.node(id).outputs[0].unwrap();
    let old = m.graph.outputs[0].value;
    m.graph.replace_all_uses(old, y2);
    let run = run_passes(&mut m, &["eliminate-dead"]);
    assert_eq!(ops(&m).get("com.example::FancyActivation"), Some(&1));
    assert!(
        run.declined
            .iter()
            .any(|d| d.reason.contains("custom domain 'com.example'"))
    );
}

#[test]
fn passes_leave_subgraph_fixtures_equivalent() {
    for name in [
        "if_subgraph.onnx",
        "opset11.onnx",
        "dynamic_reshape.onnx",
        "exported/bert_tiny.onnx",
        "exported/resnet_block.onnx",
    ] {
        let original = load(name);
        let mut m = original.clone();
        run_passes(
            &mut m,
            &[
                "constants-to-initializers",
                "eliminate-identity",
                "eliminate-duplicates",
                "eliminate-dead",
            ],
        );
        assert!(
            m.graph.total_node_count() <= original.graph.total_node_count(),
            "{name}"
        );
        assert_equivalent(&original, &m, &default_shapes(), 1e-6, 1e-5);
    }
}

#[test]
fn neutral_constants_are_removed_only_when_they_do_not_broadcast() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "4"]));
    let zeros = b.f32("zeros", &[4], &[0.0; 4]);
    let ones = b.f32("ones", &[1, 4], &[1.0; 4]);
    let wide = b.f32("wide_zeros", &[3, 4], &[0.0; 12]);
    let a = b.op("Add", &[x, zeros], vec![]);
    let m = b.op("Mul", &[ones, a], vec![]);
    // Adding a [3,4] zero tensor to [batch,4] changes the shape unless batch is 3 or 1.
    let w = b.op("Add", &[m, wide], vec![]);
    b.output(w, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Add", 1)]));
    assert_equivalent(
        &original,
        &m,
        &infopt_runtime::InputShapes::new().with_symbol("batch", 3),
        0.0,
        0.0,
    );
}

#[test]
fn unsqueeze_chains_merge_into_one() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3"]));
    let a1 = b.i64("a1", &[1], &[0]);
    let a2 = b.i64("a2", &[2], &[1, -1]);
    let u1 = b.op("Unsqueeze", &[x, a1], vec![]);
    let u2 = b.op("Unsqueeze", &[u1, a2], vec![]);
    b.output(u2, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Unsqueeze", 1)]));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn reshape_target_from_own_shape_becomes_a_constant() {
    let original = load("dynamic_reshape.onnx");
    let mut m = original.clone();
    run_passes(
        &mut m,
        &[
            "constants-to-initializers",
            "simplify-reshape",
            "eliminate-dead",
        ],
    );
    assert_eq!(
        ops(&m),
        histogram(&[("Add", 1), ("MatMul", 1), ("Reshape", 1)])
    );
    // Batch stays dynamic: the model runs at two batch sizes.
    for batch in [1, 3] {
        let shapes = infopt_runtime::InputShapes::new().with_symbol("batch", batch);
        assert_equivalent(&original, &m, &shapes, 0.0, 0.0);
    }
    assert!(m.graph.inputs[0].info.r#type.is_some());
}

#[test]
fn single_output_split_flatten_of_2d_unit_reduction_and_boolean_neutral_go() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "1", "4"]));
    let m = b.input("m", DataType::Bool, dims(&["batch", "1", "4"]));
    let s = b.op("Split", &[x], vec![Attribute::int("axis", 2)]);
    let r = b.op(
        "ReduceMax",
        &[s],
        vec![
            Attribute::ints("axes", vec![1]),
            Attribute::int("keepdims", 1),
        ],
    );
    let shape = b.i64("shape", &[2], &[-1, 4]);
    let flat_in = b.op("Reshape", &[r, shape], vec![]);
    let f = b.op("Flatten", &[flat_in], vec![Attribute::int("axis", 1)]);
    let t = b.initializer(
        "t",
        infopt_ir::Tensor::from_raw(DataType::Bool, vec![], bytes::Bytes::from(vec![1u8])),
    );
    let and = b.op("And", &[m, t], vec![]);
    let e = b.op("Exp", &[f], vec![]);
    b.output(e, "y", DataType::Float, None);
    b.output(and, "mask_out", DataType::Bool, None);
    let original = b.build(17);
    let mut m = original.clone();
    let run = run_passes(
        &mut m,
        &["infer-shapes", "eliminate-identity", "eliminate-dead"],
    );
    // The And cannot go: its input is the graph input 'm' and its output a graph output.
    assert_eq!(
        ops(&m),
        histogram(&[("And", 1), ("Exp", 1), ("Reshape", 1)]),
        "{:?}",
        run.declined
    );
    assert!(
        run.declined
            .iter()
            .any(|d| d.reason.contains("rename 'm' to graph output 'mask_out'"))
    );
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn transpose_of_unit_axes_becomes_a_reshape_and_merges() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "6", "4", "1", "1"]));
    let t = b.op(
        "Transpose",
        &[x],
        vec![Attribute::ints("perm", vec![0, 3, 4, 1, 2])],
    );
    let shape = b.i64("shape", &[3], &[1, -1, 4]);
    let r = b.op("Reshape", &[t, shape], vec![]);
    b.output(r, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Reshape", 1)]));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn lstm_zero_initial_states_are_dropped() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["5", "2", "3"]));
    let hidden = 4;
    let w = b.f32(
        "w",
        &[1, 4 * hidden, 3],
        &(0..48).map(|i| (i as f32 * 0.37).sin()).collect::<Vec<_>>(),
    );
    let r = b.f32(
        "r",
        &[1, 4 * hidden, hidden],
        &(0..64).map(|i| (i as f32 * 0.11).cos()).collect::<Vec<_>>(),
    );
    let bias = b.f32("bias", &[1, 8 * hidden], &[0.1; 32]);
    let state_shape = b.i64("state_shape", &[3], &[1, 2, hidden]);
    let zero = infopt_ir::Tensor::from_f32(vec![1], &[0.0]);
    let h0 = b.op(
        "ConstantOfShape",
        &[state_shape],
        vec![Attribute::tensor("value", &zero)],
    );
    let c0 = b.f32("c0", &[1, 2, hidden], &[0.0; 8]);
    let node = infopt_ir::Node {
        op_type: "LSTM".into(),
        inputs: vec![
            Some(x),
            Some(w),
            Some(r),
            Some(bias),
            None,
            Some(h0),
            Some(c0),
        ],
        attributes: vec![Attribute::int("hidden_size", hidden)],
        ..Default::default()
    };
    let id = b.graph_mut().add_node(node, &["y", "y_h"]);
    let y_h = b.graph_mut().node(id).outputs[1].unwrap();
    b.output(y_h, "h", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("LSTM", 1)]));
    let lstm = m.graph.nodes().next().unwrap().1;
    assert_eq!(
        lstm.inputs.len(),
        4,
        "sequence_lens and the states are gone"
    );
    assert_equivalent(&original, &m, &default_shapes(), 1e-6, 1e-5);
}

#[test]
fn initializers_listed_as_inputs_become_constants() {
    let mut m = load("cnn_bn_relu.onnx");
    // Make it an IR < 4 style export: every weight is also a graph input.
    let inits: Vec<_> = m
        .graph
        .initializers()
        .map(|(v, t)| (v, t.dtype(), t.dims().to_vec()))
        .collect();
    for (v, dtype, d) in inits {
        let ty = infopt_ir::TensorType {
            dtype,
            shape: Some(d.into_iter().map(infopt_ir::Dim::Known).collect()),
        };
        let info = infopt_ir::proto::ValueInfoProto {
            r#type: Some(ty.to_proto(None)),
            ..Default::default()
        };
        m.graph.inputs.push(infopt_ir::GraphIo { value: v, info });
    }
    let original = m.clone();
    let mut fused = m.clone();
    let run = run_passes(&mut m, &["fuse-conv-bn"]);
    assert_eq!(
        run.records[0].rewrites, 0,
        "defaulted inputs are not constants"
    );
    run_passes(
        &mut fused,
        &[
            "remove-initializer-inputs",
            "fuse-conv-bn",
            "eliminate-dead",
        ],
    );
    assert_eq!(fused.graph.inputs.len(), 1);
    assert_eq!(
        ops(&fused)["BatchNormalization"],
        1,
        "all but the shared-conv BN fold"
    );
    assert_equivalent(&original, &fused, &default_shapes(), 1e-5, 1e-4);
}

#[test]
fn sizes_are_never_minus_one_so_the_hf_expand_idiom_folds() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "seq"]));
    let s = b.op("Shape", &[x], vec![]);
    let minus = b.i64("minus_one", &[2], &[-1, -1]);
    let ones = b.i64("ones", &[2], &[1, 1]);
    let e = b.op("Equal", &[s, minus], vec![]);
    let w = b.op("Where", &[e, ones, s], vec![]);
    let y = b.op("Expand", &[x, w], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(
        &mut m,
        &[
            "infer-shapes",
            "fold-constants",
            "eliminate-identity",
            "eliminate-dead",
        ],
    );
    assert_eq!(ops(&m), histogram(&[("Expand", 1), ("Shape", 1)]));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn layout_chains_collapse_into_one_reshape() {
    // tf2onnx's Einsum lowering: Reshape to [.., 1] then Squeeze the 1.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "64"]));
    let s1 = b.i64("s1", &[4], &[0, 4, 16, 1]);
    let r = b.op("Reshape", &[x, s1], vec![]);
    let ax = b.i64("ax", &[1], &[3]);
    let q = b.op("Squeeze", &[r, ax], vec![]);
    // and an Unsqueeze feeding a Reshape
    let ax2 = b.i64("ax2", &[2], &[2, 3]);
    let u = b.op("Unsqueeze", &[q, ax2], vec![]);
    let s2 = b.i64("s2", &[2], &[-1, 64]);
    let r2 = b.op("Reshape", &[u, s2], vec![]);
    b.output(r2, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(
        &mut m,
        &["infer-shapes", "eliminate-identity", "eliminate-dead"],
    );
    assert!(
        ops(&m).get("Reshape").copied().unwrap_or(0) <= 1,
        "{:?}",
        ops(&m)
    );
    assert_eq!(ops(&m).get("Squeeze"), None);
    assert_eq!(ops(&m).get("Unsqueeze"), None);
    assert_equivalent(
        &original,
        &m,
        &infopt_runtime::InputShapes::new().with_symbol("batch", 3),
        0.0,
        0.0,
    );
}

#[test]
fn recurrent_ops_have_inferred_shapes() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["seq", "batch", "3"]));
    let w = b.f32("w", &[2, 12, 3], &[0.1; 72]);
    let r = b.f32("r", &[2, 12, 4], &[0.1; 96]);
    let node = infopt_ir::Node {
        op_type: "GRU".into(),
        inputs: vec![Some(x), Some(w), Some(r)],
        attributes: vec![
            Attribute::int("hidden_size", 4),
            Attribute::string("direction", "bidirectional"),
        ],
        ..Default::default()
    };
    let id = b.graph_mut().add_node(node, &["y", "y_h"]);
    let y = b.graph_mut().node(id).outputs[0].unwrap();
    let y_h = b.graph_mut().node(id).outputs[1].unwrap();
    b.output(y, "y", DataType::Float, None);
    b.output(y_h, "y_h", DataType::Float, None);
    let mut m = b.build(17);
    infopt_ir::infer::infer_shapes(&mut m);
    let shape = |v| m.graph.value_type(v).unwrap().shape.unwrap();
    assert_eq!(shape(y), dims(&["seq", "2", "batch", "4"]));
    assert_eq!(shape(y_h), dims(&["2", "batch", "4"]));
}

// ----- redundant neighbours (issue 13) -----

/// `x [batch,3,4] -> build(x) -> y`, opset `opset`, run through
/// eliminate-identity + eliminate-dead; returns (original, result).
fn simplify(
    opset: i64,
    build: impl FnOnce(&mut GraphBuilder, infopt_ir::ValueId) -> infopt_ir::ValueId,
) -> (infopt_ir::Model, infopt_ir::Model) {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "4"]));
    let y = build(&mut b, x);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(opset);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    (original, m)
}

#[test]
fn second_of_two_idempotent_ops_goes() {
    for op in ["Relu", "Abs", "Ceil", "Floor", "Round", "Sign"] {
        let (original, m) = simplify(17, |b, x| {
            let a = b.op(op, &[x], vec![]);
            let c = b.op(op, &[a], vec![]);
            b.op("Neg", &[c], vec![])
        });
        assert_eq!(ops(&m), histogram(&[(op, 1), ("Neg", 1)]), "{op}");
        assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    }
    // Different ops are not merged.
    let (_, m) = simplify(17, |b, x| {
        let a = b.op("Floor", &[x], vec![]);
        b.op("Ceil", &[a], vec![])
    });
    assert_eq!(ops(&m), histogram(&[("Floor", 1), ("Ceil", 1)]));
}

#[test]
fn a_saturating_sigmoid_decides_argmax_ties_that_its_input_does_not() {
    // Why a Sigmoid or an Exp under ArgMax stays: float32's Sigmoid is 1.0
    // at 20 and at 30, so ArgMax of the Sigmoid is the first class (0)
    // while ArgMax of the logits is the second (1).
    use infopt_runtime::{Backend, HostTensor, InputShapes, TractBackend};
    let argmax_of = |f: Option<&str>| {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "3"]));
        let y = match f {
            Some(f) => b.op(f, &[x], vec![]),
            None => x,
        };
        let i = b.op("ArgMax", &[y], vec![Attribute::int("axis", 1)]);
        b.output(i, "i", DataType::Int64, None);
        let m = b.build(17);
        let loaded = TractBackend
            .load(&m.to_bytes().unwrap(), None, &InputShapes::new())
            .unwrap();
        let x = HostTensor::from_vec(vec![1, 3], vec![20.0f32, 30.0, 0.0]).unwrap();
        loaded.run(&[x]).unwrap()[0].to_f64_vec()
    };
    assert_eq!(argmax_of(Some("Sigmoid")), [0.0]);
    assert_eq!(argmax_of(None), [1.0]);
    // Exp overflows to infinity from 88.7 on.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3"]));
    let e = b.op("Exp", &[x], vec![]);
    let i = b.op("ArgMax", &[e], vec![Attribute::int("axis", 1)]);
    b.output(i, "i", DataType::Int64, None);
    let mut m = b.build(17);
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Exp", 1), ("ArgMax", 1)]));
}

fn arg_of(b: &mut GraphBuilder, f: &str, f_axis: Option<i64>, arg_axis: i64) -> infopt_ir::ValueId {
    let x = b.graph_mut().inputs[0].value;
    let attrs = f_axis
        .map(|a| vec![Attribute::int("axis", a)])
        .unwrap_or_default();
    let y = b.op(f, &[x], attrs);
    let i = b.op("ArgMax", &[y], vec![Attribute::int("axis", arg_axis)]);
    b.op("Cast", &[i], vec![Attribute::int("to", 1)])
}

#[test]
fn strictly_increasing_op_under_argmax_goes() {
    for (f, f_axis, arg_axis) in [("Softmax", Some(-1), 2), ("LogSoftmax", Some(1), -2)] {
        let (original, m) = simplify(17, |b, _| arg_of(b, f, f_axis, arg_axis));
        assert_eq!(
            ops(&m),
            histogram(&[("ArgMax", 1), ("Cast", 1)]),
            "{f} axis {f_axis:?}"
        );
        assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    }
    // Softmax over another axis, Relu (ties), Sigmoid and Exp (they
    // saturate: ties where `x` differs), and opset-11 Softmax whose
    // flattened range starts after the reduced axis stay.
    for (opset, f, f_axis, arg_axis) in [
        (17, "Softmax", Some(1), 2),
        (17, "Relu", None, 1),
        (17, "Sigmoid", None, 0),
        (17, "Exp", None, 1),
        (11, "Softmax", Some(2), 1),
    ] {
        let (_, m) = simplify(opset, |b, _| arg_of(b, f, f_axis, arg_axis));
        assert_eq!(
            ops(&m),
            histogram(&[(f, 1), ("ArgMax", 1), ("Cast", 1)]),
            "{f} opset {opset}"
        );
    }
    // Opset 11 Softmax over the last axis is one axis; over the flattened
    // axes 1.. every element with the same leading index shares the
    // normalizer, so ArgMax over axis 1 or 2 sees an increasing map.
    for (f_axis, arg_axis) in [(2, -1), (1, 1), (1, 2)] {
        let (original, m) = simplify(11, |b, _| arg_of(b, "Softmax", Some(f_axis), arg_axis));
        assert_eq!(
            ops(&m),
            histogram(&[("ArgMax", 1), ("Cast", 1)]),
            "softmax axis {f_axis}, argmax axis {arg_axis}"
        );
        assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    }
}

#[test]
fn concat_of_single_reader_concat_on_the_same_axis_is_one_concat() {
    let (original, m) = simplify(17, |b, x| {
        let r = b.op("Relu", &[x], vec![]);
        let inner = b.op("Concat", &[x, r], vec![Attribute::int("axis", 1)]);
        let n = b.op("Neg", &[x], vec![]);
        b.op("Concat", &[n, inner, x], vec![Attribute::int("axis", -2)])
    });
    assert_eq!(
        ops(&m),
        histogram(&[("Concat", 1), ("Relu", 1), ("Neg", 1)])
    );
    let (_, concat) = m.graph.nodes().find(|(_, n)| n.is("Concat")).unwrap();
    assert_eq!(concat.inputs.len(), 4);
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    // Another axis, or a second reader of the inner Concat: both stay.
    let (_, m) = simplify(17, |b, x| {
        let inner = b.op("Concat", &[x, x], vec![Attribute::int("axis", 2)]);
        let y = b.op("Concat", &[inner, inner], vec![Attribute::int("axis", 1)]);
        b.op("Neg", &[y], vec![])
    });
    assert_eq!(ops(&m), histogram(&[("Concat", 2), ("Neg", 1)]));
}

#[test]
fn log_of_softmax_is_log_softmax() {
    let (original, m) = simplify(17, |b, x| {
        let s = b.op("Softmax", &[x], vec![Attribute::int("axis", 1)]);
        b.op("Log", &[s], vec![])
    });
    assert_eq!(ops(&m), histogram(&[("LogSoftmax", 1)]));
    let (_, n) = m.graph.nodes().next().unwrap();
    assert_eq!(n.attr_int("axis").unwrap(), Some(1));
    assert_equivalent(&original, &m, &default_shapes(), 1e-6, 1e-5);
}

#[test]
fn unsqueeze_restoring_reduced_dims_becomes_keepdims() {
    // ReduceMean-13: axes attribute; Unsqueeze-13: axes input (negative).
    let (original, m) = simplify(13, |b, x| {
        let r = b.op(
            "ReduceMean",
            &[x],
            vec![
                Attribute::ints("axes", vec![2, 0]),
                Attribute::int("keepdims", 0),
            ],
        );
        let axes = b.i64("axes", &[2], &[0, -1]);
        b.op("Unsqueeze", &[r, axes], vec![])
    });
    assert_eq!(ops(&m), histogram(&[("ReduceMean", 1)]));
    let (_, n) = m.graph.nodes().next().unwrap();
    assert_eq!(n.attr_int("keepdims").unwrap(), Some(1));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    // ReduceSum-13 with an axes input, ArgMax (axis attribute) at opset 11.
    let (original, m) = simplify(13, |b, x| {
        let axes = b.i64("raxes", &[1], &[1]);
        let r = b.op("ReduceSum", &[x, axes], vec![Attribute::int("keepdims", 0)]);
        let u = b.i64("uaxes", &[1], &[1]);
        b.op("Unsqueeze", &[r, u], vec![])
    });
    assert_eq!(ops(&m), histogram(&[("ReduceSum", 1)]));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    let (original, m) = simplify(11, |b, x| {
        let a = b.op(
            "ArgMax",
            &[x],
            vec![Attribute::int("axis", 1), Attribute::int("keepdims", 0)],
        );
        let u = b.op("Unsqueeze", &[a], vec![Attribute::ints("axes", vec![1])]);
        b.op("Cast", &[u], vec![Attribute::int("to", 1)])
    });
    assert_eq!(ops(&m), histogram(&[("ArgMax", 1), ("Cast", 1)]));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    // Unsqueeze on another axis: both stay.
    let (_, m) = simplify(13, |b, x| {
        let r = b.op(
            "ReduceMax",
            &[x],
            vec![
                Attribute::ints("axes", vec![1]),
                Attribute::int("keepdims", 0),
            ],
        );
        let axes = b.i64("axes", &[1], &[0]);
        b.op("Unsqueeze", &[r, axes], vec![])
    });
    assert_eq!(ops(&m), histogram(&[("ReduceMax", 1), ("Unsqueeze", 1)]));
}

#[test]
fn transpose_of_a_gemm_operand_becomes_trans_flag() {
    let build = |trans_b: i64| {
        let mut b = GraphBuilder::new();
        let a = b.input("a", DataType::Float, dims(&["4", "3"]));
        let w = b.f32(
            "w",
            &[3, 5],
            &(0..15).map(|i| (i as f32 - 7.0) / 8.0).collect::<Vec<_>>(),
        );
        let ta = b.op("Transpose", &[a], vec![Attribute::ints("perm", vec![1, 0])]);
        let tw = b.op("Transpose", &[w], vec![]);
        // ta: [3,4] -> transA=1 reads [4,3]; tw: [5,3] -> transB flips it back.
        let y = b.op(
            "Gemm",
            &[ta, tw],
            vec![
                Attribute::int("transA", 1),
                Attribute::int("transB", trans_b),
            ],
        );
        b.output(y, "y", DataType::Float, None);
        b.build(17)
    };
    let original = build(1);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Gemm", 1)]));
    let (_, gemm) = m.graph.nodes().next().unwrap();
    assert_eq!(gemm.attr_int("transA").unwrap(), Some(0));
    assert_eq!(gemm.attr_int("transB").unwrap(), Some(0));
    assert_equivalent(&original, &m, &default_shapes(), 1e-6, 1e-6);
}

#[test]
fn focus_slices_merge_into_one_slice_per_output() {
    // YOLOv5 Focus: rows even/odd, then columns even/odd of each.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "8"]));
    let big = i64::MAX;
    let slice = |b: &mut GraphBuilder, src, start: i64, axis: i64, k: usize| {
        let s = b.i64(&format!("s{k}"), &[1], &[start]);
        let e = b.i64(&format!("e{k}"), &[1], &[big]);
        let a = b.i64(&format!("a{k}"), &[1], &[axis]);
        let st = b.i64(&format!("st{k}"), &[1], &[2]);
        b.op("Slice", &[src, s, e, a, st], vec![])
    };
    let even = slice(&mut b, x, 0, 2, 0);
    let odd = slice(&mut b, x, 1, 2, 1);
    let parts = [
        slice(&mut b, even, 0, 3, 2),
        slice(&mut b, odd, 0, -1, 3),
        slice(&mut b, even, 1, 3, 4),
        slice(&mut b, odd, 1, -1, 5),
    ];
    let y = b.op("Concat", &parts, vec![Attribute::int("axis", 1)]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(13);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Slice", 4), ("Concat", 1)]));
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);

    // The same axis twice does not merge.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "8"]));
    let first = slice(&mut b, x, 1, 2, 0);
    let second = slice(&mut b, first, 1, -2, 1);
    b.output(second, "y", DataType::Float, None);
    let mut m = b.build(13);
    run_passes(&mut m, &["eliminate-identity", "eliminate-dead"]);
    assert_eq!(ops(&m), histogram(&[("Slice", 2)]));
}

#[test]
fn gather_of_a_scalar_index_then_unsqueeze_is_a_slice() {
    for (i, axes) in [(2i64, 1i64), (-1, -2)] {
        let (original, m) = simplify(13, |b, x| {
            let idx = b.i64("idx", &[], &[i]);
            let g = b.op("Gather", &[x, idx], vec![Attribute::int("axis", 1)]);
            let ax = b.i64("axes", &[1], &[axes]);
            let u = b.op("Unsqueeze", &[g, ax], vec![]);
            b.op("Relu", &[u], vec![])
        });
        assert_eq!(
            ops(&m),
            histogram(&[("Slice", 1), ("Relu", 1)]),
            "index {i}"
        );
        assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    }
    // Unsqueeze on another axis: unchanged.
    let (_, m) = simplify(13, |b, x| {
        let idx = b.i64("idx", &[], &[0]);
        let g = b.op("Gather", &[x, idx], vec![Attribute::int("axis", 1)]);
        let ax = b.i64("axes", &[1], &[0]);
        b.op("Unsqueeze", &[g, ax], vec![])
    });
    assert_eq!(ops(&m), histogram(&[("Gather", 1), ("Unsqueeze", 1)]));
    // An index outside the axis (Gather fails where Slice would clamp), and
    // the largest index (its end would overflow, found by the fuzzer):
    // unchanged.
    for i in [3, -4, i64::MAX, i64::MIN] {
        let (_, m) = simplify(13, |b, x| {
            let idx = b.i64("idx", &[], &[i]);
            let g = b.op("Gather", &[x, idx], vec![Attribute::int("axis", 1)]);
            let ax = b.i64("axes", &[1], &[1]);
            b.op("Unsqueeze", &[g, ax], vec![])
        });
        assert_eq!(
            ops(&m),
            histogram(&[("Gather", 1), ("Unsqueeze", 1)]),
            "index {i}"
        );
    }
}

#[test]
fn slice_of_one_element_then_squeeze_is_a_gather() {
    for (start, end, axes) in [(1i64, 2i64, 1i64), (-1, i64::MAX, -2), (-3, -2, 1)] {
        let (original, m) = simplify(13, |b, x| {
            let s = b.i64("s", &[1], &[start]);
            let e = b.i64("e", &[1], &[end]);
            let a = b.i64("a", &[1], &[1]);
            let sl = b.op("Slice", &[x, s, e, a], vec![]);
            let ax = b.i64("axes", &[1], &[axes]);
            let q = b.op("Squeeze", &[sl, ax], vec![]);
            b.op("Relu", &[q], vec![])
        });
        assert_eq!(
            ops(&m),
            histogram(&[("Gather", 1), ("Relu", 1)]),
            "slice {start}..{end}"
        );
        assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
    }
    // Two elements: not a Gather.
    let (_, m) = simplify(13, |b, x| {
        let s = b.i64("s", &[1], &[0]);
        let e = b.i64("e", &[1], &[2]);
        let a = b.i64("a", &[1], &[2]);
        let sl = b.op("Slice", &[x, s, e, a], vec![]);
        b.op("Relu", &[sl], vec![])
    });
    assert_eq!(ops(&m), histogram(&[("Slice", 1), ("Relu", 1)]));
}
