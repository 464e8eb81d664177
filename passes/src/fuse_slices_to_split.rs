//! Replaces Slices that cut one tensor into consecutive pieces along an axis with one `Split`.
//!
//! ## What it does
//! `a = Slice(x, [0], [2], [1])`, `b = Slice(x, [2], [4], [1])` on an `x`
//! whose axis 1 has 4 elements become `a, b = Split(x, [2, 2], axis=1)`: the
//! box/class cut of YOLOv8's head, written as Slices by its exporter. This is
//! the rewrite ONNX Runtime's `GatherSliceToSplitFusion` makes at its
//! extended level; done ahead of time, the saved model is what the runtime
//! runs, with one node instead of several. The outputs keep their names;
//! the Split takes the first Slice's name.
//!
//! ## When it declines
//! When a Slice's starts, ends, axes or steps are not constants, cut more
//! than one axis or use a step other than 1; when the axis length is not
//! known; when the Slices along that axis do not cover it exactly once, end
//! to end (a gap, an overlap, or a single Slice); before opset 10 (Slice
//! takes attributes there).
//!
//! ## Numerics
//! Exact: the same elements are copied.
//!
//! ## Example
//! `Slice(x[1,4,8400], 0, 2, axis 1)` and `Slice(x, 2, 4, axis 1)` become
//! `Split(x, [2, 2], axis=1)`.

crate::register_pass! {
    name: "fuse-slices-to-split",
    kind: Fuse,
    file: "fuse_slices_to_split.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseSlicesToSplit,
}

use infopt_ir::{Attribute, Dim, Graph, Model, Node, NodeId, Patch, PatchValue, Tensor, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::{const_i64s, input, node_label};
use crate::{decline, require, require_some};

pub struct FuseSlicesToSplit;

/// One Slice of `x` along a single axis with step 1: (axis, start, end),
/// normalized against the axis length and the rank.
fn cut(g: &Graph, id: NodeId, rank: usize, dims: &[Dim]) -> Option<(usize, i64, i64)> {
    let node = g.node(id);
    if !(node.is("Slice") && node.domain().is_empty()) || node.outputs.len() != 1 {
        return None;
    }
    let starts = const_i64s(g, input(g, id, 1))?;
    let ends = const_i64s(g, input(g, id, 2))?;
    let axes = match input(g, id, 3) {
        Some(v) => const_i64s(g, Some(v))?,
        None => vec![0],
    };
    if let Some(v) = input(g, id, 4)
        && const_i64s(g, Some(v))? != [1]
    {
        return None;
    }
    if starts.len() != 1 || ends.len() != 1 || axes.len() != 1 {
        return None;
    }
    let axis = if axes[0] < 0 {
        axes[0].checked_add(rank as i64)?
    } else {
        axes[0]
    };
    let axis = usize::try_from(axis).ok().filter(|&a| a < rank)?;
    let Dim::Known(n) = dims[axis] else {
        return None;
    };
    // ONNX: a negative index counts from the end; both clamp to [0, n].
    let clamp = |v: i64| {
        let v = if v < 0 { v.saturating_add(n) } else { v };
        v.clamp(0, n)
    };
    let (s, e) = (clamp(starts[0]), clamp(ends[0]));
    (s < e).then_some((axis, s, e))
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    require!(g.node(id).is("Slice") && g.node(id).domain().is_empty() && cx.opset >= 10);
    let x = require_some!(input(g, id, 0));
    let dims = require_some!(g.value_type(x).and_then(|t| t.shape));
    let (axis, _, _) = require_some!(cut(g, id, dims.len(), &dims));
    let Dim::Known(n) = dims[axis] else {
        return Outcome::Skip;
    };
    // Every Slice of x along this axis, in order of start.
    let mut pieces: Vec<(i64, i64, NodeId)> = Vec::new();
    for (reader, _) in g.input_uses(x) {
        if pieces.iter().any(|p| p.2 == reader) || input(g, reader, 0) != Some(x) {
            continue;
        }
        if let Some((a, s, e)) = cut(g, reader, dims.len(), &dims)
            && a == axis
        {
            pieces.push((s, e, reader));
        }
    }
    require!(pieces.len() >= 2);
    pieces.sort();
    // Rewrite once, at the first piece.
    require!(pieces[0].2 == id);
    let tiles = pieces[0].0 == 0
        && pieces.last().is_some_and(|p| p.1 == n)
        && pieces.windows(2).all(|w| w[0].1 == w[1].0);
    if !tiles {
        decline!(
            "the Slices of '{}' along axis {axis} do not cover its {n} elements end to end",
            g.value(x).name
        );
    }
    let sizes: Vec<i64> = pieces.iter().map(|(s, e, _)| e - s).collect();
    let mut p = Patch::new();
    let mut split = Node::new("Split");
    split.name = Some(node_label(g, id));
    split.set_attr(Attribute::int("axis", axis as i64));
    let mut inputs = vec![Some(PatchValue::Existing(x))];
    if cx.opset >= 13 {
        let t = Tensor::from_i64(vec![sizes.len() as i64], &sizes);
        inputs.push(Some(p.add_initializer(&format!("{}.split", node_label(g, id)), t)));
    } else {
        split.set_attr(Attribute::ints("split", sizes.clone()));
    }
    let s = p.add_node(split, inputs, vec![String::new(); pieces.len()]);
    for (i, &(_, _, slice)) in pieces.iter().enumerate() {
        let out: ValueId = require_some!(g.node(slice).outputs.first().copied().flatten());
        p.replace(out, PatchValue::NewNode { node: s, output: i });
        p.remove_node(slice);
    }
    Outcome::Rewrite(p)
}

impl Pass for FuseSlicesToSplit {
    fn name(&self) -> &'static str {
        "fuse-slices-to-split"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
