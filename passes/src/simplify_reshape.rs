//! Replaces a Reshape target computed from the input's own shape by a constant.
//!
//! ## What it does
//! Exporters write `Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))`
//! to say "keep the batch dim, flatten the rest". Shape inference knows that
//! target's value symbolically (`[batch, -1]`); where an element is exactly
//! the input's dim at the same position it becomes `0` ("copy this dim"), so
//! the target is the constant `[0, -1]` and the Shape/Gather/Unsqueeze/Concat
//! scaffolding becomes dead. Dynamic dims stay dynamic.
//!
//! One element that is neither (`4*batch` where the input has `4*batch*49`
//! rows of 8, or a product of window counts that inference cannot name,
//! such as `(h + (7 - h % 7) % 7) / 7` behind a Pad of symbolic extent)
//! becomes `-1`: window partitions and head merges whose target is computed
//! from another tensor's shape. Whenever the original Reshape runs, that
//! element is the input's volume divided by the others, which is what `-1`
//! computes.
//!
//! ## When it declines
//! Reshape with `allowzero=1` (0 then means an empty dim), targets with two
//! elements that are neither a known number nor the input's own dim at that
//! position, one whose value inference knows and the volume provably does
//! not leave (the original can only fail there, and stays as it is), and
//! targets with more than one `-1`. Nothing is recorded for
//! targets that are already constant.
//!
//! ## Numerics
//! Exact: the same shape on every run where the original Reshape succeeds.
//!
//! Also skips a Reshape whose result is only reshaped again
//! (`Reshape(Reshape(a, s1), s2)` reads `a` directly) when no element of `s2`
//! can be 0.
//!
//! ## Example
//! `x: [batch, 4, 8, 8]`, `y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))`
//! becomes `y = Reshape(x, [0, -1])`.

crate::register_pass! {
    name: "simplify-reshape",
    kind: Fold,
    file: "simplify_reshape.rs",
    options: crate::registry::NoOptions,
    build: |_| SimplifyReshape,
}

use infopt_ir::infer::{Opsets, Scope, infer_graph, sym};
use infopt_ir::{DataType, Dim, Graph, Model, Tensor};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::for_each_graph_mut;

pub struct SimplifyReshape;

