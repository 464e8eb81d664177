//! Fuses BERT's embedding lookups and the LayerNormalization after them into ONNX Runtime's `com.microsoft.EmbedLayerNormalization` (target onnxruntime).
//!
//! ## What it does
//! `LayerNormalization(Gather(W, ids) + Gather(T, segment_ids) + Gather(P,
//! positions))` over the last axis, where `positions` are provably `0 ..
//! S-1` for the sequence length S of `ids` (a Slice `[:, 0:S]` of a constant
//! `[1, N]` table holding `0, 1, ..., N-1`, as transformers registers
//! `position_ids`), becomes
//! `EmbedLayerNormalization(Cast(ids, int32), Cast(segment_ids, int32), W, P, T, gamma, beta)`
//! with the same epsilon (the token-type lookup is optional). The kernel
//! takes int32 ids, hence the Casts. The sum may be in any order. Adds the
//! `com.microsoft` opset import (version 1).
//!
//! With another target the pass changes nothing and leaves a note.
//!
//! ## When it declines
//! Only with target `onnxruntime`, where the LayerNormalization reads such a
//! sum of Gathers: when the positions are not provably `0 .. S-1`, the ids
//! are not 2-D int64 (or int32), the tables are not constant 2-D float32
//! of the hidden size, the sum or a lookup has other readers, or the
//! normalization is not over the last axis only; and when the normalized
//! output feeds the Q/K/V projections of an attention block not fused into
//! `Attention` (ONNX Runtime's own attention fusion starts from that
//! LayerNormalization).
//!
//! ## Numerics
//! The same lookups, sum and normalization in one float32 kernel (the sum's
//! order may differ: rounding only). Ids out of a table's range are an error
//! in both; negative ids, which `Gather` counts from the end, are out of
//! range for the fused kernel.
//!
//! ## Example
//! BERT's embeddings (3 Gather, 2 Add, the position Slice, LayerNormalization)
//! become `EmbedLayerNormalization` and two Casts.

crate::register_pass! {
    name: "fuse-embed-layer-norm",
    kind: Fuse,
    file: "fuse_embed_layer_norm.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseEmbedLayerNorm,
}

use infopt_ir::{Attribute, DataType, Graph, Model, Node, NodeId, Patch, PatchValue, ValueId};

use crate::attention_pattern::{ShapeElem, feeds_unfused_attention, shape_elems};
use crate::pass::{Pass, PassCx, PassError};
use crate::rule::Outcome;
use crate::util::{
    MS_DOMAIN, carry_type, const_i64s, dtype_of, input, node_label, output,
    single_reader,
};
use crate::{decline, require, require_some};

pub struct FuseEmbedLayerNorm;

/// A lookup `Gather(table, ids)` (axis 0) with a constant 2-D float32 table
/// of width `hidden`, read once: `(table, ids, the Gather)`.
fn lookup(g: &Graph, v: ValueId, hidden: i64) -> Option<(ValueId, ValueId, NodeId)> {
    single_reader(g, v)?;
    let (id, _) = g.value(v).producer?;
    let n = g.node(id);
    if !n.is("Gather") || n.attr_int_or("axis", 0).ok()? != 0 {
        return None;
    }
    let table = input(g, id, 0)?;
    let t = g.constant(table)?;
    if t.dtype() != DataType::Float || t.dims().len() != 2 || t.dims()[1] != hidden {
        return None;
    }
    Some((table, input(g, id, 1)?, id))
}

/// The terms of a sum tree of Adds (inner sums read once), with the Adds.
fn terms(g: &Graph, v: ValueId, root: bool, out: &mut Vec<ValueId>, adds: &mut Vec<NodeId>) {
    let inner_ok = root || single_reader(g, v).is_some();
    match g.value(v).producer {
        Some((id, _)) if inner_ok && g.node(id).is("Add") && adds.len() < 4 => {
            adds.push(id);
            for i in 0..2 {
                if let Some(x) = input(g, id, i) {
                    terms(g, x, false, out, adds);
                }
            }
        }
        _ => out.push(v),
    }
}

/// `pos` is `Slice(C, [0], [S], [1])` of a constant `[1, N]` int64 table
/// holding `0..N-1`, with S the sequence length (dim 1) of `ids`: returns
/// the Slice.
fn positions_of(g: &Graph, pos: ValueId, ids: ValueId) -> Option<NodeId> {
    single_reader(g, pos)?;
    let (id, _) = g.value(pos).producer?;
    if !g.node(id).is("Slice") {
        return None;
    }
    let table = g.constant(input(g, id, 0)?)?;
    if table.dims().len() != 2 || table.dims()[0] != 1 {
        return None;
    }
    let values = table.to_i64_vec().ok()?;
    if values.iter().enumerate().any(|(i, &v)| v != i as i64) {
        return None;
    }
    if const_i64s(g, input(g, id, 1))? != [0] {
        return None;
    }
    let axes = match input(g, id, 3) {
        Some(a) => const_i64s(g, Some(a))?,
        None => vec![0],
    };
    if axes != [1] && axes != [-1] {
        return None;
    }
    if let Some(steps) = input(g, id, 4)
        && const_i64s(g, Some(steps))? != [1]
    {
        return None;
    }
    let end = shape_elems(g, input(g, id, 2)?)?;
    (end == [ShapeElem::DimOf(ids, 1)]).then_some(id)
}

