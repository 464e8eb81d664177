//! Replaces the strided Slices + Concat of a "Focus" layer with `SpaceToDepth` (and a channel `Gather`).
//!
//! ## What it does
//! YOLOv5-style detectors start with `Concat(x[..., ::2, ::2], x[..., 1::2, ::2],
//! x[..., ::2, 1::2], x[..., 1::2, 1::2], axis=1)`: every 2×2 block of pixels
//! moved into channels. That is `SpaceToDepth(x, blocksize=2)` up to the order
//! of the channel groups: SpaceToDepth puts the group of row offset `a` and
//! column offset `b` at position `a·bs + b`. When the Concat lists the groups
//! in that order, the SpaceToDepth is the result; otherwise a `Gather` on the
//! channel axis puts them in the Concat's order. This is the rewrite ONNX
//! Runtime makes at its extended level; done ahead of time, `bs²` Slices and
//! a Concat become one or two nodes. The Concat's output keeps its name; the
//! new nodes take the Concat's name.
//!
//! ## When it declines
//! When the Concat is not along the channel axis of a rank-4 tensor, or its
//! inputs are not `bs²` Slices (bs ≥ 2) of one tensor, each read only by the
//! Concat, cutting the last two axes with step `bs`, starts in `[0, bs)` and
//! ends at or past the axis end, one per offset pair; when a Gather is needed
//! and the channel count is not known; before opset 10 (Slice takes
//! attributes there).
//!
//! ## Numerics
//! Exact: the same elements are copied. The Slices of an axis whose length is
//! not a multiple of `bs` differ in length, so the original Concat fails
//! there; SpaceToDepth fails on the same inputs.
//!
//! ## Example
//! `Concat(Slice(x, [0,0], [M,M], [2,3], [2,2]), Slice(x, [1,0], …),
//! Slice(x, [0,1], …), Slice(x, [1,1], …), axis=1)` with `x: [1, 3, 416, 416]`
//! becomes `Gather(SpaceToDepth(x, blocksize=2), [0,1,2, 6,7,8, 3,4,5, 9,10,11], axis=1)`.

crate::register_pass! {
    name: "fuse-space-to-depth",
    kind: Fuse,
    file: "fuse_space_to_depth.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseSpaceToDepth,
}

use infopt_ir::{Attribute, Dim, Graph, Model, Node, NodeId, Patch, PatchValue, Tensor, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::{const_i64s, input, node_label};
use crate::{decline, require, require_some};

pub struct FuseSpaceToDepth;

/// Ends at or past this are "to the end" whatever the axis length
/// (exporters write INT32_MAX or INT64_MAX).
const TO_THE_END: i64 = i32::MAX as i64;

/// A Slice of a rank-4 `x` that cuts axes 2 and 3 with step `bs` from the
/// offsets it returns, `(row, column)`, to their ends.
fn block_offsets(g: &Graph, id: NodeId, dims: &[Dim], bs: i64) -> Option<(i64, i64)> {
    let node = g.node(id);
    if !(node.is("Slice") && node.domain().is_empty()) || node.outputs.len() != 1 {
        return None;
    }
    let starts = const_i64s(g, input(g, id, 1))?;
    let ends = const_i64s(g, input(g, id, 2))?;
    let axes = const_i64s(g, input(g, id, 3))?;
    let steps = const_i64s(g, input(g, id, 4))?;
    if starts.len() != 2 || ends.len() != 2 || axes.len() != 2 || steps != [bs, bs] {
        return None;
    }
    let mut offsets = [None, None];
    for i in 0..2 {
        let axis = if axes[i] < 0 { axes[i] + 4 } else { axes[i] };
        let slot = usize::try_from(axis - 2).ok().filter(|&s| s < 2)?;
        let reaches_end = ends[i] >= TO_THE_END
            || matches!(dims[slot + 2], Dim::Known(n) if ends[i] >= n);
        if offsets[slot].is_some() || !(0..bs).contains(&starts[i]) || !reaches_end {
            return None;
        }
        offsets[slot] = Some(starts[i]);
    }
    Some((offsets[0]?, offsets[1]?))
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let concat = g.node(id);
    require!(concat.is("Concat") && concat.domain().is_empty() && cx.opset >= 10);
    let parts: Option<Vec<ValueId>> = concat.inputs.iter().copied().collect();
    let parts = require_some!(parts);
    let k = parts.len() as i64;
    let bs = require_some!((2..=8).find(|&b| b * b == k));
    let first = require_some!(g.value(parts[0]).producer).0;
    require!(g.node(first).is("Slice"));
    let x = require_some!(input(g, first, 0));
    let dims = require_some!(g.value_type(x).and_then(|t| t.shape));
    require!(dims.len() == 4);
    let axis = concat.attr_int_or("axis", 0).unwrap_or(0);
    require!(axis == 1 || axis == -3);
    // The block offset of each Concat input, in the Concat's order.
    let mut order: Vec<i64> = Vec::with_capacity(parts.len());
    for &v in &parts {
        let (slice, _) = require_some!(g.value(v).producer);
        require!(input(g, slice, 0) == Some(x));
        let (a, b) = require_some!(block_offsets(g, slice, &dims, bs));
        if g.reader_count(v) != 1 || g.is_graph_output(v) {
            decline!(
                "Slice output '{}' is read outside the Concat",
                g.value(v).name
            );
        }
        order.push(a * bs + b);
    }
    let mut seen = order.clone();
    seen.sort();
    seen.dedup();
    require!(seen.len() == parts.len());
    let natural = order.iter().enumerate().all(|(i, &o)| o == i as i64);
    let channels = match dims[1] {
        Dim::Known(c) => Some(c),
        _ => None,
    };
    if !natural && channels.is_none() {
        decline!(
            "the channel count of '{}' is not known: the block order needs a Gather over the channels",
            g.value(x).name
        );
    }
    let out = require_some!(concat.outputs.first().copied().flatten());
    let name = node_label(g, id);
    let mut p = Patch::new();
    let mut s2d = Node::new("SpaceToDepth");
    s2d.name = Some(if natural {
        name.clone()
    } else {
        format!("{name}.space_to_depth")
    });
    s2d.set_attr(Attribute::int("blocksize", bs));
    let s = p.add_node(s2d, vec![Some(PatchValue::Existing(x))], vec![String::new()]);
    let result = if natural {
        PatchValue::NewNode { node: s, output: 0 }
    } else {
        let c = channels.unwrap_or(0);
        let indices: Vec<i64> = order
            .iter()
            .flat_map(|&o| (0..c).map(move |ch| o * c + ch))
            .collect();
        let t = Tensor::from_i64(vec![indices.len() as i64], &indices);
        let idx = p.add_initializer(&format!("{name}.channel_order"), t);
        let mut gather = Node::new("Gather");
        gather.name = Some(name);
        gather.set_attr(Attribute::int("axis", 1));
        let gn = p.add_node(
            gather,
            vec![Some(PatchValue::NewNode { node: s, output: 0 }), Some(idx)],
            vec![String::new()],
        );
        PatchValue::NewNode {
            node: gn,
            output: 0,
        }
    };
    p.replace(out, result);
    p.remove_node(id);
    for &v in &parts {
        if let Some((slice, _)) = g.value(v).producer {
            p.remove_node(slice);
        }
    }
    Outcome::Rewrite(p)
}

impl Pass for FuseSpaceToDepth {
    fn name(&self) -> &'static str {
        "fuse-space-to-depth"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
