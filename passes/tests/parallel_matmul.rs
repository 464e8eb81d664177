//! fuse-parallel-matmul: the packed MatMul (and bias Add) it writes, exact
//! histograms, the packed constants' layout, and equivalence in tract.

mod common;

use common::*;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{DataType, Model};
use infopt_passes::Target;

/// `x [B, 5, 4]` projected by `n` constant `[4, w]` weights (values that
/// differ per projection), each followed by an `Add` of a `[w]` bias when
/// `biased[i]`, every projection a graph output.
fn projections(widths: &[i64], biased: &[bool]) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["B", "5", "4"]));
    for (i, (&w, &with_bias)) in widths.iter().zip(biased).enumerate() {
        let weights: Vec<f32> = (0..4 * w)
            .map(|k| (k as f32 + 1.0) * 0.1 * (i as f32 + 1.0))
            .collect();
        let wv = b.f32(&format!("W{i}"), &[4, w], &weights);
        let mut y = b.op("MatMul", &[x, wv], vec![]);
        if with_bias {
            let bias: Vec<f32> = (0..w).map(|k| 10.0 * (i as f32 + 1.0) + k as f32).collect();
            let bv = b.f32(&format!("b{i}"), &[w], &bias);
            // The second projection's bias comes first: Add commutes.
            y = if i == 1 {
                b.op("Add", &[bv, y], vec![])
            } else {
                b.op("Add", &[y, bv], vec![])
            };
        }
        b.output(y, &format!("y{i}"), DataType::Float, None);
    }
    b.build(17)
}

fn constant_f64(m: &Model, suffix: &str) -> (Vec<i64>, Vec<f64>) {
    let g = &m.graph;
    let v = g
        .value_ids()
        .find(|&v| g.value(v).name.ends_with(suffix) && g.constant(v).is_some())
        .unwrap_or_else(|| panic!("no constant named *{suffix}"));
    let t = g.constant(v).unwrap();
    (t.dims().to_vec(), t.to_f64_vec().unwrap())
}

#[test]
fn biased_projections_pack_weights_and_biases_before_the_split() {
    let original = projections(&[3, 2, 3], &[true, true, true]);
    let mut m = original.clone();
    run_passes(&mut m, &["fuse-parallel-matmul", "eliminate-dead"]);
    assert_eq!(
        ops(&m),
        histogram(&[("MatMul", 1), ("Add", 1), ("Split", 1)])
    );
    // The biases side by side, in the projections' order.
    let (bdims, bias) = constant_f64(&m, "merged_bias");
    assert_eq!(bdims, vec![8]);
    assert_eq!(bias, vec![10.0, 11.0, 12.0, 20.0, 21.0, 30.0, 31.0, 32.0]);
    // Row 0 of the packed weight is row 0 of each weight in turn.
    let (wdims, w) = constant_f64(&m, "merged_weight");
    assert_eq!(wdims, vec![4, 8]);
    let row0: Vec<f64> = w[..8].to_vec();
    let expect = [0.1, 0.2, 0.3, 0.2, 0.4, 0.3, 0.6, 0.9];
    for (a, e) in row0.iter().zip(expect) {
        assert!((a - e).abs() < 1e-6, "row 0 {row0:?}");
    }
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn one_projection_without_a_bias_keeps_the_adds_after_the_split() {
    assert_adds_stay(&projections(&[3, 2, 3], &[true, false, true]));
}

/// `x [B, 4]` projected by two `[4, 2]` weights, each followed by an `Add`
/// of its bias (`b0` of `b0_dims`); both Adds are graph outputs, and so is
/// the second MatMul's own output when `raw_output`.
fn two_projections(b0_dims: &[i64], b0: &[f32], raw_output: bool) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["B", "4"]));
    let w0 = b.f32("W0", &[4, 2], &[1.0; 8]);
    let w1 = b.f32("W1", &[4, 2], &[2.0; 8]);
    let b0 = b.f32("b0", b0_dims, b0);
    let b1 = b.f32("b1", &[2], &[1.0, 2.0]);
    let m0 = b.op("MatMul", &[x, w0], vec![]);
    let m1 = b.op("MatMul", &[x, w1], vec![]);
    let y0 = b.op("Add", &[m0, b0], vec![]);
    let y1 = b.op("Add", &[m1, b1], vec![]);
    b.output(y0, "y0", DataType::Float, None);
    b.output(y1, "y1", DataType::Float, None);
    if raw_output {
        b.output(m1, "raw1", DataType::Float, None);
    }
    b.build(17)
}

