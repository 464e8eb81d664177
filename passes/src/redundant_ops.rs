//! Rules of `eliminate-identity` for a node made redundant by the node before
//! it: an idempotent op applied twice, a strictly increasing op under
//! ArgMax/ArgMin, a Concat spliced into the Concat after it, `Log(Softmax)`,
//! a reduction without kept dims whose dims an Unsqueeze puts back,
//! `Where(Not(c))`, and Concat inputs empty along the axis.

use infopt_ir::{Attribute, Graph, Node, NodeId, PatchValue, ValueId};

use crate::rule::Outcome;
use crate::util::{const_i64s, input, output, replace_with_node, single_reader};
use crate::{require, require_some};

/// The producer of `v` when it is a default-domain node of one of `ops`
/// whose only reader is the node at hand (so the pair can become one node).
fn sole_producer<'g>(g: &'g Graph, v: ValueId, ops: &[&str]) -> Option<(NodeId, &'g Node)> {
    let (p, _) = g.value(v).producer?;
    let node = g.node(p);
    (node.domain().is_empty() && ops.contains(&node.op_type.as_str())).then_some(())?;
    single_reader(g, v)?;
    Some((p, node))
}

fn rank(g: &Graph, v: ValueId) -> Option<usize> {
    g.value_type(v)?.shape.map(|s| s.len())
}

/// `axis` as a non-negative index; `None` when it is outside the rank (or
/// negative with the rank unknown): such a node fails at run time, and no
/// rewrite anchored on it is exact.
fn normalize(axis: i64, rank: Option<usize>) -> Option<i64> {
    let a = if axis >= 0 {
        axis
    } else {
        axis.checked_add(i64::try_from(rank?).ok()?)?
    };
    let in_range = a >= 0 && rank.is_none_or(|r| (a as u64) < r as u64);
    in_range.then_some(a)
}

/// `f(f(x))` for an idempotent `f` (Relu, Abs, Ceil, Floor, Round, Sign) is
/// `f(x)`: the outer node's readers read the inner one. Returns the value to
/// bypass to.
pub fn idempotent_source(g: &Graph, id: NodeId) -> Option<ValueId> {
    let node = g.node(id);
    let x = input(g, id, 0)?;
    let (inner, _) = g.value(x).producer?;
    let inner = g.node(inner);
    (inner.domain().is_empty() && inner.op_type == node.op_type).then_some(x)
}

/// `ArgMax(f(x))` = `ArgMax(x)` (and ArgMin) for `f` strictly increasing
/// along the reduced axis and never equal at two different elements but by
/// rounding: Softmax/LogSoftmax over that same axis (each element's
/// normalizer is shared along it; the largest element's value is never
/// saturated), and Log or Sqrt of a value known non-negative. Not Sigmoid
/// or Exp: both saturate in float (1.0, infinity), tying elements `x` tells
/// apart, and ArgMax breaks a tie by the first index.
pub fn monotone_before_arg(g: &Graph, id: NodeId, opset: i64) -> Outcome {
    let node = g.node(id);
    let y = require_some!(input(g, id, 0));
    let (f, f_node) = require_some!(sole_producer(
        g,
        y,
        &["Softmax", "LogSoftmax", "Log", "Sqrt"]
    ));
    let x = require_some!(input(g, f, 0));
    // Log and Sqrt increase strictly on [0, inf] only (a negative element
    // becomes NaN, which ArgMax would treat differently from the element).
    if matches!(f_node.op_type.as_str(), "Log" | "Sqrt") {
        require!(non_negative(g, x));
    }
    let r = rank(g, x);
    let axis = require_some!(normalize(node.attr_int_or("axis", 0).unwrap_or(0), r));
    if matches!(f_node.op_type.as_str(), "Softmax" | "LogSoftmax") {
        // From opset 13 the op normalizes over its axis alone: the same axis.
        // Before, over the flattened axes from its axis on: every element
        // with the same leading indices shares the normalizer, so any
        // reduced axis at or after the op's axis sees one increasing map.
        let default = if opset < 13 { 1 } else { -1 };
        let f_axis = f_node.attr_int_or("axis", default).unwrap_or(default);
        let f_axis = require_some!(normalize(f_axis, r));
        if opset < 13 {
            require!(axis >= f_axis);
        } else {
            require!(f_axis == axis);
        }
    }
    let mut arg = node.clone();
    arg.inputs.clear();
    arg.outputs.clear();
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(
        g,
        arg,
        vec![Some(PatchValue::Existing(x))],
        out,
        &[f, id],
    ))
}

