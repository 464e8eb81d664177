//! Rewrites found missing (or wrong) by the small-graph corpus
//! (bench/corpus.py): exact op histograms after the passes, tract
//! equivalence, and the near misses each rule must leave alone.

mod common;

use common::*;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType, Model};

const PASSES: &[&str] = &[
    "fold-constants",
    "eliminate-identity",
    "fuse-pad-conv",
    "fuse-matmul-add",
    "eliminate-dead",
];

/// Runs the rules under test; returns the optimized copy after checking it
/// against `original` in tract.
fn optimized(original: &Model) -> Model {
    let mut m = original.clone();
    run_passes(&mut m, PASSES);
    assert_equivalent(original, &m, &default_shapes(), 1e-5, 1e-5);
    m
}

fn unary_model(
    shape: &[&str],
    build: impl FnOnce(&mut GraphBuilder, infopt_ir::ValueId) -> infopt_ir::ValueId,
) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(shape));
    let y = build(&mut b, x);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn pow_by_one_goes() {
    let original = unary_model(&["batch", "3"], |b, x| {
        let one = b.f32("one", &[1], &[1.0]);
        let p = b.op("Pow", &[x, one], vec![]);
        b.op("Relu", &[p], vec![])
    });
    assert_eq!(ops(&optimized(&original)), histogram(&[("Relu", 1)]));
    // x^2 stays.
    let squared = unary_model(&["batch", "3"], |b, x| {
        let two = b.f32("two", &[1], &[2.0]);
        let p = b.op("Pow", &[x, two], vec![]);
        b.op("Relu", &[p], vec![])
    });
    assert_eq!(
        ops(&optimized(&squared)),
        histogram(&[("Pow", 1), ("Relu", 1)])
    );
}

#[test]
fn flatten_that_keeps_the_shape_goes() {
    let original = unary_model(&["1", "6"], |b, x| {
        let f = b.op("Flatten", &[x], vec![Attribute::int("axis", 0)]);
        b.op("Relu", &[f], vec![])
    });
    assert_eq!(ops(&optimized(&original)), histogram(&[("Relu", 1)]));
    // [2, 6] at axis 0 is [1, 12]: a real reshape.
    let real = unary_model(&["2", "6"], |b, x| {
        let f = b.op("Flatten", &[x], vec![Attribute::int("axis", 0)]);
        b.op("Relu", &[f], vec![])
    });
    assert_eq!(
        ops(&optimized(&real)),
        histogram(&[("Flatten", 1), ("Relu", 1)])
    );
}

#[test]
fn where_of_not_swaps_its_branches() {
    let mut b = GraphBuilder::new();
    let c = b.input("c", DataType::Bool, dims(&["4"]));
    let x = b.input("x", DataType::Float, dims(&["4"]));
    let y = b.input("y", DataType::Float, dims(&["4"]));
    let n = b.op("Not", &[c], vec![]);
    let w = b.op("Where", &[n, x, y], vec![]);
    let out = b.op("Sign", &[w], vec![]);
    b.output(out, "out", DataType::Float, None);
    let original = b.build(17);
    let m = optimized(&original);
    assert_eq!(ops(&m), histogram(&[("Where", 1), ("Sign", 1)]));
    let (_, w) = m.graph.nodes().find(|(_, n)| n.is("Where")).unwrap();
    let names: Vec<&str> = w
        .inputs
        .iter()
        .map(|v| m.graph.value(v.unwrap()).name.as_str())
        .collect();
    assert_eq!(names, ["c", "y", "x"]);
}

#[test]
fn empty_concat_inputs_are_dropped() {
    let original = unary_model(&["4"], |b, x| {
        let e = b.f32("empty", &[0], &[]);
        let a = b.op("Concat", &[e, x], vec![Attribute::int("axis", 0)]);
        b.op("Concat", &[a, a, e], vec![Attribute::int("axis", 0)])
    });
    let m = optimized(&original);
    assert_eq!(ops(&m), histogram(&[("Concat", 1)]));
    let (_, c) = m.graph.nodes().find(|(_, n)| n.is("Concat")).unwrap();
    assert_eq!(c.inputs.len(), 2);
}

