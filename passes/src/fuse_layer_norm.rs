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
//! operands of Mul and Add in either order. Keras' LayerNormalization as
//! tf2onnx writes it (through `tf.nn.batch_normalization`):
//! `a = gamma · 1/sqrt(var + eps)`, `y = x · a + (beta − mean · a)`, with
//! the same statistics, is the same op. The axes are read from the
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
    Shapes, affine_tail, apply_with_shapes, divided_by_sqrt, inverse_sqrt, over_normalized_dims,
    plus_epsilon, producer, read_only_by, reduce_mean_axes, replace_into, squared,
    trailing_count, trailing_known,
};
use crate::rule::Outcome;
use crate::util::{node_label, output, tensor_from_f64};
use crate::{decline, require, require_some};

pub struct FuseLayerNorm;

/// The op exists from this opset on.
const MIN_OPSET: i64 = 17;

/// The statistics part shared by both forms: `w = mean((x - mean(x))²) + eps`.
struct Stats {
    x: ValueId,
    /// `mean(x)`
    m: ValueId,
    /// `x - mean(x)`
    d: ValueId,
    eps: f64,
    rm1: NodeId,
    rm2: NodeId,
    /// Sub, square, the second ReduceMean and the Add of eps.
    nodes: Vec<NodeId>,
    /// Values read only inside the statistics.
    private: Vec<ValueId>,
}

fn statistics(g: &Graph, w: ValueId) -> Option<Stats> {
    let (add_eps, var, eps) = plus_epsilon(g, w)?;
    let (rm2, _) = producer(g, var, "ReduceMean")?;
    let sq = crate::util::input(g, rm2, 0)?;
    let (d, sq_node) = squared(g, sq)?;
    let (sub, _) = producer(g, d, "Sub")?;
    let (x, m) = crate::pattern::operands(g, sub)?;
    let (rm1, _) = producer(g, m, "ReduceMean")?;
    (crate::util::input(g, rm1, 0) == Some(x)).then_some(())?;
    Some(Stats {
        x,
        m,
        d,
        eps,
        rm1,
        rm2,
        nodes: vec![rm1, sub, sq_node, rm2, add_eps],
        private: vec![sq, var, w],
    })
}

/// What the checks of the statistics found: the number of normalized
/// (trailing) axes, their sizes, the input's rank and element type.
struct Geometry {
    k: usize,
    norm: Vec<i64>,
    rank: usize,
    dtype: DataType,
}

/// `Err` is the reason to decline.
fn geometry(g: &Graph, cx: &PassCx, shapes: &Shapes, st: &Stats) -> Result<Geometry, String> {
    let decline = |why: String| Err(why);
    if cx.opset < MIN_OPSET {
        return decline(format!(
            "decomposed LayerNorm needs opset {MIN_OPSET} for LayerNormalization (model has {}); {}",
            cx.opset,
            crate::upgrade_opset::remedy(MIN_OPSET)
        ));
    }
    let x = st.x;
    let dims = shapes.dims(g, x);
    let rank = dims.as_ref().map(|d| d.len());
    let (Some(axes1), Some(axes2)) = (
        reduce_mean_axes(g, st.rm1, cx.opset),
        reduce_mean_axes(g, st.rm2, cx.opset),
    ) else {
        return decline("a ReduceMean of the LayerNorm has non-constant axes or keepdims=0".into());
    };
    let k1 = trailing_count(axes1.as_slice(), rank);
    let k2 = trailing_count(axes2.as_slice(), rank);
    let k = match (k1, k2) {
        (Some(a), Some(b)) if a == b => a,
        _ => return decline("the LayerNorm means are not over the same trailing axes".into()),
    };
    let Some(norm) = dims.as_deref().and_then(|d| trailing_known(d, k)) else {
        return decline(format!("the normalized dims of '{}' are not known (or span over 2^24 elements)", g.value(x).name));
    };
    let dtype = match shapes.dtype(g, x) {
        Some(t @ (DataType::Float | DataType::Float16 | DataType::Bfloat16)) => t,
        Some(t) => return decline(format!("LayerNorm on {t:?} data is left alone")),
        None => return decline(format!("the element type of '{}' is not known", g.value(x).name)),
    };
    Ok(Geometry {
        k,
        norm,
        rank: rank.unwrap_or(k),
        dtype,
    })
}

