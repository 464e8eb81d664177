//! Removes nodes that provably pass their input through unchanged, and merges
//! chains of layout ops.
//!
//! ## What it does
//! Bypasses `Identity`; `Dropout` in inference (no `training_mode`, or a
//! constant false one, and the mask unused); `Cast` to the type the input
//! already has; `Reshape` to the shape the input already has; `Transpose`
//! with the identity permutation; `Squeeze`→`Unsqueeze` and
//! `Unsqueeze`→`Squeeze` on the same axes; `Slice` over the full range;
//! `Pad` with all-zero pads; `Expand` that does not broadcast; `Concat` of a
//! single input. Merges `Transpose`→`Transpose` into one (or none) and
//! `Reshape`→`Reshape` into one. Drops the second of two idempotent ops
//! (`Relu`, `Abs`, `Ceil`, `Floor`, `Round`, `Sign`), a strictly increasing
//! op that cannot saturate at the extreme (`Softmax`/`LogSoftmax` over the
//! same axis, or before opset 13 over flattened axes starting at or before
//! it) under `ArgMax`/`ArgMin`, and an `Unsqueeze` that restores exactly the dims a
//! `keepdims=0` reduction removed (the reduction keeps them instead). Splices
//! a single-reader `Concat` into the `Concat` on the same axis after it, and
//! turns `Log(Softmax(x))` into `LogSoftmax(x)`. A single-reader 2-D
//! `Transpose` feeding `Gemm` becomes the Gemm's `transA`/`transB`. Two
//! `Slice`s with constant parameters on disjoint axes become one (when the
//! first has several readers, all such Slices, it goes with the last), and
//! `Unsqueeze(Gather(x, i, axis=a), [a])` with a constant scalar `i` becomes
//! `Slice(x, [i], [i+1], [a])`, and `Squeeze(Slice(x, [i], [i+1], [a]), [a])`
//! becomes `Gather(x, i, axis=a)`. Also: `x^1` is `x`; a `Flatten` whose
//! output has its input's shape goes; `Where(Not(c), a, b)` becomes
//! `Where(c, b, a)`; `CastLike(x, t)` becomes `Cast(x, to=type of t)`;
//! Concat inputs empty along the axis are dropped; `Log`
//! or `Sqrt` of a non-negative value (Relu, Abs, Exp, Sigmoid, Softplus,
//! Softmax) under ArgMax/ArgMin goes like the other increasing ops. Where a
//! cancelling pair (Transpose pair, Squeeze/Unsqueeze) links a graph input
//! to a graph output, one `Identity` replaces the pair.
//! `Reshape(f(Reshape(x, s1)), s2)` with `f` elementwise ops (on that value
//! and scalar constants only) becomes `Reshape(f(x), s2)`, or `f(x)` when
//! `s2` restores the shape of `x`.
//!
//! ## When it declines
//! When removing the node would rename a graph input or output (an Identity
//! between an input and an output is the model's interface), when a Dropout
//! mask is read or its training mode is not a constant false. Rewrites that
//! need a shape (Cast, Reshape, Slice, Expand) are skipped while the shape is
//! unknown; run shape inference or `fix-shapes` first.
//!
//! ## Numerics
//! Exact, except two rewrites that compute more precisely than the original:
//! `LogSoftmax` does not round the softmax before the log (where the softmax
//! underflowed to 0 the original gave -inf); and ArgMax/ArgMin over `x`
//! instead of a Softmax of it can pick another index where two elements
//! within rounding of the largest tie after the Softmax (the original
//! returned the first of the tied, the rewrite the true extreme). A Sigmoid
//! or Exp under ArgMax stays: each saturates (Sigmoid is exactly 1.0 from
//! about 16.6 up, Exp infinite from 88.7), and ArgMax over the tied 1.0s
//! picks the first class where ArgMax over `x` picks another (`[20, 30, 0]`:
//! 0 against 1), which is not rounding but a different answer.
//!
//! ## Example
//! `t1 = Transpose(x, perm=[0,2,3,1])`, `t2 = Transpose(t1, perm=[0,3,1,2])`,
//! `y = Relu(t2)` becomes `y = Relu(x)`.

crate::register_pass! {
    name: "eliminate-identity",
    kind: Eliminate,
    file: "eliminate_identity.rs",
    options: crate::registry::NoOptions,
    build: |_| EliminateIdentity,
}

