//! Replaces LayerNorm written out as elementwise ops by `LayerNormalization`.
//!
//! ## What it does
//! `(x - mean(x)) / sqrt(mean((x - mean(x))²) + eps) * gamma + beta`, with
//! both means over the same trailing axes, becomes
//! `LayerNormalization(x, gamma, beta, axis=-k, epsilon=eps)` (opset 17 and
//! later). This is how torch.onnx writes `nn.LayerNorm` before opset 17 and
//! how tf2onnx and paddle2onnx write it at any opset: `ReduceMean`, `Sub`,
//! `Pow(·, 2)` or `Mul(d, d)`, `ReduceMean`, `Add(eps)`, `Sqrt`, then `Div`
//! or `Reciprocal`/`Div(1, ·)` + `Mul` (or `Pow(·, -0.5)` + `Mul` without
//! the Sqrt), then an optional `Mul(gamma)` and an optional `Add(beta)`,
//! operands of Mul and Add in either order. The axes are read from the
//! attribute (before opset 18) or the constant input (from 18). `gamma` and
//! `beta` are rewritten as initializers over exactly the normalized dims
//! (broadcast where the original was); without `Mul(gamma)` the op gets a
//! ones initializer, without `Add(beta)` no bias input. The new node takes
//! the name of the last node of the pattern and its output.
//!
//! ## When it declines
//! Below opset 17 (no LayerNormalization; `--upgrade-opset 17` raises the
//! model first); when the reduced axes are not the trailing ones, differ
//! between the two means, or the normalized dims are not statically known;
//! when `eps` is not a scalar constant; when `gamma`/`beta` vary over an
//! axis outside the normalized ones (then the Mul/Add stay after the fused
//! op); when an intermediate value has a reader outside the pattern or is a
//! graph output; for float64 data (the op's statistics are float32).
//!
//! ## Numerics
//! Not bit-exact: runtimes compute the statistics in one fused kernel (in
//! float32 for float16 inputs, `stash_type` 1), where the pattern rounded
//! every intermediate to the data type. Differences are a few ulp for
//! float32; for float16 inputs the fused op is more accurate than the
//! pattern.
//!
//! ## Example
//! `m = ReduceMean(x, axes=[-1])`, `d = Sub(x, m)`, `s = Pow(d, 2)`,
//! `v = ReduceMean(s, axes=[-1])`, `e = Add(v, 1e-5)`, `r = Sqrt(e)`,
//! `n = Div(d, r)`, `g = Mul(n, gamma)`, `y = Add(g, beta)` becomes
//! `y = LayerNormalization(x, gamma, beta, axis=-1, epsilon=1e-5)`.

crate::register_pass! {
    name: "fuse-layer-norm",
    kind: Fuse,
    file: "fuse_layer_norm.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseLayerNorm,
}