/// `LayerNormalization(x, gamma, beta)` replacing `remove`, its output
/// taking over `out`. `gamma`/`beta` are the pattern's constants (checked to
/// fit over the normalized dims by the caller); no gamma is a ones scale.
#[allow(clippy::too_many_arguments)]
fn build(
    g: &Graph,
    shapes: &Shapes,
    st: &Stats,
    geo: &Geometry,
    gamma: Option<ValueId>,
    beta: Option<ValueId>,
    remove: &[NodeId],
    out: ValueId,
) -> Outcome {
    let values = |v: Option<ValueId>| v.and_then(|v| over_normalized_dims(g.constant(v)?, geo.rank, &geo.norm));
    let numel: i64 = geo.norm.iter().product();
    let gamma = values(gamma).unwrap_or_else(|| vec![1.0; numel as usize]);
    let last = *require_some!(remove.last());
    let label = node_label(g, last);
    let mut p = infopt_ir::Patch::new();
    let gamma_t = require_some!(tensor_from_f64(geo.dtype, geo.norm.clone(), &gamma));
    let mut inputs = vec![
        Some(PatchValue::Existing(st.x)),
        Some(p.add_initializer(&format!("{label}.scale"), gamma_t)),
    ];
    if let Some(b) = values(beta) {
        let beta_t = require_some!(tensor_from_f64(geo.dtype, geo.norm.clone(), &b));
        inputs.push(Some(p.add_initializer(&format!("{label}.bias"), beta_t)));
    }
    let mut ln = Node::new("LayerNormalization");
    ln.name = g.node(last).name.clone();
    ln.set_attr(Attribute::int("axis", -(geo.k as i64)));
    ln.set_attr(Attribute::float("epsilon", st.eps as f32));
    Outcome::Rewrite(replace_into(p, g, ln, inputs, out, shapes.ty(g, out), remove))
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx, shapes: &Shapes) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty());
    match node.op_type.as_str() {
        "Div" | "Mul" => centered_form(g, id, cx, shapes),
        "Add" => scaled_shift_form(g, id, cx, shapes),
        _ => Outcome::Skip,
    }
}

/// `(x - mean) / sqrt(var + eps) [* gamma] [+ beta]`, anchored at the division.
fn centered_form(g: &Graph, id: NodeId, cx: &mut PassCx, shapes: &Shapes) -> Outcome {
    // n = d / sqrt(w)
    let (d, w, inv_nodes) = require_some!(divided_by_sqrt(g, id));
    let st = require_some!(statistics(g, w));
    require!(st.d == d);
    let geo = match geometry(g, cx, shapes, &st) {
        Ok(geo) => geo,
        Err(why) => return Outcome::Decline(why),
    };
    // The inner values are read only inside the pattern.
    let mut inner = st.nodes.clone();
    inner.extend(&inv_nodes);
    inner.push(id);
    for &v in st.private.iter().chain([&st.m]) {
        require!(crate::pattern::private(g, v));
    }
    if !read_only_by(g, d, &inner) {
        decline!("the centered value '{}' has readers outside the LayerNorm", g.value(d).name);
    }
    let n = require_some!(output(g, id, 0));
    // A weight that is not per normalized element stays where it is.
    let fits = |v: ValueId| {
        g.constant(v).is_some_and(|t| {
            t.dtype() == geo.dtype && over_normalized_dims(t, geo.rank, &geo.norm).is_some()
        })
    };
    let tail = affine_tail(g, n, true, &fits);
    let mut remove = inner;
    remove.extend(tail.nodes());
    build(
        g,
        shapes,
        &st,
        &geo,
        tail.gamma.map(|(_, v)| v),
        tail.beta.map(|(_, v)| v),
        &remove,
        tail.out,
    )
}

