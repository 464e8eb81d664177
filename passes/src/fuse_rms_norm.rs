//! Replaces RMSNorm written out as elementwise ops by `RMSNormalization`.
//!
//! ## What it does
//! `x / sqrt(mean(x²) + eps) · gamma`, the mean over trailing axes, becomes
//! `RMSNormalization(x, gamma, axis=-k, epsilon=eps)` (opset 23 and later).
//! The division may be `Div(x, Sqrt(·))`, `Mul(x, Reciprocal(Sqrt(·)))`,
//! `Mul(x, Div(1, Sqrt(·)))` or `Mul(x, Pow(·, -0.5))`; `x²` may be
//! `Pow(x, 2)` or `Mul(x, x)`; the `Mul(gamma)` is optional (a ones scale
//! then) and takes either operand order. `gamma` is a constant, or a value
//! computed at run time (a graph input, as in the ONNX function expansion)
//! whose shape is exactly the normalized dims, which becomes the scale input. HF Llama-style exports wrap the
//! statistics in `Cast(x, to=float32)` … `Cast(·, to=<x's type>)` before
//! the `Mul(gamma)`: both Casts are absorbed, since the op computes its
//! statistics in float32 (`stash_type` 1) and returns x's type. The axes
//! are read from the ReduceMean's attribute (before opset 18) or constant
//! input (from 18). The new node takes the name of the last node of the
//! pattern and its output.
//!
//! ## When it declines
//! Below opset 23 (no RMSNormalization; `--upgrade-opset 23` raises the
//! model first); when the reduced axes are not the trailing ones or the
//! normalized dims are not statically known; when `eps` is not a scalar
//! constant; when `gamma` varies over an axis outside the normalized ones
//! (the Mul then stays); when an intermediate value has a reader outside
//! the pattern or is a graph output; when a leading Cast to float32 has no
//! matching Cast back (the fused op would return float32 where the pattern
//! returned x's type, or the other way round); for float64 data.
//!
//! ## Numerics
//! Not bit-exact: the op computes the statistics in one kernel, in float32;
//! a few ulp for float32 data. With the Llama Casts absorbed the product by
//! `gamma` happens before the rounding to x's type instead of after it (one
//! rounding less).
//!
//! ## Example
//! `s = Pow(x, 2)`, `v = ReduceMean(s, axes=[-1])`, `e = Add(v, 1e-6)`,
//! `r = Sqrt(e)`, `i = Reciprocal(r)`, `n = Mul(x, i)`, `y = Mul(n, gamma)`
//! becomes `y = RMSNormalization(x, gamma, axis=-1, epsilon=1e-6)`.

crate::register_pass! {
    name: "fuse-rms-norm",
    kind: Fuse,
    file: "fuse_rms_norm.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseRmsNorm,
}