use infopt_ir::{Attribute, Graph, Model, Node, NodeId, Patch, PatchValue, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::redundant_ops;
use crate::rule::{Outcome, apply_rule};
use crate::util::{const_i64s, input, is_renamable, output, single_reader};
use crate::{decline, require, require_some};

pub struct EliminateIdentity;

/// Patch that makes every reader of `node`'s output read `src` instead.
fn bypass(g: &Graph, node: NodeId, src: ValueId) -> Outcome {
    let out = require_some!(output(g, node, 0));
    if g.is_graph_output(out) && !is_renamable(g, src) {
        decline!(
            "bypassing would rename '{}' to graph output '{}'",
            g.value(src).name,
            g.value(out).name
        );
    }
    if g.is_graph_output(out) && g.is_graph_output(src) {
        decline!(
            "'{}' and '{}' are both graph outputs",
            g.value(src).name,
            g.value(out).name
        );
    }
    let mut p = Patch::new();
    p.replace(out, PatchValue::Existing(src));
    p.remove_node(node);
    Outcome::Rewrite(p)
}

fn known_dims(g: &Graph, v: ValueId) -> Option<Vec<i64>> {
    g.value_type(v)?.known_dims()
}

fn rank(g: &Graph, v: ValueId) -> Option<usize> {
    g.value_type(v)?.shape.map(|s| s.len())
}

/// Axes of Squeeze/Unsqueeze: attribute before opset 13, input after.
fn axes(g: &Graph, id: NodeId, opset: i64) -> Option<Vec<i64>> {
    let node = g.node(id);
    if opset < 13 {
        node.attr_ints("axes").ok().flatten().map(|a| a.to_vec())
    } else {
        const_i64s(g, input(g, id, 1))
    }
}

fn normalize(axes: &[i64], rank: Option<usize>) -> Option<Vec<i64>> {
    let mut out = Vec::with_capacity(axes.len());
    // An axis is an attribute or constant a file may set to anything; past
    // the largest rank there is no tensor it could index (and positions are
    // enumerated up to it).
    let bound = rank.unwrap_or(infopt_ir::shape::MAX_RANK) as i64;
    for &a in axes {
        let a = if a < 0 {
            a.checked_add(rank? as i64)?
        } else {
            a
        };
        if !(0..bound).contains(&a) {
            return None;
        }
        out.push(a);
    }
    out.sort_unstable();
    Some(out)
}

/// Output dims of a Reshape of `input` to `shape` (handles 0 and -1).
fn reshape_dims(input: &[i64], shape: &[i64], allowzero: bool) -> Option<Vec<i64>> {
    let product = |v: &[i64]| v.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d));
    let total = product(input)?;
    let mut out: Vec<i64> = Vec::with_capacity(shape.len());
    let mut infer = None;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            0 if !allowzero => out.push(*input.get(i)?),
            -1 => {
                infer = Some(i);
                out.push(1);
            }
            d if d < 0 => return None,
            d => out.push(d),
        }
    }
    if let Some(i) = infer {
        let known = product(&out)?;
        if known == 0 || total % known != 0 {
            return None;
        }
        out[i] = total / known;
    }
    (product(&out)? == total).then_some(out)
}

/// The permutation of a Transpose; `None` when it is not a valid one (a
/// malformed model is left alone, not rewritten).
fn perm_of(node: &Node, rank: Option<usize>) -> Option<Vec<i64>> {
    let perm = match node.attr_ints("perm").ok().flatten() {
        Some(p) => p.to_vec(),
        None => (0..rank? as i64).rev().collect(),
    };
    let mut seen = vec![false; perm.len()];
    for &a in &perm {
        let slot = seen.get_mut(usize::try_from(a).ok()?)?;
        if *slot {
            return None;
        }
        *slot = true;
    }
    if rank.is_some_and(|r| r != perm.len()) {
        return None;
    }
    Some(perm)
}

