//! Rule of `eliminate-identity`: a Reshape, elementwise ops, a Reshape.
//!
//! `r = Reshape(x, s1)`, then elementwise ops on `r` alone (and scalar
//! constants), then `y = Reshape(f(r), s2)`: elementwise ops do not care
//! about the layout, so `f` runs on `x` and `y = Reshape(f(x), s2)`, or
//! `y = f(x)` when `s2` gives back the shape of `x`. Exporters write this
//! around activations between two matrix products (GPT-2's
//! `view → addmm → view → GELU → view → addmm`).

use std::collections::{HashMap, HashSet};

use infopt_ir::{Graph, NodeId, Patch, PatchValue, TensorType, ValueId};

use crate::require_some;
use crate::rule::Outcome;
use crate::util::{input, output};

/// Elementwise ops whose every non-data input is an attribute or a scalar:
/// the result at each position depends on the inputs at that position only.
const ELEMENTWISE: &[&str] = &[
    "Abs",
    "Acos",
    "Asin",
    "Atan",
    "Ceil",
    "Celu",
    "Clip",
    "Cos",
    "Cosh",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "IsInf",
    "IsNaN",
    "LeakyRelu",
    "Log",
    "Mish",
    "Neg",
    "Not",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Mod",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Greater",
    "Less",
    "GreaterOrEqual",
    "LessOrEqual",
    "Cast",
    "PRelu",
];

/// A region may not be larger than this (a bound on the search).
const MAX_REGION: usize = 64;

/// Whether constant `v` broadcasts against a tensor of rank `rank` without
/// changing its shape in any layout: a single element of rank at most `rank`.
fn scalar_constant(g: &Graph, v: ValueId, rank: usize) -> bool {
    g.constant(v)
        .is_some_and(|t| t.numel() == Some(1) && t.dims().len() <= rank)
}