fn simplify_graph(g: &mut Graph, opsets: Opsets, cx: &mut PassCx) -> usize {
    let mut report = Default::default();
    let facts = infer_graph(g, opsets, &Scope::default(), &mut report);
    let mut count = 0;
    for id in g.node_ids() {
        let node = g.node(id);
        if !node.is("Reshape") || node.attr_int_or("allowzero", 0).unwrap_or(0) != 0 {
            continue;
        }
        let (Some(Some(data)), Some(Some(shape))) = (node.inputs.first(), node.inputs.get(1))
        else {
            continue;
        };
        let (data, shape) = (*data, *shape);
        let value = facts.get(shape).and_then(|f| f.value.as_ref());
        // Reshape(Reshape(a, s1), s2) = Reshape(a, s2) when no element of s2 is
        // 0 (which would copy a dim of the intermediate shape): a known value
        // without 0, or symbols (sizes, at least 1).
        if let Some(v) = value {
            let no_zero = v
                .elems
                .iter()
                .all(|e| !matches!(e, Dim::Known(0) | Dim::Unknown));
            if let Some((first, _)) = g.value(data).producer {
                let first_node = g.node(first);
                let single = g.reader_count(data) == 1;
                if no_zero
                    && single
                    && first_node.is("Reshape")
                    && let Some(Some(a)) = first_node.inputs.first().copied()
                {
                    g.set_input(id, 0, Some(a));
                    count += 1;
                    continue;
                }
            }
        }
        if g.constant(shape).is_some() {
            continue;
        }
        let Some(value) = value else { continue };
        // Without the input's shape no element can be a copy of its dim;
        // the one unknown element may still become -1.
        let data_dims: Vec<Dim> = facts
            .get(data)
            .and_then(|f| f.shape())
            .map(|d| d.to_vec())
            .unwrap_or_default();
        let mut target = Vec::with_capacity(value.elems.len());
        let mut ok = true;
        // The one element that is neither known nor the input's own dim.
        let mut inferred: Option<usize> = None;
        for (j, e) in value.elems.iter().enumerate() {
            match e {
                Dim::Known(k) => target.push(*k),
                Dim::Sym(s) if matches!(data_dims.get(j), Some(Dim::Sym(d)) if d == s) => {
                    target.push(0)
                }
                _ if inferred.is_none() => {
                    inferred = Some(j);
                    target.push(-1);
                }
                _ => {
                    ok = false;
                    break;
                }
            }
        }
        // That element may be left to Reshape (-1): on every run where the
        // original Reshape succeeds it equals the input's volume divided by
        // the other elements, which is what -1 computes. Where inference
        // knows both the volume and the element and they differ (`3*batch`
        // rows of 12 for `48*batch` elements), the original can only fail,
        // and the rewrite declines rather than make it succeed.
        if ok
            && let Some(j) = inferred
            && volume_contradicts(&data_dims, &value.elems, &target, j)
        {
            ok = false;
        }
        if !ok || target.iter().filter(|&&d| d == -1).count() > 1 || value.scalar {
            let at = g.node(id).name_or_op().to_string();
            if !ok {
                cx.decline(
                    &at,
                    "target shape depends on dims other than the input's own at the same position",
                );
            }
            continue;
        }
        let name = format!("{}.shape", g.value(shape).name);
        let t = Tensor::from_i64(vec![target.len() as i64], &target);
        debug_assert_eq!(t.dtype(), DataType::Int64);
        let init = g.add_initializer(&name, t);
        g.set_input(id, 1, Some(init));
        count += 1;
    }
    count
}

/// Whether the input's volume divided by the other target elements
/// (`target` as it will be: known sizes, 0 copying the input's dim at that
/// position, -1 at `j` and nowhere else) is known and is not `elems[j]`.
/// Unknown volumes or elements do not contradict: the original Reshape
/// decides at run time, and -1 agrees with it whenever it runs.
fn volume_contradicts(data_dims: &[Dim], elems: &[Dim], target: &[i64], j: usize) -> bool {
    if matches!(elems[j], Dim::Unknown) || data_dims.is_empty() {
        return false;
    }
    let mut rest = Vec::with_capacity(target.len());
    for (i, &t) in target.iter().enumerate() {
        match t {
            _ if i == j => {}
            0 => match data_dims.get(i) {
                Some(d) => rest.push(d.clone()),
                None => return false,
            },
            k if k > 0 => rest.push(Dim::Known(k)),
            // A second -1 (declined by the caller) or a negative size.
            _ => return false,
        }
    }
    let volume = sym::product(data_dims);
    // Only polynomials over plain symbols are compared: dims stated as text
    // infopt does not parse (sympy's `floor(h/2 - 1/2)` from another tool's
    // shape inference) are opaque, and two spellings of one size differ.
    if matches!(volume, Dim::Unknown) || !plain(&volume) || !plain(&elems[j]) {
        return false;
    }
    let left = sym::div_exact(&volume, &sym::product(&rest));
    // A volume the other elements do not divide, or a different quotient.
    matches!(left, Dim::Unknown) || sym::canonical(&left) != sym::canonical(&elems[j])
}

/// Every symbol of `d` is a plain name (letters, digits, `_`).
fn plain(d: &Dim) -> bool {
    sym::symbols_of(d)
        .iter()
        .all(|s| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

impl Pass for SimplifyReshape {
    fn name(&self) -> &'static str {
        "simplify-reshape"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let opsets = Opsets::of(model);
        let mut count = 0;
        for_each_graph_mut(&mut model.graph, &mut |g| {
            count += simplify_graph(g, opsets, cx);
            Ok(())
        })?;
        Ok(count)
    }
}