fn is_identity_perm(p: &[i64]) -> bool {
    p.iter().enumerate().all(|(i, &v)| v == i as i64)
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty());
    let x = require_some!(input(g, id, 0));
    if let Some(outcome) = collapse_layout_chain(g, id, x) {
        return outcome;
    }
    match node.op_type.as_str() {
        "Identity" => bypass(g, id, x),
        "Dropout" => {
            if let Some(mask) = output(g, id, 1)
                && g.reader_count(mask) > 0
            {
                decline!("the Dropout mask output is used");
            }
            if let Some(tm) = input(g, id, 2) {
                match const_i64s(g, Some(tm)) {
                    Some(v) if v.iter().all(|&b| b == 0) => {}
                    _ => decline!("training_mode is not a constant false"),
                }
            }
            bypass(g, id, x)
        }
        "Cast" => {
            let to = require_some!(node.attr_int("to").ok().flatten());
            let ty = require_some!(g.value_type(x));
            require!(ty.dtype.code() == to as i32);
            bypass(g, id, x)
        }
        "Transpose" => {
            let perm = require_some!(perm_of(node, rank(g, x)));
            if is_identity_perm(&perm) {
                return bypass(g, id, x);
            }
            if let Some(outcome) = transpose_of_unit_axes(g, id, x, &perm) {
                return outcome;
            }
            // Transpose(Transpose(a, p1), p2) = Transpose(a, p1[p2[i]]).
            let (first, _) = require_some!(g.value(x).producer);
            let first_node = g.node(first);
            require!(first_node.is("Transpose") && single_reader(g, x).is_some());
            let a = require_some!(input(g, first, 0));
            let p1 = require_some!(perm_of(first_node, rank(g, a)));
            require!(p1.len() == perm.len());
            let composed: Vec<i64> = perm.iter().map(|&i| p1[i as usize]).collect();
            if is_identity_perm(&composed) {
                let out = require_some!(output(g, id, 0));
                if g.is_graph_output(out) && (!is_renamable(g, a) || g.is_graph_output(a)) {
                    return redundant_ops::identity_in_place_of(g, a, out, &[first, id]);
                }
                let mut p = Patch::new();
                p.replace(out, PatchValue::Existing(a));
                p.remove_node(id);
                p.remove_node(first);
                return Outcome::Rewrite(p);
            }
            let mut merged = Node::new("Transpose");
            merged.name = node.name.clone();
            merged.set_attr(Attribute::ints("perm", composed));
            let mut p = Patch::new();
            let n = p.add_node(
                merged,
                vec![Some(PatchValue::Existing(a))],
                vec![String::new()],
            );
            p.replace(
                require_some!(output(g, id, 0)),
                PatchValue::NewNode { node: n, output: 0 },
            );
            p.remove_node(id);
            p.remove_node(first);
            Outcome::Rewrite(p)
        }
        "Reshape" => {
            if let Outcome::Rewrite(p) = crate::reshape_sink::sink_through_elementwise(g, id) {
                return Outcome::Rewrite(p);
            }
            let shape = require_some!(const_i64s(g, input(g, id, 1)));
            let allowzero = node.attr_int_or("allowzero", 0).unwrap_or(0) != 0;
            if let Some(dims) = known_dims(g, x)
                && reshape_dims(&dims, &shape, allowzero).as_deref() == Some(&dims[..])
            {
                return bypass(g, id, x);
            }
            if reshape_keeps_symbolic_shape(g, x, &shape, allowzero) {
                return bypass(g, id, x);
            }
            // Reshape(Reshape(a, s1), s2) = Reshape(a, s2) when s2 has no 0
            // (a 0 would copy a dim of the intermediate shape).
            let (first, _) = require_some!(g.value(x).producer);
            require!(g.node(first).is("Reshape") && single_reader(g, x).is_some());
            require!(allowzero || !shape.contains(&0));
            let a = require_some!(input(g, first, 0));
            let mut merged = Node::new("Reshape");
            merged.name = node.name.clone();
            merged.attributes = node.attributes.clone();
            let mut p = Patch::new();
            let n = p.add_node(
                merged,
                vec![
                    Some(PatchValue::Existing(a)),
                    input(g, id, 1).map(PatchValue::Existing),
                ],
                vec![String::new()],
            );
            p.replace(
                require_some!(output(g, id, 0)),
                PatchValue::NewNode { node: n, output: 0 },
            );
            p.remove_node(id);
            p.remove_node(first);
            Outcome::Rewrite(p)
        }
        "Unsqueeze" | "Squeeze" => {
            if node.op_type == "Unsqueeze"
                && let Some(ax) = axes(g, id, cx.opset)
                && let Outcome::Rewrite(p) =
                    redundant_ops::reduce_then_unsqueeze(g, id, &ax, cx.opset)
            {
                return Outcome::Rewrite(p);
            }
            if node.op_type == "Unsqueeze"
                && let Some(ax) = axes(g, id, cx.opset)
                && let Outcome::Rewrite(p) =
                    redundant_ops::gather_then_unsqueeze(g, id, &ax, cx.opset)
            {
                return Outcome::Rewrite(p);
            }
            if node.op_type == "Squeeze"
                && let Some(ax) = axes(g, id, cx.opset)
                && let Outcome::Rewrite(p) =
                    redundant_ops::slice_then_squeeze(g, id, &ax, cx.opset)
            {
                return Outcome::Rewrite(p);
            }
            let (first, _) = require_some!(g.value(x).producer);
            // Merge with the Unsqueeze before; when that one has several
            // readers, all Unsqueezes, each merges and it dies with the last.
            if node.op_type == "Unsqueeze"
                && g.node(first).is("Unsqueeze")
                && !g.is_graph_output(x)
                && g.value(x)
                    .uses
                    .iter()
                    .all(|u| u.slot == infopt_ir::Slot::Input(0) && g.node(u.node).is("Unsqueeze"))
            {
                return merge_unsqueezes(g, first, id, cx.opset);
            }
            let inverse = if node.op_type == "Unsqueeze" {
                "Squeeze"
            } else {
                "Unsqueeze"
            };
            require!(g.node(first).is(inverse) && single_reader(g, x).is_some());
            let a = require_some!(input(g, first, 0));
            let outer_rank = rank(g, a);
            let inner_rank = rank(g, x);
            let ax2 = require_some!(axes(g, id, cx.opset));
            let ax1 = require_some!(axes(g, first, cx.opset));
            // Both axis lists index the larger of the two ranks: for
            // Unsqueeze(Squeeze(a)) that is rank(a) (Squeeze's input and
            // Unsqueeze's output); for Squeeze(Unsqueeze(a)) it is rank(x),
            // the intermediate.
            let big = if node.op_type == "Unsqueeze" {
                outer_rank
            } else {
                inner_rank
            };
            let n1 = require_some!(normalize(&ax1, big));
            let n2 = require_some!(normalize(&ax2, big));
            require!(n1 == n2 && !n1.is_empty());
            let out = require_some!(output(g, id, 0));
            if g.is_graph_output(out) && (!is_renamable(g, a) || g.is_graph_output(a)) {
                return redundant_ops::identity_in_place_of(g, a, out, &[first, id]);
            }
            let mut p = Patch::new();
            p.replace(out, PatchValue::Existing(a));
            p.remove_node(id);
            p.remove_node(first);
            Outcome::Rewrite(p)
        }
        "Slice" => {
            if let Outcome::Rewrite(p) = redundant_ops::merge_slices(g, id, cx.opset) {
                return Outcome::Rewrite(p);
            }
            let (starts, ends, axes, steps) = if cx.opset < 10 {
                let s = require_some!(node.attr_ints("starts").ok().flatten()).to_vec();
                let e = require_some!(node.attr_ints("ends").ok().flatten()).to_vec();
                let a = node.attr_ints("axes").ok().flatten().map(|a| a.to_vec());
                (s, e, a, None)
            } else {
                let s = require_some!(const_i64s(g, input(g, id, 1)));
                let e = require_some!(const_i64s(g, input(g, id, 2)));
                let a = match input(g, id, 3) {
                    Some(v) => Some(require_some!(const_i64s(g, Some(v)))),
                    None => None,
                };
                let st = match input(g, id, 4) {
                    Some(v) => Some(require_some!(const_i64s(g, Some(v)))),
                    None => None,
                };
                (s, e, a, st)
            };
            require!(starts.len() == ends.len());
            let dims = g.value_type(x).and_then(|t| t.shape);
            for (i, (&s, &e)) in starts.iter().zip(&ends).enumerate() {
                let step = steps
                    .as_ref()
                    .and_then(|st| st.get(i).copied())
                    .unwrap_or(1);
                require!(step == 1 && s == 0);
                let axis = axes
                    .as_ref()
                    .and_then(|a| a.get(i).copied())
                    .unwrap_or(i as i64);
                // ends at or past the end: INT_MAX-style sentinels, or >= a known dim.
                let covers = e >= i32::MAX as i64
                    || match dims.as_ref() {
                        Some(d) => {
                            let ax = if axis < 0 {
                                axis + d.len() as i64
                            } else {
                                axis
                            };
                            matches!(d.get(ax as usize), Some(infopt_ir::Dim::Known(n)) if e >= *n)
                        }
                        None => false,
                    };
                require!(covers);
            }
            bypass(g, id, x)
        }
        "Pad" => {
            let pads = if cx.opset < 11 {
                require_some!(node.attr_ints("pads").ok().flatten()).to_vec()
            } else {
                require_some!(const_i64s(g, input(g, id, 1)))
            };
            require!(pads.iter().all(|&p| p == 0));
            bypass(g, id, x)
        }
        "Expand" => {
            let shape = require_some!(const_i64s(g, input(g, id, 1)));
            let r = require_some!(rank(g, x));
            let no_broadcast = if shape.iter().all(|&d| d == 1) && shape.len() <= r {
                true
            } else if let Some(dims) = known_dims(g, x) {
                shape.len() <= dims.len()
                    && shape
                        .iter()
                        .rev()
                        .zip(dims.iter().rev())
                        .all(|(&s, &d)| s == 1 || s == d)
            } else {
                false
            };
            require!(no_broadcast);
            bypass(g, id, x)
        }
        "Concat" => {
            if node.inputs.len() == 1 {
                return bypass(g, id, x);
            }
            if let Outcome::Rewrite(p) = redundant_ops::concat_without_empty(g, id) {
                return Outcome::Rewrite(p);
            }
            redundant_ops::concat_of_concat(g, id)
        }
        "Relu" | "Abs" | "Ceil" | "Floor" | "Round" | "Sign" => {
            let src = require_some!(redundant_ops::idempotent_source(g, id));
            bypass(g, id, src)
        }
        "ArgMax" | "ArgMin" => redundant_ops::monotone_before_arg(g, id, cx.opset),
        "Log" => redundant_ops::log_of_softmax(g, id),
        "CastLike" => redundant_ops::castlike_to_cast(g, id),
        "Gemm" => redundant_ops::transpose_into_gemm(g, id),
        "Add" | "Sub" | "Mul" | "Div" | "And" | "Or" | "Pow" => neutral_operand(g, id),
        "Split" => {
            // One output: the whole input.
            require!(node.outputs.len() == 1);
            bypass(g, id, x)
        }
        "Flatten" => {
            let axis = node.attr_int_or("axis", 1).unwrap_or(1);
            require!(rank(g, x) == Some(2));
            // [a, b] flattens to [a, b] at axis 1; at axis 0 to [1, a*b],
            // the same when a is 1; at axis 2 to [a*b, 1], the same when b is 1.
            let unit = |i: usize| {
                g.value_type(x)
                    .and_then(|t| t.shape)
                    .is_some_and(|s| matches!(s.get(i), Some(infopt_ir::Dim::Known(1))))
            };
            let nop = match axis {
                1 | -1 => true,
                0 | -2 => unit(0),
                2 => unit(1),
                _ => false,
            };
            require!(nop);
            bypass(g, id, x)
        }
        "ReduceMax" | "ReduceMin" | "ReduceMean" | "ReduceSum" | "ReduceProd" => {
            unit_reduction(g, id, x, cx.opset)
        }
        "LSTM" | "GRU" | "RNN" => zero_initial_state(g, id),
        "Where" => match constant_condition(g, id) {
            Outcome::Rewrite(p) => Outcome::Rewrite(p),
            _ => redundant_ops::where_of_not(g, id),
        },
        _ => Outcome::Skip,
    }
}