#[test]
fn log_of_non_negative_goes_under_argmax_only() {
    let argmax_of = |pre: Option<&'static str>| {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["batch", "5"]));
        let src = match pre {
            Some(op) => b.op(op, &[x], vec![]),
            None => x,
        };
        let l = b.op("Log", &[src], vec![]);
        let y = b.op("ArgMax", &[l], vec![Attribute::int("axis", 1)]);
        b.output(y, "y", DataType::Int64, None);
        b.build(17)
    };
    let m = optimized(&argmax_of(Some("Abs")));
    assert_eq!(ops(&m), histogram(&[("Abs", 1), ("ArgMax", 1)]));
    // A negative element would be NaN after the Log: kept.
    let mut m = argmax_of(None);
    run_passes(&mut m, PASSES);
    assert_eq!(ops(&m), histogram(&[("ArgMax", 1), ("Log", 1)]));
}

#[test]
fn cancelling_transposes_between_input_and_output_leave_one_identity() {
    let original = unary_model(&["2", "3", "4"], |b, x| {
        let t = b.op(
            "Transpose",
            &[x],
            vec![Attribute::ints("perm", vec![2, 0, 1])],
        );
        b.op(
            "Transpose",
            &[t],
            vec![Attribute::ints("perm", vec![1, 2, 0])],
        )
    });
    assert_eq!(ops(&optimized(&original)), histogram(&[("Identity", 1)]));
    let squeeze = unary_model(&["3", "1", "5"], |b, x| {
        let a = b.i64("axes", &[1], &[1]);
        let s = b.op("Squeeze", &[x, a], vec![]);
        b.op("Unsqueeze", &[s, a], vec![])
    });
    assert_eq!(ops(&optimized(&squeeze)), histogram(&[("Identity", 1)]));
}

/// a[3,4] x B[4,5] + bias of `bias_dims` (a graph input).
fn matmul_add(bias_dims: &[&str]) -> Model {
    let mut b = GraphBuilder::new();
    let a = b.input("a", DataType::Float, dims(&["3", "4"]));
    let w = b.input("w", DataType::Float, dims(&["4", "5"]));
    let c = b.input("c", DataType::Float, dims(bias_dims));
    let m = b.op("MatMul", &[a, w], vec![]);
    let y = b.op("Add", &[m, c], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn matmul_add_takes_any_bias_that_does_not_grow_the_output() {
    for bias in [&["3", "5"][..], &["3", "1"], &["1"], &["5"]] {
        let m = optimized(&matmul_add(bias));
        assert_eq!(ops(&m), histogram(&[("Gemm", 1)]), "bias {bias:?}");
    }
    // [2, 3, 5] would broadcast the product to 3-D: not a Gemm.
    for bias in [&["2", "3", "5"][..], &["4", "5"]] {
        let mut m = matmul_add(bias);
        run_passes(&mut m, PASSES);
        assert_eq!(
            ops(&m),
            histogram(&[("Add", 1), ("MatMul", 1)]),
            "bias {bias:?}"
        );
    }
}

/// x[2,3,4] -> Reshape[6,4] -> Gemm(W[4,5]) -> Reshape `out` -> Add(bias).
fn gemm_reshape_add(out: &[i64], bias_dims: &[i64]) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3", "4"]));
    let s1 = b.i64("s1", &[2], &[6, 4]);
    let r1 = b.op("Reshape", &[x, s1], vec![]);
    let wv: Vec<f32> = (0..20).map(|i| (i as f32 - 9.5) / 7.0).collect();
    let w = b.f32("w", &[4, 5], &wv);
    let g = b.op("Gemm", &[r1, w], vec![]);
    let s2 = b.i64("s2", &[out.len() as i64], out);
    let r2 = b.op("Reshape", &[g, s2], vec![]);
    let n: i64 = bias_dims.iter().product();
    let bv: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 1.0).collect();
    let c = b.f32("bias", bias_dims, &bv);
    let y = b.op("Add", &[r2, c], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn bias_after_gemm_and_reshape_goes_into_c() {
    for bias in [&[5][..], &[1, 1, 5]] {
        let m = optimized(&gemm_reshape_add(&[2, 3, 5], bias));
        assert_eq!(
            ops(&m),
            histogram(&[("Gemm", 1), ("Reshape", 2)]),
            "bias {bias:?}"
        );
        let (_, g) = m.graph.nodes().find(|(_, n)| n.is("Gemm")).unwrap();
        assert_eq!(g.inputs.len(), 3);
    }
    // The Reshape moves the column axis, or the bias varies along rows.
    for (out, bias) in [(&[2, 5, 3][..], &[3][..]), (&[2, 3, 5], &[3, 1])] {
        let mut m = gemm_reshape_add(out, bias);
        run_passes(&mut m, PASSES);
        assert_eq!(
            ops(&m),
            histogram(&[("Add", 1), ("Gemm", 1), ("Reshape", 2)]),
            "out {out:?} bias {bias:?}"
        );
    }
}

#[test]
fn pad_reaching_the_kernel_stays_out_of_average_pool() {
    // ONNX Runtime refuses an AveragePool pad as large as the kernel.
    let pool = |pads: &[i64]| {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "2", "6", "6"]));
        let p = b.i64("pads", &[8], pads);
        let padded = b.op("Pad", &[x, p], vec![]);
        let y = b.op(
            "AveragePool",
            &[padded],
            vec![Attribute::ints("kernel_shape", vec![2, 2])],
        );
        b.output(y, "y", DataType::Float, None);
        b.build(17)
    };
    let mut m = pool(&[0, 0, 2, 0, 0, 0, 0, 0]);
    run_passes(&mut m, PASSES);
    assert_eq!(ops(&m), histogram(&[("AveragePool", 1), ("Pad", 1)]));
    let m = optimized(&pool(&[0, 0, 1, 0, 0, 0, 0, 1]));
    assert_eq!(ops(&m), histogram(&[("AveragePool", 1)]));
}

