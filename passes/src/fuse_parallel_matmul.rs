//! Merges MatMuls that multiply the same input by different constant weights.
//!
//! ## What it does
//! `q = MatMul(x, Wq)`, `k = MatMul(x, Wk)`, `v = MatMul(x, Wv)` (attention
//! projections, gate/up projections) become one `MatMul(x, [Wq|Wk|Wv])`
//! followed by a `Split` along the last axis: one large GEMM instead of
//! several small ones, and fewer nodes. The concatenated weight is a new
//! initializer; the old ones become dead.
//!
//! ## When it declines
//! When the weights are not constant 2-D tensors of the same type and the
//! same inner dimension, when fewer than two such MatMuls read the input,
//! before opset 11 (Split needs a negative axis), and when the merged weight
//! would exceed 64 MiB (it is a new copy in memory; large models keep their
//! separate weights).
//!
//! ## Numerics
//! Exact: each output column is the same dot product.
//!
//! ## Example
//! Three `MatMul(x, W[64x64])` become `Split(MatMul(x, W[64x192]), [64,64,64])`.

crate::register_pass! {
    name: "fuse-parallel-matmul",
    kind: Fuse,
    file: "fuse_parallel_matmul.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseParallelMatmul,
}

use bytes::Bytes;
use infopt_ir::{Attribute, Graph, Model, Node, NodeId, Patch, PatchValue, Tensor};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::input;
use crate::{require, require_some};

pub struct FuseParallelMatmul;

/// Largest merged weight this pass materializes.
const MAX_MERGED_BYTES: usize = 64 << 20;

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    require!(g.node(id).is("MatMul") && cx.opset >= 11);
    let x = require_some!(input(g, id, 0));
    let weight_of = |n: NodeId| -> Option<&Tensor> {
        let node = g.node(n);
        if !node.is("MatMul") || input(g, n, 0) != Some(x) || node.outputs.len() != 1 {
            return None;
        }
        let w = g.constant(input(g, n, 1)?)?;
        (w.dims().len() == 2).then_some(w)
    };
    let first_w = require_some!(weight_of(id));
    let (k, dtype) = (first_w.dims()[0], first_w.dtype());
    let elem = require_some!(dtype.bit_width()).div_ceil(8);
    require!(dtype.bit_width().is_some_and(|b| b % 8 == 0));
    // The siblings in graph order; the rule fires at the first one only.
    let mut siblings: Vec<NodeId> = g
        .input_uses(x)
        .filter(|&(n, slot)| {
            slot == 0 && weight_of(n).is_some_and(|w| w.dims()[0] == k && w.dtype() == dtype)
        })
        .map(|(n, _)| n)
        .collect();
    siblings.sort_by_key(|&n| g.position(n));
    siblings.dedup();
    require!(siblings.len() >= 2 && siblings[0] == id);
    let widths: Vec<i64> = siblings
        .iter()
        .map(|&n| weight_of(n).map_or(0, |w| w.dims()[1]))
        .collect();
    let total: i64 = widths.iter().sum();
    let bytes_total = (k * total) as usize * elem;
    if bytes_total > MAX_MERGED_BYTES {
        crate::decline!("merged weight would be {bytes_total} bytes, over {MAX_MERGED_BYTES}");
    }
    // Row r of the merged weight is row r of each weight in turn. The
    // weights are read where they lie (the mapped model), not copied first.
    let mut raws = Vec::with_capacity(siblings.len());
    for &n in &siblings {
        let w = require_some!(weight_of(n));
        raws.push(require_some!(w.raw_bytes().ok()));
    }
    let rows = k as usize;
    for (raw, &n) in raws.iter().zip(&widths) {
        require!(raw.len() == rows * n as usize * elem);
    }
    let merged = crate::par::fill_rows(rows, bytes_total / rows.max(1), |first, piece| {
        let mut at = 0;
        for r in first..first + piece.len() / (total as usize * elem).max(1) {
            for (raw, &n) in raws.iter().zip(&widths) {
                let row = n as usize * elem;
                piece[at..at + row].copy_from_slice(&raw[r * row..(r + 1) * row]);
                at += row;
            }
        }
    });
    let node = g.node(id);
    let mut p = Patch::new();
    let w = p.add_initializer(
        &format!("{}.merged_weight", node.name_or_op()),
        Tensor::from_raw(dtype, vec![k, total], Bytes::from(merged)),
    );
    let mut mm = Node::new("MatMul");
    mm.name = Some(format!("{}.merged", node.name_or_op()));
    let m = p.add_node(
        mm,
        vec![Some(PatchValue::Existing(x)), Some(w)],
        vec![String::new()],
    );
    let mut split = Node::new("Split");
    split.name = Some(format!("{}.split", node.name_or_op()));
    split.set_attr(Attribute::int("axis", -1));
    let mut split_inputs = vec![Some(PatchValue::NewNode { node: m, output: 0 })];
    if cx.opset >= 13 {
        let sizes = Tensor::from_i64(vec![widths.len() as i64], &widths);
        split_inputs.push(Some(
            p.add_initializer(&format!("{}.split_sizes", node.name_or_op()), sizes),
        ));
    } else {
        split.set_attr(Attribute::ints("split", widths.clone()));
    }
    let s = p.add_node(split, split_inputs, vec![String::new(); siblings.len()]);
    for (i, &n) in siblings.iter().enumerate() {
        let out = require_some!(g.node(n).outputs.first().copied().flatten());
        p.replace(out, PatchValue::NewNode { node: s, output: i });
        p.remove_node(n);
    }
    Outcome::Rewrite(p)
}

impl Pass for FuseParallelMatmul {
    fn name(&self) -> &'static str {
        "fuse-parallel-matmul"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