impl Pass for EliminateIdentity {
    fn name(&self) -> &'static str {
        "eliminate-identity"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}

/// `x + 0`, `x - 0`, `x * 1`, `x / 1` (and `0 + x`, `1 * x`) where the constant
/// neither changes the type nor broadcasts `x` to a larger shape.
fn neutral_operand(g: &Graph, id: NodeId) -> Outcome {
    let node = g.node(id);
    // x+0, x-0, x*1, x/1, x^1, x AND true, x OR false.
    let neutral = if matches!(node.op_type.as_str(), "Add" | "Sub" | "Or") {
        0.0
    } else {
        1.0
    };
    let commutative = matches!(node.op_type.as_str(), "Add" | "Mul" | "And" | "Or");
    // Pow's exponent may have another numeric type than the base.
    let any_dtype = node.op_type == "Pow";
    let a = require_some!(input(g, id, 0));
    let b = require_some!(input(g, id, 1));
    let (x, c) = match (g.constant(a), g.constant(b)) {
        (_, Some(c)) => (a, c),
        (Some(c), None) if commutative => (b, c),
        _ => return Outcome::Skip,
    };
    let ty = require_some!(g.value_type(x));
    require!((any_dtype || ty.dtype == c.dtype()) && c.dtype() != infopt_ir::DataType::String);
    let values = require_some!(c.to_f64_vec().ok());
    require!(!values.is_empty() && values.iter().all(|&v| v == neutral));
    // The result keeps x's shape only if every dim of the constant is 1 or
    // equal to x's (known) dim, and the constant's rank does not exceed x's.
    let dims = require_some!(ty.shape);
    require!(c.dims().len() <= dims.len());
    let fits = c
        .dims()
        .iter()
        .rev()
        .zip(dims.iter().rev())
        .all(|(&cd, xd)| cd == 1 || matches!(xd, infopt_ir::Dim::Known(k) if *k == cd));
    require!(fits);
    bypass(g, id, x)
}