// ----- fixed shapes: Reshapes around elementwise ops, rank-3 MatMul + Add -----

/// The default pipeline's rewriting core, with `fix` as the fix-shapes
/// options (`{}` leaves the shapes as declared).
fn run_default_core(m: &mut Model, fix: &str) {
    let yaml = format!(
        "version: 1\npasses:\n  - constants-to-initializers\n  - fix-shapes: {fix}\n  - fixed-point:\n      passes: [fold-constants, simplify-reshape, eliminate-identity, eliminate-duplicates, fuse-matmul-add, eliminate-dead]\n"
    );
    let config = infopt_passes::PipelineConfig::from_yaml(&yaml, "test.yaml").expect("parses");
    let options = infopt_passes::DriverOptions {
        validate: true,
        ..Default::default()
    };
    infopt_passes::run_pipeline(m, &config, &options, &mut |_, _| {
        Ok(infopt_passes::Flow::Continue)
    })
    .expect("pipeline runs");
}

#[test]
fn gelu_between_gemms_runs_on_the_2d_product() {
    let original = load("gpt2_mlp.onnx");
    let mut m = original.clone();
    run_default_core(&mut m, "{}");
    // The Reshape pair around the GELU is gone; everything else stays.
    let mut expected = ops(&original);
    expected.remove("Constant");
    expected.insert("Reshape".into(), 2);
    assert_eq!(ops(&m), expected);
    // The GELU now reads the first Gemm's output directly.
    let (_, pow) = m.graph.nodes().find(|(_, n)| n.is("Pow")).unwrap();
    let src = pow.inputs[0].unwrap();
    assert!(m.graph.producer(src).is_some_and(|n| n.is("Gemm")));
    assert_equivalent(&original, &m, &default_shapes(), 1e-5, 1e-5);
}