/// `Concat(a, Concat(b, c), d)` on one axis is `Concat(a, b, c, d)` when the
/// inner Concat has no other reader.
pub fn concat_of_concat(g: &Graph, id: NodeId) -> Outcome {
    let node = g.node(id);
    let out = require_some!(output(g, id, 0));
    // Every input and the output have the same rank.
    let r = rank(g, out).or_else(|| node.inputs.iter().flatten().find_map(|&v| rank(g, v)));
    let axis = require_some!(node.attr_int("axis").ok().flatten());
    let axis = require_some!(normalize(axis, r));
    let mut inputs = Vec::new();
    let mut removed = Vec::new();
    for v in node.inputs.iter() {
        let v = require_some!(*v);
        let inner = sole_producer(g, v, &["Concat"]).filter(|(_, n)| {
            n.attr_int("axis")
                .ok()
                .flatten()
                .and_then(|a| normalize(a, r))
                == Some(axis)
        });
        match inner {
            Some((p, n)) => {
                removed.push(p);
                inputs.extend(n.inputs.iter().map(|i| i.map(PatchValue::Existing)));
            }
            None => inputs.push(Some(PatchValue::Existing(v))),
        }
    }
    require!(!removed.is_empty());
    let mut merged = node.clone();
    merged.inputs.clear();
    merged.outputs.clear();
    removed.push(id);
    Outcome::Rewrite(replace_with_node(g, merged, inputs, out, &removed))
}

/// `Log(Softmax(x, axis))` is `LogSoftmax(x, axis)` (same axis semantics in
/// every opset).
pub fn log_of_softmax(g: &Graph, id: NodeId) -> Outcome {
    let s = require_some!(input(g, id, 0));
    let (softmax, s_node) = require_some!(sole_producer(g, s, &["Softmax"]));
    let mut fused = Node::new("LogSoftmax");
    fused.name = g.node(id).name.clone();
    fused.attributes = s_node.attributes.clone();
    let x = require_some!(input(g, softmax, 0));
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(
        g,
        fused,
        vec![Some(PatchValue::Existing(x))],
        out,
        &[softmax, id],
    ))
}

const REDUCTIONS: &[&str] = &[
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ArgMax",
    "ArgMin",
];

