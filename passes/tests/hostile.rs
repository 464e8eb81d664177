//! Hostile dims and attributes meet the passes: they decline, they never
//! panic, overflow or enumerate astronomically many positions. Each test here
//! is a finding of the fuzzer (fuzz/, seed 1) or of the hardening audit.

mod common;

use common::*;
use infopt_ir::DataType;
use infopt_ir::builder::{GraphBuilder, dims};

/// Unsqueeze(Unsqueeze(x, [2^40]), [0]) on a value of unknown rank: merging
/// the pair enumerated 2^40 positions (the fuzzer's process was killed for
/// using 20 GB).
#[test]
fn unsqueeze_pair_with_a_huge_axis_is_left_alone() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2"]));
    // No inference rule: the rank of `y` is unknown.
    let y = b.op("FancyOp", &[x], vec![]);
    let a1 = b.i64("a1", &[1], &[1 << 40]);
    let u1 = b.op("Unsqueeze", &[y, a1], vec![]);
    let a2 = b.i64("a2", &[1], &[0]);
    let u2 = b.op("Unsqueeze", &[u1, a2], vec![]);
    b.output(u2, "z", DataType::Float, None);
    let mut m = b.build(13);
    let before = ops(&m);
    run_passes(&mut m, &["eliminate-identity"]);
    assert_eq!(ops(&m), before);
}

/// A Reshape of a tensor declared [2^40, 2^40]: the element count overflows
/// i64; the rule declines instead of overflowing.
#[test]
fn reshape_of_overflowing_dims_is_left_alone() {
    let mut b = GraphBuilder::new();
    let x = b.input(
        "x",
        DataType::Float,
        dims(&["1099511627776", "1099511627776"]),
    );
    let s = b.i64("s", &[1], &[-1]);
    let r = b.op("Reshape", &[x, s], vec![]);
    b.output(r, "y", DataType::Float, None);
    let mut m = b.build(13);
    let before = ops(&m);
    run_passes(&mut m, &["eliminate-identity", "simplify-reshape"]);
    assert_eq!(ops(&m), before);
}

/// Conv(x + c, W [4,1,3,3]) and Conv(x * c, W), c a scalar, with `group`
/// 2147483647 (a PP-OCRv4 rec mutated by the fuzzer; loading refuses it,
/// this graph is built past that check): folding the shift sized a table of
/// per-channel values by the group, 17 GB. Group 3 (not dividing 4
/// channels) indexed out of bounds.
#[test]
fn a_group_that_does_not_divide_the_channels_is_declined_by_fuse_conv_bn() {
    for op in ["Add", "Mul"] {
        for group in [2147483647, 3, 0, -1] {
            let mut b = GraphBuilder::new();
            let x = b.input("x", DataType::Float, dims(&["1", "4", "8", "8"]));
            let c = b.f32("c", &[], &[0.5]);
            let xs = b.op(op, &[x, c], vec![]);
            let w = b.f32("w", &[4, 1, 3, 3], &[0.5; 36]);
            let y = b.op(
                "Conv",
                &[xs, w],
                vec![infopt_ir::Attribute::int("group", group)],
            );
            b.output(y, "y", DataType::Float, None);
            let mut m = b.build(17);
            let before = ops(&m);
            run_passes(&mut m, &["fuse-conv-bn"]);
            assert_eq!(ops(&m), before, "{op}, group {group}");
        }
    }
}