/// `Unsqueeze(Unsqueeze(x, a1), a2)` as one `Unsqueeze` with the combined axes.
fn merge_unsqueezes(g: &Graph, first: NodeId, second: NodeId, opset: i64) -> Outcome {
    let x = require_some!(input(g, first, 0));
    let a1 = require_some!(axes(g, first, opset));
    let a2 = require_some!(axes(g, second, opset));
    let r = rank(g, x);
    let mid_rank = r.map(|r| r + a1.len());
    let out_rank = mid_rank.map(|m| m + a2.len());
    let a1 = require_some!(normalize(&a1, mid_rank));
    let a2 = require_some!(normalize(&a2, out_rank));
    // Positions of the intermediate tensor in the final output: those not
    // inserted by the second Unsqueeze, in order.
    let total = a1.len().max(a2.len())
        + a1.iter()
            .chain(&a2)
            .map(|&a| a as usize + 1)
            .max()
            .unwrap_or(0);
    let kept: Vec<i64> = (0..total as i64).filter(|p| !a2.contains(p)).collect();
    let mut combined: Vec<i64> = a2.clone();
    for &a in &a1 {
        combined.push(*require_some!(kept.get(a as usize)));
    }
    combined.sort_unstable();
    let mut merged = Node::new("Unsqueeze");
    merged.name = g.node(second).name.clone();
    let mut p = Patch::new();
    let mut inputs = vec![Some(PatchValue::Existing(x))];
    if opset < 13 {
        merged.set_attr(Attribute::ints("axes", combined));
    } else {
        let name = format!("{}.axes", g.node(second).name_or_op());
        let t = infopt_ir::Tensor::from_i64(vec![combined.len() as i64], &combined);
        inputs.push(Some(p.add_initializer(&name, t)));
    }
    let n = p.add_node(merged, inputs, vec![String::new()]);
    p.replace(
        require_some!(output(g, second, 0)),
        PatchValue::NewNode { node: n, output: 0 },
    );
    p.remove_node(second);
    if single_reader(g, require_some!(output(g, first, 0))).is_some() {
        p.remove_node(first);
    }
    Outcome::Rewrite(p)
}