/// Axes a reduction reduces, normalized against its input rank `r`;
/// `None` when they are not constant (or a negative one meets an unknown rank).
fn reduced_axes(g: &Graph, id: NodeId, r: Option<usize>, opset: i64) -> Option<Vec<i64>> {
    let node = g.node(id);
    let raw: Vec<i64> = match node.op_type.as_str() {
        "ArgMax" | "ArgMin" => vec![node.attr_int_or("axis", 0).ok()?],
        op => {
            let as_input = if op == "ReduceSum" {
                opset >= 13
            } else {
                opset >= 18
            };
            let axes = if as_input {
                match input(g, id, 1) {
                    Some(v) => const_i64s(g, Some(v))?,
                    None => Vec::new(),
                }
            } else {
                node.attr_ints("axes")
                    .ok()?
                    .map(|a| a.to_vec())
                    .unwrap_or_default()
            };
            if axes.is_empty() {
                // No axes: all of them, unless noop_with_empty_axes.
                if node.attr_int_or("noop_with_empty_axes", 0).ok()? != 0 {
                    return None;
                }
                (0..r? as i64).collect()
            } else {
                axes
            }
        }
    };
    let mut out: Vec<i64> = raw
        .iter()
        .map(|&a| normalize(a, r))
        .collect::<Option<_>>()?;
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// `Unsqueeze(Reduce(x, axes, keepdims=0), axes)` is `Reduce(x, axes,
/// keepdims=1)`: the Unsqueeze puts back exactly the reduced dims. `axes` is
/// the Unsqueeze's, already read for the opset.
pub fn reduce_then_unsqueeze(g: &Graph, id: NodeId, unsqueeze_axes: &[i64], opset: i64) -> Outcome {
    let x = require_some!(input(g, id, 0));
    let (reduce, r_node) = require_some!(sole_producer(g, x, REDUCTIONS));
    require!(r_node.attr_int_or("keepdims", 1).unwrap_or(1) == 0);
    let src = require_some!(input(g, reduce, 0));
    let r = rank(g, src);
    let reduced = require_some!(reduced_axes(g, reduce, r, opset));
    let mut restored: Vec<i64> = require_some!(
        unsqueeze_axes
            .iter()
            .map(|&a| normalize(a, r))
            .collect::<Option<Vec<_>>>()
    );
    restored.sort_unstable();
    require!(restored == reduced);
    let mut kept = r_node.clone();
    kept.name = g.node(id).name.clone().or_else(|| r_node.name.clone());
    kept.set_attr(Attribute::int("keepdims", 1));
    let inputs = r_node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    kept.inputs.clear();
    kept.outputs.clear();
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(g, kept, inputs, out, &[reduce, id]))
}

/// `Gemm(Transpose(A), B)` is `Gemm(A, B, transA = !transA)` (and the same
/// for B): Gemm transposes its 2-D operands itself.
pub fn transpose_into_gemm(g: &Graph, id: NodeId) -> Outcome {
    let node = g.node(id);
    let mut gemm = node.clone();
    let mut inputs: Vec<Option<PatchValue>> = node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    let mut removed = Vec::new();
    for (slot, flag) in [(0, "transA"), (1, "transB")] {
        let Some(v) = input(g, id, slot) else {
            continue;
        };
        let Some((t, t_node)) = sole_producer(g, v, &["Transpose"]) else {
            continue;
        };
        let swaps = match t_node.attr_ints("perm") {
            Ok(Some(p)) => p == [1, 0],
            // No perm: reverse the axes, a swap for a 2-D operand.
            Ok(None) => input(g, t, 0).and_then(|a| rank(g, a)) == Some(2),
            Err(_) => false,
        };
        if !swaps {
            continue;
        }
        let was = node.attr_int_or(flag, 0).unwrap_or(0);
        gemm.set_attr(Attribute::int(flag, 1 - was.clamp(0, 1)));
        inputs[slot] = input(g, t, 0).map(PatchValue::Existing);
        removed.push(t);
    }
    require!(!removed.is_empty());
    gemm.inputs.clear();
    gemm.outputs.clear();
    removed.push(id);
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(g, gemm, inputs, out, &removed))
}

/// Constant parameters of a Slice (opset >= 10 input form): starts, ends,
/// normalized axes, steps.
struct SliceParams {
    starts: Vec<i64>,
    ends: Vec<i64>,
    axes: Vec<i64>,
    steps: Vec<i64>,
}

/// Rank of `v`, looking through Slices (which keep the rank) when the value
/// has no recorded type.
fn rank_through_slices(g: &Graph, v: ValueId) -> Option<usize> {
    let mut v = v;
    for _ in 0..8 {
        if let Some(r) = rank(g, v) {
            return Some(r);
        }
        let (p, _) = g.value(v).producer?;
        let node = g.node(p);
        if !(node.domain().is_empty() && node.is("Slice")) {
            return None;
        }
        v = input(g, p, 0)?;
    }
    None
}

