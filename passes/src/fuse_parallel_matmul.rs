//! Merges MatMuls that multiply the same input by different constant weights.
//!
//! ## What it does
//! `q = MatMul(x, Wq)`, `k = MatMul(x, Wk)`, `v = MatMul(x, Wv)` (attention
//! projections, gate/up projections) become one `MatMul(x, [Wq|Wk|Wv])`
//! followed by a `Split` along the last axis: one large GEMM instead of
//! several small ones, and fewer nodes. The concatenated weight is a new
//! initializer; the old ones become dead. When every one of the MatMuls is
//! read only by an `Add` of a constant bias of its width (`nn.Linear`
//! exported as MatMul + Add), the biases are concatenated too and the one
//! `Add` goes before the `Split`: `Split(Add(MatMul(x, [Wq|Wk|Wv]),
//! [bq|bk|bv]))`, three nodes where there were six.
//!
//! ## When it declines
//! When the weights are not constant 2-D tensors of the same type and the
//! same inner dimension, when fewer than two such MatMuls read the input,
//! before opset 11 (Split needs a negative axis), and when the merged weight
//! would exceed 64 MiB (it is a new copy in memory; large models keep their
//! separate weights). For targets other than `tensorrt`, it also declines
//! the Q/K/V projections of an attention block (a MatMul whose output
//! reaches a Softmax, or the MatMul that reads one, through bias Adds,
//! reshapes, transposes and scales): ONNX Runtime fuses the block into its
//! Attention kernel only when they stay separate (paraphrase-MiniLM-L3 at
//! one thread: 8.4 ms as exported, 9.9 ms with them merged), and
//! `fuse-ort-attention` packs them itself.
//!
//! ## Numerics
//! Exact: each output column is the same dot product, plus the same bias
//! element.
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
use infopt_ir::{Attribute, Graph, Model, Node, NodeId, Patch, PatchValue, Tensor, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::{input, single_reader};
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
    if cx.target != crate::Target::Tensorrt
        && siblings.iter().any(|&n| crate::attention_pattern::projects_attention(g, n))
    {
        crate::decline!(
            "the MatMuls are an attention block's Q/K/V projections: ONNX Runtime fuses the block only when they stay separate"
        );
    }
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
    let biases = bias_adds(g, &siblings, &widths, dtype);
    let node = g.node(id);
    let mut p = Patch::new();
    let w = p.add_initializer(
        &format!("{}.merged_weight", node.name_or_op()),
        Tensor::from_raw(dtype, vec![k, total], Bytes::from(merged)),
    );
    let mut mm = Node::new("MatMul");
    mm.name = Some(format!("{}.merged", node.name_or_op()));
    let mut m = p.add_node(
        mm,
        vec![Some(PatchValue::Existing(x)), Some(w)],
        vec![String::new()],
    );
    // The Split's i-th output replaces what sibling i's reader produced: the
    // MatMul's output, or its bias Add's when the biases move before the Split.
    let mut replaced: Vec<NodeId> = siblings.clone();
    if let Some(adds) = &biases {
        let mut packed = Vec::with_capacity(total as usize * elem);
        for &(_, bias) in adds {
            let t = require_some!(g.constant(bias));
            packed.extend_from_slice(&require_some!(t.raw_bytes().ok()));
        }
        require!(packed.len() == total as usize * elem);
        let b = p.add_initializer(
            &format!("{}.merged_bias", node.name_or_op()),
            Tensor::from_raw(dtype, vec![total], Bytes::from(packed)),
        );
        let mut add = Node::new("Add");
        add.name = Some(format!("{}.merged_bias_add", node.name_or_op()));
        m = p.add_node(
            add,
            vec![Some(PatchValue::NewNode { node: m, output: 0 }), Some(b)],
            vec![String::new()],
        );
        replaced = adds.iter().map(|&(add, _)| add).collect();
        for &n in &siblings {
            p.remove_node(n);
        }
    }
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
    for (i, &n) in replaced.iter().enumerate() {
        let out = require_some!(g.node(n).outputs.first().copied().flatten());
        p.replace(out, PatchValue::NewNode { node: s, output: i });
        p.remove_node(n);
    }
    Outcome::Rewrite(p)
}

/// For each sibling MatMul, its only reader when that is an `Add` of a
/// constant 1-D bias as wide as the MatMul's output, with the bias; `None`
/// unless every sibling has one (the packed Add covers all columns).
fn bias_adds(
    g: &Graph,
    siblings: &[NodeId],
    widths: &[i64],
    dtype: infopt_ir::DataType,
) -> Option<Vec<(NodeId, ValueId)>> {
    siblings
        .iter()
        .zip(widths)
        .map(|(&n, &width)| {
            let out = g.node(n).outputs.first().copied().flatten()?;
            if g.is_graph_output(out) {
                return None;
            }
            let (add, slot) = single_reader(g, out)?;
            let a = g.node(add);
            if !a.is("Add") || a.outputs.len() != 1 {
                return None;
            }
            let bias = input(g, add, 1 - slot as usize)?;
            let t = g.constant(bias)?;
            (t.dims() == [width] && t.dtype() == dtype).then_some((add, bias))
        })
        .collect()
}

impl Pass for FuseParallelMatmul {
    fn name(&self) -> &'static str {
        "fuse-parallel-matmul"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
