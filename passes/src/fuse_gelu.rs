//! Replaces GELU written out as elementwise ops by `Gelu`.
//!
//! ## What it does
//! The exact form `0.5 · x · (1 + erf(x / √2))` becomes `Gelu(x)` and the
//! tanh form `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))` becomes
//! `Gelu(x, approximate="tanh")` (opset 20 and later). The product may be
//! written in any grouping and order of its three factors (`x`, `0.5`,
//! `1 + erf(…)`), as a chain of two Muls or as one Mul followed by `Div(·, 2)`;
//! `x / √2` may be `Div(x, √2)` or `Mul(x, 1/√2)`; `x³` may be `Pow(x, 3)`,
//! `x·x·x` or `x·x²`. This covers torch.onnx's export of `F.gelu` and of
//! HF's `GELUActivation` (before opset 20), GPT-2's `NewGELUActivation`,
//! tf2onnx's and paddle2onnx's decompositions. Every constant is checked,
//! to a relative 1e-4 (exporters round them to float32 or to a few digits).
//! The new node takes the name of the last node of the pattern and its output.
//!
//! ## When it declines
//! Below opset 20 (no Gelu op; `--upgrade-opset 20` raises the model
//! first); when a constant is off by more than the tolerance (a scaled or
//! shifted variant is a different function); when an intermediate value has
//! another reader or is a graph output (it would still be needed).
//!
//! ## Numerics
//! Not bit-exact: the op evaluates the same formula in one kernel, where the
//! pattern rounded every intermediate; a few ulp for float32. Constants
//! within the tolerance but not equal to the exact ones (√2 written as
//! 1.4142) change the result by at most that relative amount inside erf/tanh.
//!
//! ## Example
//! `a = Div(x, 1.4142135)`, `e = Erf(a)`, `b = Add(e, 1)`, `c = Mul(x, b)`,
//! `y = Mul(c, 0.5)` becomes `y = Gelu(x)`.

crate::register_pass! {
    name: "fuse-gelu",
    kind: Fuse,
    file: "fuse_gelu.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseGelu,
}