#[test]
fn elementwise_region_read_elsewhere_keeps_its_reshapes() {
    // A second reader of a GELU intermediate pins the [b, s, h] layout.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["6", "4"]));
    let s1 = b.i64("s1", &[3], &[2, 3, 4]);
    let r = b.op("Reshape", &[x, s1], vec![]);
    let t = b.op("Tanh", &[r], vec![]);
    let e = b.op("Exp", &[t], vec![]);
    let s2 = b.i64("s2", &[2], &[6, 4]);
    let y = b.op("Reshape", &[e, s2], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.output(t, "t", DataType::Float, None);
    let mut m = b.build(17);
    let before = ops(&m);
    run_default_core(&mut m, "{}");
    assert_eq!(ops(&m), before);
}

#[test]
fn rank3_matmul_add_becomes_gemm_at_fixed_shapes() {
    let original = load("seq_linear.onnx");
    // Dynamic batch: the MatMul stays (the count would not drop).
    let mut m = original.clone();
    run_default_core(&mut m, "{}");
    assert_eq!(
        ops(&m),
        histogram(&[("Add", 1), ("MatMul", 1), ("Reshape", 2)])
    );
    // Batch 2: Reshape [2,30] -> [10,6], Gemm, and the [10,7] result is the
    // output's shape already.
    let mut m = original.clone();
    run_default_core(&mut m, "{symbols: {batch: 2}}");
    assert_eq!(ops(&m), histogram(&[("Gemm", 1), ("Reshape", 1)]));
    let (_, r) = m.graph.nodes().find(|(_, n)| n.is("Reshape")).unwrap();
    let target = m.graph.constant(r.inputs[1].unwrap()).unwrap();
    assert_eq!(target.to_i64_vec().unwrap(), vec![10, 6]);
    let shapes = infopt_runtime::InputShapes::new().with_symbol("batch", 2);
    assert_equivalent(&original, &m, &shapes, 1e-5, 1e-5);
}

#[test]
fn rank3_matmul_add_without_layout_neighbours_stays() {
    // x[2,3,4] straight from the input and the sum a graph output: a
    // Reshape on each side would add nodes.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3", "4"]));
    let wv: Vec<f32> = (0..20).map(|i| i as f32 / 10.0).collect();
    let w = b.f32("w", &[4, 5], &wv);
    let c = b.f32("c", &[5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let mm = b.op("MatMul", &[x, w], vec![]);
    let y = b.op("Add", &[mm, c], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    run_default_core(&mut m, "{}");
    assert_eq!(ops(&m), histogram(&[("Add", 1), ("MatMul", 1)]));
}

#[test]
fn castlike_becomes_cast_then_goes_or_folds() {
    // Same type: nothing to do.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3"]));
    let t = b.input("t", DataType::Float, dims(&["1"]));
    let c = b.op("CastLike", &[x, t], vec![]);
    let y = b.op("Relu", &[c], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    run_passes(&mut m, PASSES);
    assert_eq!(ops(&m), histogram(&[("Relu", 1)]));
    // A constant cast like a float input: folded into a float constant.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["3"]));
    let k = b.i64("k", &[3], &[1, 2, 3]);
    let c = b.op("CastLike", &[k, x], vec![]);
    let y = b.op("Add", &[x, c], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_default_core(&mut m, "{}");
    assert_eq!(ops(&m), histogram(&[("Add", 1)]));
    let (_, add) = m.graph.nodes().find(|(_, n)| n.is("Add")).unwrap();
    let folded = m.graph.constant(add.inputs[1].unwrap()).unwrap();
    assert_eq!(folded.to_f64_vec().unwrap(), vec![1.0, 2.0, 3.0]);
    assert_eq!(folded.dtype(), DataType::Float);
}

#[test]
fn negative_pad_value_over_non_negative_input_folds_into_max_pool() {
    let pool = |value: f32, relu: bool| {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "2", "6", "6"]));
        let src = if relu { b.op("Relu", &[x], vec![]) } else { x };
        let p = b.i64("pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]);
        let v = b.f32("value", &[], &[value]);
        let padded = b.op("Pad", &[src, p, v], vec![]);
        let y = b.op(
            "MaxPool",
            &[padded],
            vec![Attribute::ints("kernel_shape", vec![3, 3])],
        );
        b.output(y, "y", DataType::Float, None);
        b.build(17)
    };
    let m = optimized(&pool(-1.5, true));
    assert_eq!(ops(&m), histogram(&[("MaxPool", 1), ("Relu", 1)]));
    // A positive value could win; without the Relu a negative one could.
    for (value, relu) in [(0.5, true), (-1.5, false)] {
        let mut m = pool(value, relu);
        let before = ops(&m);
        run_passes(&mut m, PASSES);
        assert_eq!(ops(&m), before, "value {value} relu {relu}");
    }
}

/// A rank-3 MatMul + Add whose declared leading dims multiply past i64
/// (found by the fuzzer: an initializer turned into a graph input with odd
/// dims) declines instead of overflowing.
#[test]
fn rank3_matmul_add_with_overflowing_declared_dims_declines() {
    let mut b = GraphBuilder::new();
    let huge = "1099511627776"; // 2^40: two of them overflow i64
    let x = b.input("x", DataType::Float, dims(&[huge, huge, "4"]));
    let w = b.f32("w", &[4, 3], &[0.5; 12]);
    let bias = b.f32("bias", &[3], &[1.0, 2.0, 3.0]);
    let mm = b.op("MatMul", &[x, w], vec![]);
    let y = b.op("Add", &[mm, bias], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(13);
    run_passes(&mut m, &["fuse-matmul-add"]);
    assert_eq!(ops(&m), histogram(&[("MatMul", 1), ("Add", 1)]));
}