/// The MatMuls merge, the Adds stay after the Split.
fn assert_adds_stay(original: &Model) {
    let mut m = original.clone();
    run_passes(&mut m, &["fuse-parallel-matmul", "eliminate-dead"]);
    assert_eq!(
        ops(&m),
        histogram(&[("MatMul", 1), ("Add", 2), ("Split", 1)])
    );
    assert_equivalent(original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn a_bias_of_another_width_is_not_packed() {
    // A `[1]` bias broadcasts over the columns: packing it would need it
    // repeated, so the Adds stay where they are.
    assert_adds_stay(&two_projections(&[1], &[5.0], false));
}

#[test]
fn a_projection_read_elsewhere_too_keeps_its_add() {
    // The second MatMul's output is also a graph output: its Add cannot move.
    assert_adds_stay(&two_projections(&[2], &[5.0, 6.0], true));
}

/// One attention head over `x [B, 5, 4]`: Q, K and V projections of `x`
/// (each with a bias Add), `Softmax(Q·Kᵀ / 2)·V`.
fn attention_head() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["B", "5", "4"]));
    let mut proj = Vec::new();
    for i in 0..3 {
        let weights: Vec<f32> = (0..16).map(|k| ((k * (i + 2)) % 7) as f32 * 0.1).collect();
        let w = b.f32(&format!("W{i}"), &[4, 4], &weights);
        let bias = b.f32(&format!("b{i}"), &[4], &[0.1 * i as f32; 4]);
        let m = b.op("MatMul", &[x, w], vec![]);
        proj.push(b.op("Add", &[m, bias], vec![]));
    }
    let kt = b.op(
        "Transpose",
        &[proj[1]],
        vec![infopt_ir::Attribute::ints("perm", vec![0, 2, 1])],
    );
    let scores = b.op("MatMul", &[proj[0], kt], vec![]);
    let two = b.f32("two", &[], &[2.0]);
    let scaled = b.op("Div", &[scores, two], vec![]);
    let probs = b.op(
        "Softmax",
        &[scaled],
        vec![infopt_ir::Attribute::int("axis", -1)],
    );
    let y = b.op("MatMul", &[probs, proj[2]], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn attention_projections_stay_separate_for_onnx_runtime_and_merge_for_tensorrt() {
    let original = attention_head();
    for target in [Target::Portable, Target::Onnxruntime] {
        let mut m = original.clone();
        let run = run_passes_for(&mut m, &["fuse-parallel-matmul"], target);
        assert_eq!(ops(&m), ops(&original), "{target:?}");
        let reasons: Vec<&str> = run
            .declined
            .iter()
            .filter(|d| d.pass == "fuse-parallel-matmul")
            .map(|d| d.reason.as_str())
            .collect();
        assert_eq!(
            reasons,
            [
                "the MatMuls are an attention block's Q/K/V projections: ONNX Runtime fuses the block only when they stay separate"
            ],
            "{target:?}"
        );
    }
    let mut m = original.clone();
    run_passes_for(
        &mut m,
        &["fuse-parallel-matmul", "eliminate-dead"],
        Target::Tensorrt,
    );
    assert_eq!(
        ops(&m),
        histogram(&[
            ("MatMul", 3),
            ("Add", 1),
            ("Split", 1),
            ("Transpose", 1),
            ("Div", 1),
            ("Softmax", 1)
        ])
    );
    assert_equivalent(&original, &m, &default_shapes(), 1e-5, 1e-5);
}