use infopt_ir::{Attribute, DataType, Graph, Model, Node, NodeId, PatchValue, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::pattern::{
    Shapes, affine_tail, apply_with_shapes, divided_by_sqrt, over_normalized_dims, plus_epsilon,
    producer, read_only_by, reduce_mean_axes, replace_into, squared, trailing_count,
    trailing_known,
};
use crate::rule::Outcome;
use crate::util::{node_label, output, tensor_from_f64};
use crate::{decline, require, require_some};

pub struct FuseLayerNorm;

/// The op exists from this opset on.
const MIN_OPSET: i64 = 17;

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx, shapes: &Shapes) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty() && matches!(node.op_type.as_str(), "Div" | "Mul"));
    // n = d / sqrt(w)
    let (d, w, inv_nodes) = require_some!(divided_by_sqrt(g, id));
    // w = var + eps
    let (add_eps, var, eps) = require_some!(plus_epsilon(g, w));
    // var = ReduceMean(d²)
    let (rm2, _) = require_some!(producer(g, var, "ReduceMean"));
    let sq = require_some!(crate::util::input(g, rm2, 0));
    let (sq_of, sq_node) = require_some!(squared(g, sq));
    require!(sq_of == d);
    // d = x - ReduceMean(x)
    let (sub, _) = require_some!(producer(g, d, "Sub"));
    let (x, m) = require_some!(crate::pattern::operands(g, sub));
    let (rm1, _) = require_some!(producer(g, m, "ReduceMean"));
    require!(crate::util::input(g, rm1, 0) == Some(x));
    if cx.opset < MIN_OPSET {
        decline!(
            "decomposed LayerNorm needs opset {MIN_OPSET} for LayerNormalization (model has {}); --upgrade-opset {MIN_OPSET} raises it",
            cx.opset
        );
    }
    let dims = shapes.dims(g, x);
    let rank = dims.as_ref().map(|d| d.len());
    let (Some(axes1), Some(axes2)) = (
        reduce_mean_axes(g, rm1, cx.opset),
        reduce_mean_axes(g, rm2, cx.opset),
    ) else {
        decline!("a ReduceMean of the LayerNorm has non-constant axes or keepdims=0");
    };
    let k1 = trailing_count(axes1.as_slice(), rank);
    let k2 = trailing_count(axes2.as_slice(), rank);
    let k = match (k1, k2) {
        (Some(a), Some(b)) if a == b => a,
        _ => decline!("the LayerNorm means are not over the same trailing axes"),
    };
    let Some(norm) = dims.as_deref().and_then(|d| trailing_known(d, k)) else {
        decline!("the normalized dims of '{}' are not known", g.value(x).name);
    };
    let rank = dims.as_ref().map_or(k, |d| d.len());
    let dtype = shapes.dtype(g, x);
    let dtype = match dtype {
        Some(t @ (DataType::Float | DataType::Float16 | DataType::Bfloat16)) => t,
        Some(t) => decline!("LayerNorm on {t:?} data is left alone"),
        None => decline!("the element type of '{}' is not known", g.value(x).name),
    };
    // The inner values are read only inside the pattern.
    let mut inner = vec![rm1, sub, sq_node, rm2, add_eps, id];
    inner.extend(&inv_nodes);
    for v in [m, sq, var, w] {
        require!(crate::pattern::private(g, v));
    }
    if !read_only_by(g, d, &inner) {
        decline!("the centered value '{}' has readers outside the LayerNorm", g.value(d).name);
    }
    let n = require_some!(output(g, id, 0));
    // A weight that is not per normalized element stays where it is.
    let fits = |v: ValueId| {
        g.constant(v).is_some_and(|t| {
            t.dtype() == dtype && over_normalized_dims(t, rank, &norm).is_some()
        })
    };
    let tail = affine_tail(g, n, true, &fits);
    let values = |v: Option<(NodeId, ValueId)>| {
        v.and_then(|(_, v)| over_normalized_dims(g.constant(v)?, rank, &norm))
    };
    let numel: i64 = norm.iter().product();
    let gamma = values(tail.gamma).unwrap_or_else(|| vec![1.0; numel as usize]);
    let last = tail.nodes().last().copied().unwrap_or(id);
    let label = node_label(g, last);
    let mut p = infopt_ir::Patch::new();
    let gamma_t = require_some!(tensor_from_f64(dtype, norm.clone(), &gamma));
    let mut inputs = vec![
        Some(PatchValue::Existing(x)),
        Some(p.add_initializer(&format!("{label}.scale"), gamma_t)),
    ];
    if let Some(b) = values(tail.beta) {
        let beta_t = require_some!(tensor_from_f64(dtype, norm.clone(), &b));
        inputs.push(Some(p.add_initializer(&format!("{label}.bias"), beta_t)));
    }
    let mut ln = Node::new("LayerNormalization");
    ln.name = g.node(last).name.clone();
    ln.set_attr(Attribute::int("axis", -(k as i64)));
    ln.set_attr(Attribute::float("epsilon", eps as f32));
    let mut remove = inner;
    remove.extend(tail.nodes());
    Outcome::Rewrite(replace_into(p, g, ln, inputs, tail.out, shapes.ty(g, tail.out), &remove))
}

impl Pass for FuseLayerNorm {
    fn name(&self) -> &'static str {
        "fuse-layer-norm"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_with_shapes(model, cx, &rule)
    }
}