/// Keras' LayerNormalization through `tf.nn.batch_normalization`, as
/// tf2onnx writes it: `a = gamma / sqrt(var + eps)`,
/// `y = x * a + (beta - mean * a)`, anchored at the final Add.
fn scaled_shift_form(g: &Graph, id: NodeId, cx: &mut PassCx, shapes: &Shapes) -> Outcome {
    let (p, q) = require_some!(crate::pattern::operands(g, id));
    // One operand is beta - mean * a, the other x * a.
    let found = [(p, q), (q, p)].into_iter().find_map(|(xa, shift)| {
        let (sub, _) = producer(g, shift, "Sub")?;
        let (beta, ma) = crate::pattern::operands(g, sub)?;
        g.constant(beta)?;
        let (ma_node, _) = producer(g, ma, "Mul")?;
        let (xa_node, _) = producer(g, xa, "Mul")?;
        Some((xa, xa_node, shift, sub, beta, ma, ma_node))
    });
    let (xa, xa_node, shift, sub, beta, ma, ma_node) = require_some!(found);
    // a is the operand x * a and mean * a share; mean * a reads mean(x).
    let (m1, m2) = require_some!(crate::pattern::operands(g, ma_node));
    let (x1, x2) = require_some!(crate::pattern::operands(g, xa_node));
    let pairs = [(m1, m2), (m2, m1)];
    let (m, a, x) = require_some!(pairs.into_iter().find_map(|(m, a)| {
        producer(g, m, "ReduceMean")?;
        let x = if x1 == a { x2 } else if x2 == a { x1 } else { return None };
        Some((m, a, x))
    }));
    // a = 1/sqrt(w) [* gamma]
    let (inv, gamma, a_nodes) = match producer(g, a, "Mul") {
        Some((mul, _)) => {
            let (u, v) = require_some!(crate::pattern::operands(g, mul));
            let (inv, gamma) = if g.constant(v).is_some() { (u, v) } else { (v, u) };
            require!(g.constant(gamma).is_some() && crate::pattern::private(g, inv));
            (inv, Some(gamma), vec![mul])
        }
        None => (a, None, Vec::new()),
    };
    let (w, inv_nodes) = require_some!(inverse_sqrt(g, inv));
    let st = require_some!(statistics(g, w));
    require!(st.x == x && st.m == m);
    let geo = match geometry(g, cx, shapes, &st) {
        Ok(geo) => geo,
        Err(why) => return Outcome::Decline(why),
    };
    let mut remove = st.nodes.clone();
    remove.extend(&inv_nodes);
    remove.extend(&a_nodes);
    remove.extend([ma_node, xa_node, sub, id]);
    for &v in st.private.iter().chain([&xa, &shift, &ma]) {
        if !crate::pattern::private(g, v) {
            decline!("'{}' inside the LayerNorm has other readers", g.value(v).name);
        }
    }
    if !read_only_by(g, m, &remove) || !read_only_by(g, a, &remove) || !read_only_by(g, st.d, &remove) {
        decline!("the LayerNorm statistics have readers outside it");
    }
    for v in gamma.iter().chain([&beta]) {
        let fits = g.constant(*v).is_some_and(|t| {
            t.dtype() == geo.dtype && over_normalized_dims(t, geo.rank, &geo.norm).is_some()
        });
        if !fits {
            decline!("gamma or beta '{}' is not a weight over the normalized dims", g.value(*v).name);
        }
    }
    let out = require_some!(output(g, id, 0));
    build(g, shapes, &st, &geo, gamma, Some(beta), &remove, out)
}

impl Pass for FuseLayerNorm {
    fn name(&self) -> &'static str {
        "fuse-layer-norm"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_with_shapes(model, cx, &rule)
    }
}