fn int_ids(g: &Graph, v: ValueId) -> bool {
    let Some(t) = g.value_type(v) else {
        return false;
    };
    matches!(t.dtype, DataType::Int64 | DataType::Int32)
        && t.shape.as_ref().is_some_and(|s| s.len() == 2)
}

fn rule(g: &Graph, id: NodeId, _cx: &mut PassCx) -> Outcome {
    let ln = g.node(id);
    require!(ln.is("LayerNormalization"));
    let s = require_some!(input(g, id, 0));
    let (top, _) = require_some!(g.value(s).producer);
    require!(g.node(top).is("Add"));
    let mut ts = Vec::new();
    let mut adds = Vec::new();
    terms(g, s, true, &mut ts, &mut adds);
    require!(ts.len() == 2 || ts.len() == 3);
    if feeds_unfused_attention(g, id) {
        decline!(
            "its output feeds an attention block's projections that ONNX Runtime fuses itself from a LayerNormalization (fuse-ort-attention did not fuse it)"
        );
    }
    let gamma = require_some!(input(g, id, 1));
    let Some(hidden) = g.constant(gamma).and_then(|t| t.dims().first().copied()) else {
        return Outcome::Skip;
    };
    let looked: Option<Vec<(ValueId, ValueId, NodeId)>> =
        ts.iter().map(|&t| lookup(g, t, hidden)).collect();
    let looked = require_some!(looked);
    // Which lookup reads positions: the one whose indices are 0..S-1 of
    // another lookup's ids.
    let mut found = None;
    for (pi, p) in looked.iter().enumerate() {
        for (wi, w) in looked.iter().enumerate() {
            if pi != wi
                && int_ids(g, w.1)
                && let Some(slice) = positions_of(g, p.1, w.1)
            {
                found = Some((pi, wi, slice));
            }
        }
    }
    let Some((pi, wi, slice)) = found else {
        decline!("the embedding sum has no position lookup provably over 0..S-1 of the ids");
    };
    if g.is_graph_output(s) || g.reader_count(s) != 1 {
        decline!("the embedding sum has other readers");
    }
    if ln.outputs.iter().skip(1).flatten().any(|&o| g.reader_count(o) > 0) {
        decline!("the LayerNormalization's Mean / InvStdDev outputs are used");
    }
    let axis = ln.attr_int_or("axis", -1).unwrap_or(0);
    if axis != -1 && axis != 2 {
        decline!("LayerNormalization over axis {axis}, not the last one");
    }
    if dtype_of(g, s) != Some(DataType::Float) {
        decline!("element type is not float32");
    }
    let Some(beta) = input(g, id, 2) else {
        decline!("the LayerNormalization has no bias (EmbedLayerNormalization requires beta)");
    };
    let segment = (0..looked.len()).find(|&i| i != pi && i != wi);
    if let Some(si) = segment
        && !int_ids(g, looked[si].1)
    {
        decline!("segment ids are not 2-D integers");
    }
    let word = &looked[wi];
    let label = node_label(g, id);
    let mut p = Patch::new();
    let cast = |p: &mut Patch, ids: ValueId, what: &str| -> PatchValue {
        if g.value_type(ids).is_some_and(|t| t.dtype == DataType::Int32) {
            return PatchValue::Existing(ids);
        }
        let mut c = Node::new("Cast");
        c.name = Some(format!("{label}.{what}_int32"));
        c.set_attr(Attribute::int("to", DataType::Int32.code() as i64));
        let n = p.add_node(
            c,
            vec![Some(PatchValue::Existing(ids))],
            vec![format!("{label}.{what}_int32")],
        );
        PatchValue::NewNode { node: n, output: 0 }
    };
    let ids32 = cast(&mut p, word.1, "ids");
    let seg32 = segment.map(|si| cast(&mut p, looked[si].1, "segment_ids"));
    let mut node = Node::new("EmbedLayerNormalization");
    node.domain = Some(MS_DOMAIN.to_string());
    node.name = Some(label.clone());
    node.set_attr(Attribute::float(
        "epsilon",
        ln.attr_float_or("epsilon", 1e-5).unwrap_or(1e-5),
    ));
    let inputs = vec![
        Some(ids32),
        seg32,
        Some(PatchValue::Existing(word.0)),
        Some(PatchValue::Existing(looked[pi].0)),
        segment.map(|si| PatchValue::Existing(looked[si].0)),
        Some(PatchValue::Existing(gamma)),
        Some(PatchValue::Existing(beta)),
    ];
    let y = require_some!(output(g, id, 0));
    // ONNX Runtime's shape inference requires the mask_index output even
    // without a mask: it is left unread.
    let n = p.add_node(node, inputs, vec![String::new(), format!("{label}.mask_index")]);
    let out = PatchValue::NewNode { node: n, output: 0 };
    p.replace(y, out);
    carry_type(&mut p, g, y, out);
    p.remove_node(id);
    for a in adds {
        p.remove_node(a);
    }
    for l in &looked {
        p.remove_node(l.2);
    }
    p.remove_node(slice);
    Outcome::Rewrite(p)
}

impl Pass for FuseEmbedLayerNorm {
    fn name(&self) -> &'static str {
        "fuse-embed-layer-norm"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        crate::util::run_contrib_fusion(self.name(), "com.microsoft.EmbedLayerNormalization", model, cx, &rule)
    }
}
