//! Fuses a residual Add and the LayerNormalization after it into ONNX Runtime's `com.microsoft.SkipLayerNormalization` (target onnxruntime).
//!
//! ## What it does
//! `s = Add(a, b)`, `y = LayerNormalization(s, gamma, beta)` over the last
//! axis becomes `y = com.microsoft.SkipLayerNormalization(a, b, gamma, beta)`
//! with the same `epsilon`. When one side is itself `Add(m, bias)` with a
//! constant 1-D `bias` of the hidden size (the dense layer before the
//! residual) read only there, the bias moves into the fused node's fifth
//! input. When `s` has other readers (the residual stream of a pre-LN
//! transformer such as GPT-2), they read the fused node's fourth output
//! (`input_skip_bias_sum`) instead. Adds the `com.microsoft` opset import
//! (version 1).
//!
//! With another target the pass changes nothing and leaves a note.
//!
//! ## When it declines
//! It fuses nothing for ONNX Runtime's CPU provider (`--ep cpu`, or no provider
//! named and an installed ONNX Runtime with no other): its
//! SkipLayerNormalization kernel (1.31-1.32) runs 4-9x slower than Add +
//! LayerNormalization (`[1, 128, 384]` at one thread: 198 us against 23 us;
//! all-MiniLM-L6-v2, seven of them: 18.3 ms against 17.0 ms), so the pass
//! leaves the pair and says so in the report's details.
//!
//! Only with target `onnxruntime`, where an Add feeds a LayerNormalization:
//! - the normalization is not over the last axis only, or its Mean /
//!   InvStdDev outputs are used, or `stash_type` is not float;
//! - `a` and `b` are not both 3-D of the same shape (the kernel's
//!   `[B, S, H]` form; dims shape inference could not determine count as
//!   equal, a known 1 against another dim does not) or `[B, S, H]` and
//!   `[1, S, H]` (the kernel broadcasts such a skip: position embeddings),
//!   or the hidden size H is unknown, or `gamma` / `beta` are not 1-D of
//!   size H;
//! - the element type is not float32;
//! - `s` is a graph output;
//! - the normalized output feeds the Q/K/V projections of an attention
//!   block not fused into `Attention`, or the Add sums such a block's
//!   output (ONNX Runtime's own attention fusion matches the
//!   LayerNormalization and the Add, and misses a SkipLayerNormalization in
//!   their place).
//!
//! ## Numerics
//! The same sum and normalization, computed by one kernel in float32:
//! rounding differences only.
//!
//! ## Example
//! `t = Add(MatMul(x, W), b)`, `s = Add(t, residual)`,
//! `y = LayerNormalization(s, g, be, epsilon=1e-12)` becomes
//! `y = SkipLayerNormalization(MatMul(x, W), residual, g, be, b, epsilon=1e-12)`.

crate::register_pass! {
    name: "fuse-skip-layer-norm",
    kind: Fuse,
    file: "fuse_skip_layer_norm.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseSkipLayerNorm,
}

use infopt_ir::{Attribute, DataType, Dim, Graph, Model, Node, NodeId, Patch, PatchValue, ValueId};

use crate::attention_pattern::{dims, feeds_unfused_attention, reads_attention_output};
use crate::pass::{Pass, PassCx, PassError};
use crate::rule::Outcome;
use crate::util::{
    MS_DOMAIN, carry_type, dtype_of, input, node_label, output, single_reader,
};
use crate::{decline, require, require_some};

pub struct FuseSkipLayerNorm;

/// A constant 1-D float32 tensor of length `n`.
fn vector_of(g: &Graph, v: ValueId, n: i64) -> bool {
    g.constant(v)
        .is_some_and(|t| t.dtype() == DataType::Float && t.dims() == [n])
}

/// `v = Add(m, bias)` (either order) with a constant `[n]` bias, read once:
/// `(m, bias, the Add)`.
fn biased(g: &Graph, v: ValueId, n: i64) -> Option<(ValueId, ValueId, NodeId)> {
    single_reader(g, v)?;
    let (id, _) = g.value(v).producer?;
    if !g.node(id).is("Add") {
        return None;
    }
    let (a, b) = (input(g, id, 0)?, input(g, id, 1)?);
    if vector_of(g, b, n) && g.constant(a).is_none() {
        Some((a, b, id))
    } else if vector_of(g, a, n) && g.constant(b).is_none() {
        Some((b, a, id))
    } else {
        None
    }
}