/// `Reshape(x, shape)` where every element of `shape` keeps x's dim at that
/// position (0 = copy, the same known value, or a single -1 standing for the
/// one dim not otherwise accounted for), with x's rank.
fn reshape_keeps_symbolic_shape(g: &Graph, x: ValueId, shape: &[i64], allowzero: bool) -> bool {
    let Some(dims) = g.value_type(x).and_then(|t| t.shape) else {
        return false;
    };
    if dims.len() != shape.len() {
        return false;
    }
    let mut wildcard = 0;
    for (d, &s) in dims.iter().zip(shape) {
        match (d, s) {
            (_, 0) if !allowzero => {}
            (infopt_ir::Dim::Known(k), s) if *k == s => {}
            (_, -1) => wildcard += 1,
            _ => return false,
        }
    }
    wildcard <= 1
}

/// A Transpose that only moves axes of size 1 keeps the order of the data: it
/// is a Reshape (which the Reshape rules can then merge with its neighbours).
fn transpose_of_unit_axes(g: &Graph, id: NodeId, x: ValueId, perm: &[i64]) -> Option<Outcome> {
    let dims = g.value_type(x)?.shape?;
    if dims.len() != perm.len() {
        return None;
    }
    // An empty dim would turn into a 0 in the target, which Reshape reads as
    // "copy the input dim".
    if dims.iter().any(|d| matches!(d, infopt_ir::Dim::Known(0))) {
        return None;
    }
    let unit = |a: i64| matches!(dims.get(a as usize), Some(infopt_ir::Dim::Known(1)));
    let moved: Vec<i64> = perm.iter().copied().filter(|&a| !unit(a)).collect();
    if !moved.windows(2).all(|w| w[0] < w[1]) {
        return None;
    }
    // The target shape: known dims as they are, at most one unknown as -1.
    let mut target = Vec::with_capacity(perm.len());
    let mut unknown = 0;
    for &a in perm {
        match dims.get(a as usize)? {
            infopt_ir::Dim::Known(k) => target.push(*k),
            _ => {
                unknown += 1;
                target.push(-1);
            }
        }
    }
    if unknown > 1 {
        return None;
    }
    let mut p = reshape_patch(g, id, x, &target, output(g, id, 0)?);
    p.remove_node(id);
    Some(Outcome::Rewrite(p))
}