use infopt_ir::{Attribute, Graph, Model, Node, NodeId, PatchValue, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::pattern::{close, operands, private, producer, scalar, split_scalar};
use crate::rule::{Outcome, apply_rule};
use crate::util::{input, output, replace_with_node};
use crate::{decline, require, require_some};

pub struct FuseGelu;

/// The op exists from this opset on.
const MIN_OPSET: i64 = 20;
/// Relative tolerance of the pattern's constants.
const TOL: f64 = 1e-4;
const TANH_CUBIC: f64 = 0.044715;

/// A factor of the product: a scalar constant or a value.
enum Factor {
    Const(f64),
    Value(ValueId),
}

/// The divisor of `Div(a, c)` as a factor `1/c`, when `c` is a nonzero
/// scalar constant (a division by a value is not a product).
fn constant_divisor(g: &Graph, id: NodeId) -> Option<f64> {
    let c = scalar(g, input(g, id, 1)?)?;
    (c != 0.0 && c.is_finite()).then(|| 1.0 / c)
}

/// Flattens a product rooted at the Mul (or Div by a constant) `id` into
/// its factors, looking through private inner Muls and Divs by constants
/// (at most `depth` levels). `nodes` collects the nodes taken. `None` when
/// `id` is a Div by something other than a scalar constant.
fn factors(g: &Graph, id: NodeId, depth: usize, nodes: &mut Vec<NodeId>, out: &mut Vec<Factor>) -> Option<()> {
    let node = g.node(id);
    let (a, b) = operands(g, id)?;
    if node.is("Div") {
        let inv = constant_divisor(g, id)?;
        nodes.push(id);
        factor_of(g, a, depth, nodes, out);
        out.push(Factor::Const(inv));
        return Some(());
    }
    nodes.push(id);
    factor_of(g, a, depth, nodes, out);
    factor_of(g, b, depth, nodes, out);
    Some(())
}

fn factor_of(g: &Graph, v: ValueId, depth: usize, nodes: &mut Vec<NodeId>, out: &mut Vec<Factor>) {
    if let Some(c) = scalar(g, v) {
        out.push(Factor::Const(c));
        return;
    }
    if depth > 0
        && private(g, v)
        && let Some((m, _)) = producer(g, v, "Mul").or_else(|| producer(g, v, "Div"))
    {
        let (mut inner_nodes, mut inner) = (Vec::new(), Vec::new());
        if factors(g, m, depth - 1, &mut inner_nodes, &mut inner).is_some() {
            nodes.append(&mut inner_nodes);
            out.append(&mut inner);
            return;
        }
    }
    out.push(Factor::Value(v));
}

/// `v = 1 + f(z)` with `f` the op `op`: returns (z, the Add, the f node).
fn one_plus(g: &Graph, v: ValueId, op: &str) -> Option<(ValueId, NodeId, NodeId)> {
    let (add, _) = producer(g, v, "Add")?;
    let (one, t) = split_scalar(g, add)?;
    (one == 1.0).then_some(())?;
    let (f, _) = producer(g, t, op)?;
    private(g, t).then_some(())?;
    Some((input(g, f, 0)?, add, f))
}

/// `z = x / √2` or `x · (1/√2)`: returns (x, node).
fn over_sqrt2(g: &Graph, z: ValueId) -> Option<(ValueId, NodeId)> {
    private(g, z).then_some(())?;
    let (p, node) = producer(g, z, "Div").or_else(|| producer(g, z, "Mul"))?;
    if node.is("Div") {
        let (x, c) = operands(g, p)?;
        return close(scalar(g, c)?, std::f64::consts::SQRT_2, TOL).then_some((x, p));
    }
    let (c, x) = split_scalar(g, p)?;
    close(c, std::f64::consts::FRAC_1_SQRT_2, TOL).then_some((x, p))
}

/// `c = x³` as `Pow(x, 3)`, `x·x·x` (any grouping) or `x·x²`: returns (x, nodes).
fn cube(g: &Graph, c: ValueId) -> Option<(ValueId, Vec<NodeId>)> {
    private(g, c).then_some(())?;
    if let Some((p, _)) = producer(g, c, "Pow") {
        let (x, e) = operands(g, p)?;
        return (scalar(g, e)? == 3.0).then(|| (x, vec![p]));
    }
    let (m, _) = producer(g, c, "Mul")?;
    let (a, b) = operands(g, m)?;
    // One side is x, the other x² (Mul(x, x) or Pow(x, 2)).
    [(a, b), (b, a)].into_iter().find_map(|(x, sq)| {
        private(g, sq).then_some(())?;
        let inner = producer(g, sq, "Mul")
            .filter(|(i, _)| operands(g, *i) == Some((x, x)))
            .or_else(|| {
                producer(g, sq, "Pow").filter(|(i, _)| {
                    operands(g, *i).is_some_and(|(px, e)| px == x && scalar(g, e) == Some(2.0))
                })
            })?;
        Some((x, vec![inner.0, m]))
    })
}

/// `u = √(2/π) · (x + 0.044715 · x³)`: returns (x, nodes).
fn tanh_argument(g: &Graph, u: ValueId) -> Option<(ValueId, Vec<NodeId>)> {
    private(g, u).then_some(())?;
    let (mul, _) = producer(g, u, "Mul")?;
    let (c, w) = split_scalar(g, mul)?;
    close(c, (2.0 / std::f64::consts::PI).sqrt(), TOL).then_some(())?;
    private(g, w).then_some(())?;
    let (add, _) = producer(g, w, "Add")?;
    let (a, b) = operands(g, add)?;
    [(a, b), (b, a)].into_iter().find_map(|(x, s)| {
        private(g, s).then_some(())?;
        let (sm, _) = producer(g, s, "Mul")?;
        let (k, c3) = split_scalar(g, sm)?;
        close(k, TANH_CUBIC, TOL).then_some(())?;
        let (cx, mut nodes) = cube(g, c3)?;
        (cx == x).then_some(())?;
        nodes.extend([sm, add, mul]);
        Some((x, nodes))
    })
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty() && matches!(node.op_type.as_str(), "Mul" | "Div"));
    let mut nodes = Vec::new();
    let mut fs = Vec::new();
    require_some!(factors(g, id, 2, &mut nodes, &mut fs));
    let mut constant = 1.0;
    let mut values = Vec::new();
    for f in fs {
        match f {
            Factor::Const(c) => constant *= c,
            Factor::Value(v) => values.push(v),
        }
    }
    require!(values.len() == 2 && close(constant, 0.5, TOL));
    // One value is x, the other 1 + erf(x/√2) or 1 + tanh(…).
    let found = [(values[0], values[1]), (values[1], values[0])]
        .into_iter()
        .find_map(|(x, s)| {
            private(g, s).then_some(())?;
            if let Some((z, add, erf)) = one_plus(g, s, "Erf") {
                let (zx, div) = over_sqrt2(g, z)?;
                return (zx == x).then(|| (x, false, vec![div, erf, add]));
            }
            let (u, add, tanh) = one_plus(g, s, "Tanh")?;
            let (ux, mut inner) = tanh_argument(g, u)?;
            inner.extend([tanh, add]);
            (ux == x).then_some((x, true, inner))
        });
    let (x, tanh, inner) = require_some!(found);
    if cx.opset < MIN_OPSET {
        decline!(
            "GELU needs opset {MIN_OPSET} for Gelu (model has {}); {}",
            cx.opset,
            crate::upgrade_opset::remedy(MIN_OPSET)
        );
    }
    let mut gelu = Node::new("Gelu");
    gelu.name = node.name.clone();
    if tanh {
        gelu.set_attr(Attribute::string("approximate", "tanh"));
    }
    let out = require_some!(output(g, id, 0));
    let mut remove = nodes;
    remove.extend(inner);
    Outcome::Rewrite(replace_with_node(
        g,
        gelu,
        vec![Some(PatchValue::Existing(x))],
        out,
        &remove,
    ))
}

impl Pass for FuseGelu {
    fn name(&self) -> &'static str {
        "fuse-gelu"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