fn rule(g: &Graph, id: NodeId, _cx: &mut PassCx) -> Outcome {
    let ln = g.node(id);
    require!(ln.is("LayerNormalization"));
    let s = require_some!(input(g, id, 0));
    let (add, _) = require_some!(g.value(s).producer);
    require!(g.node(add).is("Add"));
    if ln.outputs.iter().skip(1).flatten().any(|&o| g.reader_count(o) > 0) {
        decline!("the LayerNormalization's Mean / InvStdDev outputs are used");
    }
    if ln.attr_int_or("stash_type", 1).unwrap_or(0) != 1 {
        decline!("stash_type is not float");
    }
    if g.is_graph_output(s) {
        decline!("the residual sum is a graph output");
    }
    let after_attention = [input(g, add, 0), input(g, add, 1)]
        .into_iter()
        .flatten()
        .any(|v| reads_attention_output(g, v));
    if feeds_unfused_attention(g, id) || after_attention {
        decline!(
            "it is next to an attention block that ONNX Runtime fuses itself from a LayerNormalization and Add (fuse-ort-attention did not fuse it)"
        );
    }
    let (Some(a), Some(b)) = (input(g, add, 0), input(g, add, 1)) else {
        return Outcome::Skip;
    };
    let (Some(da), Some(db)) = (dims(g, a), dims(g, b)) else {
        decline!("shapes of the Add's operands are unknown");
    };
    // Both [B, S, H] (dims inference lost may stand for each other; a known
    // broadcast dim of 1 on one side declines: the kernel adds same shapes).
    let same = |x: &Dim, y: &Dim| match (x, y) {
        (Dim::Unknown, Dim::Known(1)) | (Dim::Known(1), Dim::Unknown) => false,
        (Dim::Unknown, _) | (_, Dim::Unknown) => true,
        _ => x == y,
    };
    if da.len() != 3 || db.len() != 3 {
        decline!("the Add's operands are not both 3-D");
    }
    // The kernel also takes a skip of shape [1, S, H] (position embeddings).
    let broadcast_skip = |full: &[Dim], skip: &[Dim]| {
        matches!(skip[0], Dim::Known(1))
            && !matches!(full[0], Dim::Known(1))
            && same(&full[1], &skip[1])
            && full[2] == skip[2]
    };
    let (a, b, da, db, skip_broadcast) = if da.iter().zip(&db).all(|(x, y)| same(x, y)) {
        (a, b, da, db, false)
    } else if broadcast_skip(&da, &db) {
        (a, b, da, db, true)
    } else if broadcast_skip(&db, &da) {
        (b, a, db, da, true)
    } else {
        decline!("the Add's operands are not both 3-D of the same shape (or [B,S,H] and [1,S,H])");
    };
    let (Dim::Known(hidden), Dim::Known(h2)) = (&da[2], &db[2]) else {
        decline!("the hidden size is not known");
    };
    if hidden != h2 {
        decline!("the Add's operands have different hidden sizes");
    }
    let hidden = *hidden;
    let axis = ln.attr_int_or("axis", -1).unwrap_or(0);
    if axis != -1 && axis != 2 {
        decline!("LayerNormalization over axis {axis}, not the last one");
    }
    if dtype_of(g, a) != Some(DataType::Float) {
        decline!("element type is not float32");
    }
    let gamma = require_some!(input(g, id, 1));
    let beta = input(g, id, 2);
    if !vector_of(g, gamma, hidden) || beta.is_some_and(|b| !vector_of(g, b, hidden)) {
        decline!("gamma / beta are not constant 1-D float32 of size {hidden}");
    }
    // A dense bias on either side moves into the fused node.
    // (The other operand must have the sum's shape itself, not broadcast to it.)
    let full = |c: Option<(ValueId, ValueId, NodeId)>| {
        c.filter(|(m, _, _)| {
            dims(g, *m).is_some_and(|dm| dm.len() == 3 && dm.iter().zip(&da).all(|(x, y)| same(x, y)) && dm[2] == da[2])
        })
    };
    let on_b = if skip_broadcast { None } else { full(biased(g, b, hidden)) };
    let (input0, skip, bias) = match (full(biased(g, a, hidden)), on_b) {
        (Some((m, bias, add)), _) => (m, b, Some((bias, add))),
        (None, Some((m, bias, add))) => (m, a, Some((bias, add))),
        _ => (a, b, None),
    };
    let y = require_some!(output(g, id, 0));
    let mut node = Node::new("SkipLayerNormalization");
    node.domain = Some(MS_DOMAIN.to_string());
    node.name = Some(node_label(g, id));
    node.set_attr(Attribute::float(
        "epsilon",
        ln.attr_float_or("epsilon", 1e-5).unwrap_or(1e-5),
    ));
    let mut inputs = vec![
        Some(PatchValue::Existing(input0)),
        Some(PatchValue::Existing(skip)),
        Some(PatchValue::Existing(gamma)),
        beta.map(PatchValue::Existing),
    ];
    if let Some((bias, _)) = bias {
        inputs.push(Some(PatchValue::Existing(bias)));
    }
    // Other readers of the sum read the fused node's fourth output.
    let sum_read_elsewhere = g.reader_count(s) > 1;
    let mut names = vec![String::new()];
    if sum_read_elsewhere {
        names.extend([String::new(), String::new(), String::new()]);
    }
    let mut p = Patch::new();
    let n = p.add_node(node, inputs, names);
    let out = PatchValue::NewNode { node: n, output: 0 };
    p.replace(y, out);
    carry_type(&mut p, g, y, out);
    if sum_read_elsewhere {
        let sum = PatchValue::NewNode { node: n, output: 3 };
        p.replace(s, sum);
        carry_type(&mut p, g, s, sum);
    }
    p.remove_node(id);
    p.remove_node(add);
    if let Some((_, add)) = bias {
        p.remove_node(add);
    }
    Outcome::Rewrite(p)
}

impl Pass for FuseSkipLayerNorm {
    fn name(&self) -> &'static str {
        "fuse-skip-layer-norm"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        if cx.target == crate::Target::Onnxruntime
            && let Some(why) = cx.cpu_only_reason()
        {
            let text = format!(
                "fuse-skip-layer-norm left Add + LayerNormalization unfused: {why}, where SkipLayerNormalization runs slower than the two ops it replaces (ONNX Runtime 1.31-1.32, [1, 128, 384] at one thread: 198 us against 23 us); naming a GPU provider fuses them"
            );
            cx.not_applied(text);
            return Ok(0);
        }
        crate::util::run_contrib_fusion(self.name(), "com.microsoft.SkipLayerNormalization", model, cx, &rule)
    }
}