/// A reduction with keepdims=1 over axes that all have size 1 returns its input.
fn unit_reduction(g: &Graph, id: NodeId, x: ValueId, opset: i64) -> Outcome {
    let node = g.node(id);
    require!(node.attr_int_or("keepdims", 1).unwrap_or(1) == 1);
    let dims = require_some!(g.value_type(x).and_then(|t| t.shape));
    // Axes are an input from opset 13 (ReduceSum) / 18 (the others).
    let axes_as_input = if node.op_type == "ReduceSum" {
        opset >= 13
    } else {
        opset >= 18
    };
    let axes: Option<Vec<i64>> = if axes_as_input {
        match input(g, id, 1) {
            Some(v) => Some(require_some!(const_i64s(g, Some(v)))),
            None => None,
        }
    } else {
        node.attr_ints("axes").ok().flatten().map(|a| a.to_vec())
    };
    let axes: Vec<i64> = match axes {
        Some(a) if !a.is_empty() => a,
        // No axes: all of them, unless noop_with_empty_axes (then it is a no-op too).
        _ => (0..dims.len() as i64).collect(),
    };
    let all_unit = axes.iter().all(|&a| {
        let a = if a < 0 { a + dims.len() as i64 } else { a };
        matches!(dims.get(a as usize), Some(infopt_ir::Dim::Known(1)))
    });
    require!(all_unit);
    bypass(g, id, x)
}

/// RNN/GRU/LSTM initial states that are all zeros (ConstantOfShape(0) or a
/// zero initializer) are the op's default: drop the input.
fn zero_initial_state(g: &Graph, id: NodeId) -> Outcome {
    let node = g.node(id);
    let slots: &[usize] = if node.op_type == "LSTM" {
        &[5, 6]
    } else {
        &[5]
    };
    let is_zero = |v: ValueId| all_zeros(g, v, 8);
    let zeros: Vec<usize> = slots
        .iter()
        .copied()
        .filter(|&s| input(g, id, s).is_some_and(is_zero))
        .collect();
    require!(!zeros.is_empty());
    let mut copy = node.clone();
    let mut inputs: Vec<Option<PatchValue>> = node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    for &s in &zeros {
        inputs[s] = None;
    }
    while matches!(inputs.last(), Some(None)) {
        inputs.pop();
    }
    copy.inputs.clear();
    copy.outputs.clear();
    let mut p = Patch::new();
    let n = p.add_node(copy, inputs, vec![String::new(); node.outputs.len()]);
    for (k, out) in node.outputs.iter().enumerate() {
        if let Some(out) = out {
            p.replace(*out, PatchValue::NewNode { node: n, output: k });
        }
    }
    p.remove_node(id);
    Outcome::Rewrite(p)
}

/// True when `v` is provably all zeros: a zero constant, `ConstantOfShape`
/// of zero, or a view of such a tensor (Slice, Reshape, Expand, ...).
fn all_zeros(g: &Graph, v: ValueId, depth: usize) -> bool {
    if let Some(t) = g.constant(v) {
        return t
            .to_f64_vec()
            .is_ok_and(|vals| vals.iter().all(|&x| x == 0.0));
    }
    let Some((p, _)) = g.value(v).producer else {
        return false;
    };
    let node = g.node(p);
    if !node.domain().is_empty() || depth == 0 {
        return false;
    }
    let data = || {
        node.inputs
            .first()
            .copied()
            .flatten()
            .is_some_and(|x| all_zeros(g, x, depth - 1))
    };
    match node.op_type.as_str() {
        "ConstantOfShape" => match node.attr_tensor("value") {
            Ok(None) => true,
            Ok(Some(t)) => t
                .to_f64_vec()
                .is_ok_and(|vals| vals.iter().all(|&x| x == 0.0)),
            Err(_) => false,
        },
        "Slice" | "Reshape" | "Expand" | "Squeeze" | "Unsqueeze" | "Transpose" | "Identity"
        | "Cast" | "Flatten" | "Gather" | "Tile" => data(),
        "Concat" => node
            .inputs
            .iter()
            .flatten()
            .all(|&x| all_zeros(g, x, depth - 1)),
        _ => false,
    }
}