fn slice_params(g: &Graph, id: NodeId) -> Option<SliceParams> {
    let starts = const_i64s(g, input(g, id, 1))?;
    let ends = const_i64s(g, input(g, id, 2))?;
    let r = input(g, id, 0).and_then(|x| rank_through_slices(g, x));
    let axes = match input(g, id, 3) {
        Some(v) => const_i64s(g, Some(v))?,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = match input(g, id, 4) {
        Some(v) => const_i64s(g, Some(v))?,
        None => vec![1; starts.len()],
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return None;
    }
    let axes = axes
        .iter()
        .map(|&a| normalize(a, r))
        .collect::<Option<Vec<_>>>()?;
    Some(SliceParams {
        starts,
        ends,
        axes,
        steps,
    })
}

/// `Slice(Slice(x, axes a1), axes a2)` with constant parameters and disjoint
/// axes is one Slice over `a1 ∪ a2` (YOLOv5's Focus slices H, then W). When
/// the first Slice has several readers, all Slices that merge, each merges
/// and the first dies with the last.
pub fn merge_slices(g: &Graph, id: NodeId, opset: i64) -> Outcome {
    require!(opset >= 10);
    let x = require_some!(input(g, id, 0));
    let (first, first_node) = require_some!(g.value(x).producer.map(|(p, _)| (p, g.node(p))));
    require!(first_node.domain().is_empty() && first_node.is("Slice") && !g.is_graph_output(x));
    let outer = require_some!(slice_params(g, id));
    let inner = require_some!(slice_params(g, first));
    require!(outer.axes.iter().all(|a| !inner.axes.contains(a)));
    // Every reader of the first Slice must merge, or it stays and the merge
    // only adds work.
    let all_merge = g.value(x).uses.iter().all(|u| {
        u.slot == infopt_ir::Slot::Input(0)
            && g.node(u.node).is("Slice")
            && slice_params(g, u.node)
                .is_some_and(|p| p.axes.iter().all(|a| !inner.axes.contains(a)))
    });
    require!(all_merge);
    let src = require_some!(input(g, first, 0));
    let cat = |a: &[i64], b: &[i64]| -> Vec<i64> { a.iter().chain(b).copied().collect() };
    let label = g.node(id).name_or_op().to_string();
    let mut p = infopt_ir::Patch::new();
    let mut param = |suffix: &str, values: Vec<i64>| {
        let t = infopt_ir::Tensor::from_i64(vec![values.len() as i64], &values);
        Some(p.add_initializer(&format!("{label}.{suffix}"), t))
    };
    let inputs = vec![
        Some(PatchValue::Existing(src)),
        param("starts", cat(&inner.starts, &outer.starts)),
        param("ends", cat(&inner.ends, &outer.ends)),
        param("axes", cat(&inner.axes, &outer.axes)),
        param("steps", cat(&inner.steps, &outer.steps)),
    ];
    let mut merged = Node::new("Slice");
    merged.name = g.node(id).name.clone();
    let n = p.add_node(merged, inputs, vec![String::new()]);
    let out = require_some!(output(g, id, 0));
    let new = PatchValue::NewNode { node: n, output: 0 };
    p.replace(out, new);
    crate::util::carry_type(&mut p, g, out, new);
    p.remove_node(id);
    if single_reader(g, x).is_some() {
        p.remove_node(first);
    }
    Outcome::Rewrite(p)
}

/// `Unsqueeze(Gather(x, i, axis=a), [a])` for a constant scalar `i` is
/// `Slice(x, [i], [i+1], [a])`: the Gather drops the axis the Unsqueeze
/// puts back.
pub fn gather_then_unsqueeze(g: &Graph, id: NodeId, unsqueeze_axes: &[i64], opset: i64) -> Outcome {
    require!(opset >= 10 && unsqueeze_axes.len() == 1);
    let gathered = require_some!(input(g, id, 0));
    let (gather, g_node) = require_some!(sole_producer(g, gathered, &["Gather"]));
    let idx = require_some!(input(g, gather, 1));
    let t = require_some!(g.constant(idx));
    require!(t.dims().is_empty());
    let i = require_some!(t.to_i64_vec().ok().and_then(|v| v.first().copied()));
    let src = require_some!(input(g, gather, 0));
    let r = rank(g, src);
    let axis = require_some!(normalize(g_node.attr_int_or("axis", 0).unwrap_or(0), r));
    require!(normalize(unsqueeze_axes[0], r) == Some(axis));
    // Gather fails on an index outside the axis where Slice would clamp it
    // to an empty result: only an index known to be in range is exact.
    let dim = require_some!(
        g.value_type(src)
            .and_then(|t| match t.shape?.get(axis as usize)? {
                infopt_ir::shape::Dim::Known(d) => Some(*d),
                _ => None,
            })
    );
    require!(i >= -dim && i < dim);
    // -1 + 1 would be 0: slice to the end instead.
    let end = if i == -1 { i64::MAX } else { i + 1 };
    let label = g.node(id).name_or_op().to_string();
    let mut p = infopt_ir::Patch::new();
    let mut param = |suffix: &str, v: i64| {
        let t = infopt_ir::Tensor::from_i64(vec![1], &[v]);
        Some(p.add_initializer(&format!("{label}.{suffix}"), t))
    };
    let inputs = vec![
        Some(PatchValue::Existing(src)),
        param("starts", i),
        param("ends", end),
        param("axes", axis),
    ];
    let mut slice = Node::new("Slice");
    slice.name = g.node(id).name.clone();
    let n = p.add_node(slice, inputs, vec![String::new()]);
    let out = require_some!(output(g, id, 0));
    let new = PatchValue::NewNode { node: n, output: 0 };
    p.replace(out, new);
    crate::util::carry_type(&mut p, g, out, new);
    p.remove_node(id);
    p.remove_node(gather);
    Outcome::Rewrite(p)
}

/// `Squeeze(Slice(x, [i], [i+1], [a]), [a])` is `Gather(x, i, axis=a)`: the
/// Slice keeps one element of axis `a`, the Squeeze drops the axis (the
/// inverse of [`gather_then_unsqueeze`]).
pub fn slice_then_squeeze(g: &Graph, id: NodeId, squeeze_axes: &[i64], opset: i64) -> Outcome {
    require!(opset >= 10 && squeeze_axes.len() == 1);
    let sliced = require_some!(input(g, id, 0));
    let (slice, _) = require_some!(sole_producer(g, sliced, &["Slice"]));
    let params = require_some!(slice_params(g, slice));
    require!(params.axes.len() == 1 && params.steps[0] == 1);
    let (start, end) = (params.starts[0], params.ends[0]);
    let one = if start == -1 {
        end >= i32::MAX as i64
    } else {
        start.checked_add(1) == Some(end) && (start >= 0 || end < 0)
    };
    require!(one);
    let src = require_some!(input(g, slice, 0));
    let r = rank_through_slices(g, src);
    require!(normalize(squeeze_axes[0], r) == Some(params.axes[0]));
    let label = g.node(id).name_or_op().to_string();
    let mut p = infopt_ir::Patch::new();
    let index = p.add_initializer(
        &format!("{label}.index"),
        infopt_ir::Tensor::from_i64(vec![], &[start]),
    );
    let mut gather = Node::new("Gather");
    gather.name = g.node(id).name.clone();
    gather.set_attr(Attribute::int("axis", params.axes[0]));
    let n = p.add_node(
        gather,
        vec![Some(PatchValue::Existing(src)), Some(index)],
        vec![String::new()],
    );
    let out = require_some!(output(g, id, 0));
    let new = PatchValue::NewNode { node: n, output: 0 };
    p.replace(out, new);
    crate::util::carry_type(&mut p, g, out, new);
    p.remove_node(id);
    p.remove_node(slice);
    Outcome::Rewrite(p)
}

/// Ops whose output is never negative (NaN aside): what a Log or Sqrt reads
/// from them stays on the side where it is strictly increasing.
pub fn non_negative(g: &Graph, v: ValueId) -> bool {
    g.producer(v).is_some_and(|n| {
        n.domain().is_empty()
            && matches!(
                n.op_type.as_str(),
                "Relu" | "Sigmoid" | "Softplus" | "Exp" | "Abs" | "Softmax"
            )
    })
}

/// A node that computes its input unchanged, as `out`, replacing the nodes
/// `removed`: used where a chain cancels out but its output is a graph
/// output that cannot take the name of the chain's source (a graph input,
/// another graph output), so one node has to stay.
pub fn identity_in_place_of(g: &Graph, src: ValueId, out: ValueId, removed: &[NodeId]) -> Outcome {
    require!(removed.len() > 1);
    let mut id = Node::new("Identity");
    id.name = Some(format!("{}_identity", g.value(out).name));
    Outcome::Rewrite(replace_with_node(
        g,
        id,
        vec![Some(PatchValue::Existing(src))],
        out,
        removed,
    ))
}

/// `Where(Not(c), x, y)` is `Where(c, y, x)` when the Not has no other
/// reader.
pub fn where_of_not(g: &Graph, id: NodeId) -> Outcome {
    let c = require_some!(input(g, id, 0));
    let (not, _) = require_some!(sole_producer(g, c, &["Not"]));
    let inner = require_some!(input(g, not, 0));
    let (x, y) = (
        require_some!(input(g, id, 1)),
        require_some!(input(g, id, 2)),
    );
    let mut w = g.node(id).clone();
    w.inputs.clear();
    w.outputs.clear();
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(
        g,
        w,
        vec![
            Some(PatchValue::Existing(inner)),
            Some(PatchValue::Existing(y)),
            Some(PatchValue::Existing(x)),
        ],
        out,
        &[not, id],
    ))
}