/// Anchored at the second Reshape `id`.
pub fn sink_through_elementwise(g: &Graph, id: NodeId) -> Outcome {
    let v = require_some!(input(g, id, 0));
    let y = require_some!(output(g, id, 0));
    if g.is_graph_output(v) || g.reader_count(v) != 1 {
        return Outcome::Skip;
    }
    // Walk back from v through elementwise ops to one Reshape output `r`.
    let mut region: Vec<NodeId> = Vec::new();
    let mut seen: HashSet<NodeId> = HashSet::new();
    let mut r: Option<ValueId> = None;
    let mut stack = vec![v];
    let mut values: HashSet<ValueId> = HashSet::new();
    while let Some(w) = stack.pop() {
        if !values.insert(w) {
            continue;
        }
        let (p, _) = require_some!(g.value(w).producer);
        let node = g.node(p);
        if !node.domain().is_empty() {
            return Outcome::Skip;
        }
        if node.is("Reshape") {
            if r.is_some_and(|r| r != w) {
                return Outcome::Skip;
            }
            r = Some(w);
            continue;
        }
        if !ELEMENTWISE.contains(&node.op_type.as_str()) || node.outputs.len() != 1 {
            return Outcome::Skip;
        }
        if seen.insert(p) {
            region.push(p);
        }
        if region.len() > MAX_REGION {
            return Outcome::Skip;
        }
        // Clip's min/max and PRelu's slope must be scalars too.
        for (slot, u) in node.inputs.iter().enumerate() {
            let Some(u) = *u else { continue };
            if g.constant(u).is_some() {
                // Checked against the rank of x below.
                continue;
            }
            if slot > 0 && node.is("Clip") {
                return Outcome::Skip;
            }
            stack.push(u);
        }
    }
    let r = require_some!(r);
    if region.is_empty() || g.is_graph_output(r) {
        return Outcome::Skip;
    }
    let (reshape1, _) = require_some!(g.value(r).producer);
    let x = require_some!(input(g, reshape1, 0));
    let x_ty = require_some!(g.value_type(x));
    let x_shape = require_some!(x_ty.shape.clone());
    let r_shape = require_some!(g.value_type(r).and_then(|t| t.shape));
    // Every value in the region has r's shape (no broadcast between
    // non-scalar operands), every constant is a scalar of small rank, and
    // nothing outside the region reads inside it.
    let in_region: HashSet<NodeId> = region.iter().copied().collect();
    for &n in &region {
        let node = g.node(n);
        for u in node.inputs.iter().flatten() {
            if g.constant(*u).is_some() && !scalar_constant(g, *u, x_shape.len().min(r_shape.len()))
            {
                return Outcome::Skip;
            }
        }
        let out = require_some!(output(g, n, 0));
        let shape = g.value_type(out).and_then(|t| t.shape);
        if shape.as_ref() != Some(&r_shape) {
            return Outcome::Skip;
        }
        if out != v
            && (g.is_graph_output(out)
                || g.value(out)
                    .uses
                    .iter()
                    .any(|u| !in_region.contains(&u.node)))
        {
            return Outcome::Skip;
        }
    }
    if g.value(r).uses.iter().any(|u| !in_region.contains(&u.node)) {
        return Outcome::Skip;
    }

    // Rebuild the region on x, in graph order.
    let mut p = Patch::new();
    let mut mapped: HashMap<ValueId, PatchValue> = HashMap::new();
    mapped.insert(r, PatchValue::Existing(x));
    // Dependency order within the region (each node after the region nodes
    // it reads), whatever the graph's order.
    let mut order: Vec<NodeId> = Vec::with_capacity(region.len());
    let mut ready: HashSet<ValueId> = HashSet::from([r]);
    while order.len() < region.len() {
        let before = order.len();
        for &n in &region {
            if order.contains(&n) {
                continue;
            }
            let node = g.node(n);
            let inputs_ready = node
                .inputs
                .iter()
                .flatten()
                .all(|u| ready.contains(u) || !values.contains(u));
            if inputs_ready {
                order.push(n);
                ready.insert(require_some!(output(g, n, 0)));
            }
        }
        if order.len() == before {
            return Outcome::Skip;
        }
    }
    for &n in &order {
        let node = g.node(n);
        let mut copy = node.clone();
        copy.inputs.clear();
        copy.outputs.clear();
        let inputs = node
            .inputs
            .iter()
            .map(|u| u.map(|u| mapped.get(&u).copied().unwrap_or(PatchValue::Existing(u))))
            .collect();
        let k = p.add_node(copy, inputs, vec![String::new()]);
        let new = PatchValue::NewNode { node: k, output: 0 };
        let out = require_some!(output(g, n, 0));
        if let Some(t) = g.value_type(out) {
            p.set_type(
                new,
                TensorType {
                    dtype: t.dtype,
                    shape: Some(x_shape.clone()),
                },
            );
        }
        mapped.insert(out, new);
    }
    let fv = require_some!(mapped.get(&v).copied());
    let y_shape = g.value_type(y).and_then(|t| t.shape);
    let fully_known =
        |s: &[infopt_ir::Dim]| s.iter().all(|d| matches!(d, infopt_ir::Dim::Known(_)));
    if y_shape.as_deref() == Some(&x_shape[..]) && fully_known(&x_shape) {
        p.replace(y, fv);
    } else {
        let mut second = g.node(id).clone();
        second.inputs.clear();
        second.outputs.clear();
        let k = p.add_node(
            second,
            vec![Some(fv), input(g, id, 1).map(PatchValue::Existing)],
            vec![String::new()],
        );
        let new = PatchValue::NewNode { node: k, output: 0 };
        crate::util::carry_type(&mut p, g, y, new);
        p.replace(y, new);
    }
    p.remove_node(id);
    p.remove_node(reshape1);
    for n in order {
        p.remove_node(n);
    }
    Outcome::Rewrite(p)
}