use infopt_ir::{Attribute, DataType, Graph, Model, Node, NodeId, PatchValue, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::pattern::{
    Shapes, affine_tail, apply_with_shapes, divided_by_sqrt, over_normalized_dims, plus_epsilon,
    private, producer, read_only_by, reduce_mean_axes, replace_into, squared, trailing_count,
    trailing_known,
};
use crate::rule::Outcome;
use crate::util::{input, node_label, output, tensor_from_f64};
use crate::{decline, require, require_some};

pub struct FuseRmsNorm;

/// The op exists from this opset on.
const MIN_OPSET: i64 = 23;

/// ONNX's code for float32 in Cast's `to`.
const TO_FLOAT: i64 = 1;

/// `v = Cast(x, to=float32)`: returns (x, the Cast).
fn cast_to_float(g: &Graph, v: ValueId) -> Option<(ValueId, NodeId)> {
    let (c, node) = producer(g, v, "Cast")?;
    (node.attr_int("to").ok()?? == TO_FLOAT).then_some(())?;
    Some((input(g, c, 0)?, c))
}

/// The only reader of `v` when it is `Cast(v, to=dtype)`: (the Cast, its output).
fn cast_back(g: &Graph, v: ValueId, dtype: DataType) -> Option<(NodeId, ValueId)> {
    private(g, v).then_some(())?;
    let (reader, _) = g.input_uses(v).next()?;
    let node = g.node(reader);
    (node.domain().is_empty() && node.is("Cast")).then_some(())?;
    (node.attr_int("to").ok()?? == dtype.code() as i64).then_some(())?;
    Some((reader, output(g, reader, 0)?))
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx, shapes: &Shapes) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty() && matches!(node.op_type.as_str(), "Div" | "Mul"));
    let (h, w, inv_nodes) = require_some!(divided_by_sqrt(g, id));
    let (add_eps, var, eps) = require_some!(plus_epsilon(g, w));
    let (rm, _) = require_some!(producer(g, var, "ReduceMean"));
    let sq = require_some!(input(g, rm, 0));
    let (sq_of, sq_node) = require_some!(squared(g, sq));
    require!(sq_of == h);
    // A centered value makes this a LayerNorm (fuse-layer-norm's).
    require!(producer(g, h, "Sub").is_none_or(|(s, _)| {
        let m = input(g, s, 1);
        m.and_then(|m| producer(g, m, "ReduceMean")).is_none()
    }));
    if cx.opset < MIN_OPSET {
        decline!(
            "decomposed RMSNorm needs opset {MIN_OPSET} for RMSNormalization (model has {}); {}",
            cx.opset,
            crate::upgrade_opset::remedy(MIN_OPSET)
        );
    }
    let mut inner = vec![sq_node, rm, add_eps, id];
    inner.extend(&inv_nodes);
    for v in [sq, var, w] {
        require!(private(g, v));
    }
    if !read_only_by(g, h, &inner) {
        decline!("the normalized value '{}' has readers outside the RMSNorm", g.value(h).name);
    }
    let n = require_some!(output(g, id, 0));
    // HF Llama: Cast(x → f32) … Cast(→ x's type) around the statistics.
    let mut x = h;
    let mut casts = Vec::new();
    let mut normalized = n;
    if let Some((x0, c0)) = cast_to_float(g, h) {
        let t0 = shapes.dtype(g, x0);
        match t0 {
            Some(DataType::Float) => {
                // A float32 → float32 Cast is a copy: absorb it, and a Cast
                // back to float32 as well if there is one.
                x = x0;
                casts.push(c0);
                if let Some((c1, out)) = cast_back(g, n, DataType::Float) {
                    casts.push(c1);
                    normalized = out;
                }
            }
            Some(t @ (DataType::Float16 | DataType::Bfloat16)) => {
                if let Some((c1, out)) = cast_back(g, n, t) {
                    x = x0;
                    casts.extend([c0, c1]);
                    normalized = out;
                }
            }
            _ => {}
        }
    }
    let dims = shapes.dims(g, x);
    let rank = dims.as_ref().map(|d| d.len());
    let Some(axes) = reduce_mean_axes(g, rm, cx.opset) else {
        decline!("the RMSNorm ReduceMean has non-constant axes or keepdims=0");
    };
    let Some(k) = trailing_count(axes.as_slice(), rank) else {
        decline!("the RMSNorm mean is not over trailing axes");
    };
    let Some(norm) = dims.as_deref().and_then(|d| trailing_known(d, k)) else {
        decline!("the normalized dims of '{}' are not known (or span over 2^24 elements)", g.value(x).name);
    };
    let rank = rank.unwrap_or(k);
    let dtype = match shapes.dtype(g, x) {
        Some(t @ (DataType::Float | DataType::Float16 | DataType::Bfloat16)) => t,
        Some(t) => decline!("RMSNorm on {t:?} data is left alone"),
        None => decline!("the element type of '{}' is not known", g.value(x).name),
    };
    // A gain computed at run time (a graph input, as in the ONNX function's
    // expansion) becomes the op's scale input as it is, when its shape is
    // exactly the normalized dims.
    let runtime_gain = |v: ValueId| {
        g.constant(v).is_none()
            && shapes.dtype(g, v) == Some(dtype)
            && shapes
                .dims(g, v)
                .is_some_and(|d| d.len() == k && trailing_known(&d, k).as_deref() == Some(&norm[..]))
    };
    let fits = |v: ValueId| {
        runtime_gain(v)
            || g.constant(v).is_some_and(|t| {
                t.dtype() == dtype && over_normalized_dims(t, rank, &norm).is_some()
            })
    };
    let tail = affine_tail(g, normalized, false, &fits);
    let numel: i64 = norm.iter().product();
    let runtime_scale = tail.gamma.map(|(_, v)| v).filter(|&v| runtime_gain(v));
    let gamma = tail
        .gamma
        .and_then(|(_, v)| over_normalized_dims(g.constant(v)?, rank, &norm))
        .unwrap_or_else(|| vec![1.0; numel as usize]);
    let mut remove = inner;
    remove.extend(&casts);
    remove.extend(tail.nodes());
    let last = tail
        .nodes()
        .last()
        .copied()
        .or(casts.last().copied())
        .unwrap_or(id);
    let label = node_label(g, last);
    let mut p = infopt_ir::Patch::new();
    let scale = match runtime_scale {
        Some(v) => PatchValue::Existing(v),
        None => {
            let gamma_t = require_some!(tensor_from_f64(dtype, norm, &gamma));
            p.add_initializer(&format!("{label}.scale"), gamma_t)
        }
    };
    let inputs = vec![Some(PatchValue::Existing(x)), Some(scale)];
    let mut rms = Node::new("RMSNormalization");
    rms.name = g.node(last).name.clone();
    rms.set_attr(Attribute::int("axis", -(k as i64)));
    rms.set_attr(Attribute::float("epsilon", eps as f32));
    Outcome::Rewrite(replace_into(p, g, rms, inputs, tail.out, shapes.ty(g, tail.out), &remove))
}

impl Pass for FuseRmsNorm {
    fn name(&self) -> &'static str {
        "fuse-rms-norm"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_with_shapes(model, cx, &rule)
    }
}