/// Size of `v` along `axis`, when known: a constant's dims or the value's
/// inferred shape.
fn dim_along(g: &Graph, v: ValueId, axis: i64) -> Option<i64> {
    let dims: Vec<Option<i64>> = match g.constant(v) {
        Some(t) => t.dims().iter().map(|&d| Some(d)).collect(),
        None => g
            .value_type(v)?
            .shape?
            .iter()
            .map(|d| match d {
                infopt_ir::Dim::Known(k) => Some(*k),
                _ => None,
            })
            .collect(),
    };
    let a = normalize(axis, Some(dims.len()))?;
    *dims.get(usize::try_from(a).ok()?)?
}

/// Concat inputs that are empty along the axis add nothing: they are
/// dropped (at least one input stays, to carry the dtype and the other dims).
pub fn concat_without_empty(g: &Graph, id: NodeId) -> Outcome {
    let node = g.node(id);
    let axis = require_some!(node.attr_int("axis").ok().flatten());
    let mut kept = Vec::new();
    let mut dropped = 0;
    for v in node.inputs.iter() {
        let v = require_some!(*v);
        if dim_along(g, v, axis) == Some(0) {
            dropped += 1;
        } else {
            kept.push(Some(PatchValue::Existing(v)));
        }
    }
    require!(dropped > 0 && !kept.is_empty());
    let mut c = node.clone();
    c.inputs.clear();
    c.outputs.clear();
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(g, c, kept, out, &[id]))
}

/// `CastLike(x, t)` reads only the element type of `t`: with that type
/// known it is `Cast(x, to)` (which the Cast rules then drop when `x`
/// already has the type, and constant folding folds when `x` is constant).
pub fn castlike_to_cast(g: &Graph, id: NodeId) -> Outcome {
    let t = require_some!(input(g, id, 1));
    let to = require_some!(g.value_type(t)).dtype;
    require!(to != infopt_ir::DataType::Undefined);
    let x = require_some!(input(g, id, 0));
    let mut cast = Node::new("Cast");
    cast.name = g.node(id).name.clone();
    cast.set_attr(Attribute::int("to", i64::from(to.code())));
    if let Ok(Some(sat)) = g.node(id).attr_int("saturate") {
        cast.set_attr(Attribute::int("saturate", sat));
    }
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(
        g,
        cast,
        vec![Some(PatchValue::Existing(x))],
        out,
        &[id],
    ))
}