/// `Where(c, a, b)` with a constant condition that is all true (all false)
/// is `a` (`b`) when that operand already has the output's shape.
fn constant_condition(g: &Graph, id: NodeId) -> Outcome {
    let cond = require_some!(const_i64s(g, input(g, id, 0)));
    require!(!cond.is_empty());
    let pick = if cond.iter().all(|&c| c != 0) {
        1
    } else if cond.iter().all(|&c| c == 0) {
        2
    } else {
        return Outcome::Skip;
    };
    let chosen = require_some!(input(g, id, pick));
    let out = require_some!(output(g, id, 0));
    let (Some(ct), Some(ot)) = (g.value_type(chosen), g.value_type(out)) else {
        return Outcome::Skip;
    };
    require!(ct.shape.is_some() && ct.shape == ot.shape && ct.dtype == ot.dtype);
    require!(
        !ct.shape
            .iter()
            .flatten()
            .any(|d| matches!(d, infopt_ir::Dim::Unknown))
    );
    bypass(g, id, chosen)
}

const LAYOUT_OPS: &[&str] = &["Reshape", "Squeeze", "Unsqueeze", "Flatten"];

/// Two data-preserving layout ops in a row (Reshape then Squeeze, Unsqueeze
/// then Reshape, Flatten then Reshape, ...) are one Reshape to the final
/// shape, when that shape can be written as a Reshape target of the first
/// op's input. Pairs with a dedicated rule (inverse Squeeze/Unsqueeze,
/// Unsqueeze chains, Reshape chains) are left to it.
fn collapse_layout_chain(g: &Graph, id: NodeId, x: ValueId) -> Option<Outcome> {
    let node = g.node(id);
    if !LAYOUT_OPS.contains(&node.op_type.as_str()) {
        return None;
    }
    let (first, _) = g.value(x).producer?;
    let first_node = g.node(first);
    if !first_node.domain().is_empty() || !LAYOUT_OPS.contains(&first_node.op_type.as_str()) {
        return None;
    }
    let pair = (first_node.op_type.as_str(), node.op_type.as_str());
    if matches!(
        pair,
        ("Squeeze", "Unsqueeze")
            | ("Unsqueeze", "Squeeze")
            | ("Unsqueeze", "Unsqueeze")
            | ("Reshape", "Reshape")
    ) {
        return None;
    }
    single_reader(g, x)?;
    let src = input(g, first, 0)?;
    let src_dims = g.value_type(src)?.shape?;
    let out = output(g, id, 0)?;
    let out_dims = g.value_type(out)?.shape?;
    // The target: known dims as numbers, a symbol at the same position of the
    // source as 0 ("copy"), at most one other dim as -1.
    let mut target = Vec::with_capacity(out_dims.len());
    let mut wildcard = 0;
    for (j, d) in out_dims.iter().enumerate() {
        match d {
            infopt_ir::Dim::Known(0) => return None,
            infopt_ir::Dim::Known(k) => target.push(*k),
            infopt_ir::Dim::Sym(s) if matches!(src_dims.get(j), Some(infopt_ir::Dim::Sym(t)) if t == s) => {
                target.push(0)
            }
            _ => {
                wildcard += 1;
                target.push(-1);
            }
        }
    }
    if wildcard > 1
        || src_dims
            .iter()
            .any(|d| matches!(d, infopt_ir::Dim::Known(0)))
    {
        return None;
    }
    let mut p = reshape_patch(g, id, src, &target, out);
    p.remove_node(id);
    p.remove_node(first);
    Some(Outcome::Rewrite(p))
}

/// A patch with `Reshape(src, target)` (a new constant shape) in place of
/// node `id`, whose output `out` it replaces; the caller adds the removals.
fn reshape_patch(g: &Graph, id: NodeId, src: ValueId, target: &[i64], out: ValueId) -> Patch {
    let node = g.node(id);
    let mut reshape = Node::new("Reshape");
    reshape.name = node.name.clone();
    let mut p = Patch::new();
    let shape_name = format!("{}.shape", node.name_or_op());
    let shape = p.add_initializer(
        &shape_name,
        infopt_ir::Tensor::from_i64(vec![target.len() as i64], target),
    );
    let n = p.add_node(
        reshape,
        vec![Some(PatchValue::Existing(src)), Some(shape)],
        vec![String::new()],
    );
    p.replace(out, PatchValue::NewNode { node: n, output: 0 });
    p
}
