//! Fuses GELU, and the bias Add before it, into ONNX Runtime's `com.microsoft.BiasGelu` / `FastGelu` / `Gelu` (target onnxruntime).
//!
//! ## What it does
//! Recognizes GELU written out as exporters write it, or as the opset-20
//! `Gelu` op:
//! - erf form: `x · 0.5 · (1 + Erf(x / √2))` (the product in any order and
//!   grouping, `/ √2` or `· (1/√2)`), or `Gelu(x)`;
//! - tanh form: `x · 0.5 · (1 + Tanh(√(2/π) · (x + 0.044715 · x³)))` (`x³`
//!   as `Pow(x, 3)`), or `Gelu(x, approximate="tanh")`.
//!
//! When `x = Add(m, bias)` with a constant 1-D bias of `x`'s last dim (the
//! dense layer before the activation), read only by the GELU, the Add goes
//! too: the erf form becomes `com.microsoft.BiasGelu(m, bias)`, the tanh form
//! `com.microsoft.FastGelu(m, bias)`. Without such a bias they become
//! `com.microsoft.Gelu(x)` and `com.microsoft.FastGelu(x)`. Adds the
//! `com.microsoft` opset import (version 1).
//!
//! With another target the pass changes nothing and leaves a note.
//!
//! ## When it declines
//! Only with target `onnxruntime`, where the pattern is present: when the
//! element type is not float32, or an intermediate value of the pattern has
//! readers outside it. Constants must equal the formula's to within 1e-6
//! (relative); other constants are not GELU and are not matched.
//!
//! ## Numerics
//! The same formula evaluated by one kernel in float32; FastGelu uses the
//! tanh approximation with the same constants. Rounding differences only.
//!
//! ## Example
//! `h = Add(MatMul(x, W), b)`, `y = Mul(Mul(h, Add(Erf(Div(h, 1.4142135)), 1)), 0.5)`
//! becomes `y = BiasGelu(MatMul(x, W), b)`.

crate::register_pass! {
    name: "fuse-bias-gelu",
    kind: Fuse,
    file: "fuse_bias_gelu.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseBiasGelu,
}

use infopt_ir::{DataType, Dim, Graph, Model, Node, NodeId, Patch, PatchValue, ValueId};

use crate::attention_pattern::dims;
use crate::pass::{Pass, PassCx, PassError};
use crate::rule::Outcome;
use crate::util::{MS_DOMAIN, carry_type, dtype_of, input, node_label, output};
use crate::{decline, require, require_some};

pub struct FuseBiasGelu;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    Erf,
    Tanh,
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs()
}

fn scalar(g: &Graph, v: ValueId) -> Option<f64> {
    let t = g.constant(v)?;
    if t.numel() != Some(1) || !t.dtype().is_float() {
        return None;
    }
    t.to_f64_vec().ok()?.first().copied()
}

/// The producer of `v` if it is `op` of the default domain.
fn producer_is(g: &Graph, v: ValueId, op: &str) -> Option<NodeId> {
    let (id, _) = g.value(v).producer?;
    g.node(id).is(op).then_some(id)
}

/// The two operands of a binary node, with the constant scalar (if one) second.
fn operands(g: &Graph, id: NodeId) -> Option<(ValueId, ValueId)> {
    let (a, b) = (input(g, id, 0)?, input(g, id, 1)?);
    Some(if scalar(g, a).is_some() { (b, a) } else { (a, b) })
}

/// The factors of a product tree rooted at `v` (inner products read once),
/// with the nodes of the tree.
fn factors(g: &Graph, v: ValueId, root: bool, out: &mut Vec<ValueId>, nodes: &mut Vec<NodeId>) {
    let inner_ok = root || (g.reader_count(v) == 1 && !g.is_graph_output(v));
    match producer_is(g, v, "Mul") {
        Some(id) if inner_ok && nodes.len() < 8 => {
            nodes.push(id);
            for i in 0..2 {
                if let Some(x) = input(g, id, i) {
                    factors(g, x, false, out, nodes);
                }
            }
        }
        _ => out.push(v),
    }
}

/// `1 + f(...)` where f is `op`: the argument of f, and the nodes.
fn one_plus(g: &Graph, v: ValueId, op: &str, nodes: &mut Vec<NodeId>) -> Option<ValueId> {
    let add = producer_is(g, v, "Add")?;
    let (t, one) = operands(g, add)?;
    if !close(scalar(g, one)?, 1.0) {
        return None;
    }
    let f = producer_is(g, t, op)?;
    nodes.extend([add, f]);
    input(g, f, 0)
}

/// `x / √2` or `x · (1/√2)`: x.
fn over_sqrt2(g: &Graph, v: ValueId, nodes: &mut Vec<NodeId>) -> Option<ValueId> {
    if let Some(id) = producer_is(g, v, "Div") {
        let (x, c) = (input(g, id, 0)?, input(g, id, 1)?);
        close(scalar(g, c)?, std::f64::consts::SQRT_2).then(|| nodes.push(id))?;
        return Some(x);
    }
    let id = producer_is(g, v, "Mul")?;
    let (x, c) = operands(g, id)?;
    close(scalar(g, c)?, std::f64::consts::FRAC_1_SQRT_2).then(|| nodes.push(id))?;
    Some(x)
}

/// `√(2/π) · (x + 0.044715 · Pow(x, 3))`: x.
fn tanh_argument(g: &Graph, v: ValueId, nodes: &mut Vec<NodeId>) -> Option<ValueId> {
    let outer = producer_is(g, v, "Mul")?;
    let (sum, c1) = operands(g, outer)?;
    if !close(scalar(g, c1)?, (2.0 / std::f64::consts::PI).sqrt()) {
        return None;
    }
    let add = producer_is(g, sum, "Add")?;
    let (a, b) = (input(g, add, 0)?, input(g, add, 1)?);
    let cubic_of = |c: ValueId, nodes: &mut Vec<NodeId>| -> Option<ValueId> {
        let m = producer_is(g, c, "Mul")?;
        let (p, k) = operands(g, m)?;
        if !close(scalar(g, k)?, 0.044715) {
            return None;
        }
        let pow = producer_is(g, p, "Pow")?;
        if !close(scalar(g, input(g, pow, 1)?)?, 3.0) {
            return None;
        }
        nodes.extend([m, pow]);
        input(g, pow, 0)
    };
    for (x, c) in [(a, b), (b, a)] {
        if cubic_of(c, nodes) == Some(x) {
            nodes.extend([outer, add]);
            return Some(x);
        }
    }
    None
}

/// GELU ending at node `id`: `(x, form, the pattern's nodes)`.
fn gelu_at(g: &Graph, id: NodeId) -> Option<(ValueId, Form, Vec<NodeId>)> {
    let n = g.node(id);
    if n.is("Gelu") {
        let form = match n.attr_string("approximate").ok()?.as_deref() {
            None | Some("none") => Form::Erf,
            Some("tanh") => Form::Tanh,
            Some(_) => return None,
        };
        return Some((input(g, id, 0)?, form, vec![id]));
    }
    if !n.is("Mul") {
        return None;
    }
    let y = output(g, id, 0)?;
    let mut fs = Vec::new();
    let mut nodes = Vec::new();
    factors(g, y, true, &mut fs, &mut nodes);
    let mut half = 1.0;
    let mut rest = Vec::new();
    for f in fs {
        match scalar(g, f) {
            Some(c) => half *= c,
            None => rest.push(f),
        }
    }
    if !close(half, 0.5) || rest.len() != 2 {
        return None;
    }
    for (x, other) in [(rest[0], rest[1]), (rest[1], rest[0])] {
        let mut more = Vec::new();
        if let Some(arg) = one_plus(g, other, "Erf", &mut more)
            && over_sqrt2(g, arg, &mut more) == Some(x)
        {
            nodes.extend(more);
            return Some((x, Form::Erf, nodes));
        }
        let mut more = Vec::new();
        if let Some(arg) = one_plus(g, other, "Tanh", &mut more)
            && tanh_argument(g, arg, &mut more) == Some(x)
        {
            nodes.extend(more);
            return Some((x, Form::Tanh, nodes));
        }
    }
    None
}

/// Every value the pattern computes, except its output, is read only inside it.
fn self_contained(g: &Graph, nodes: &[NodeId], out: ValueId) -> bool {
    nodes.iter().all(|&n| {
        g.node(n).outputs.iter().flatten().all(|&o| {
            o == out
                || (!g.is_graph_output(o) && g.value(o).uses.iter().all(|u| nodes.contains(&u.node)))
        })
    })
}

fn rule(g: &Graph, id: NodeId, _cx: &mut PassCx) -> Outcome {
    let (x, form, nodes) = require_some!(gelu_at(g, id));
    let y = require_some!(output(g, id, 0));
    if !self_contained(g, &nodes, y) {
        decline!("a value inside the GELU pattern has readers outside it");
    }
    require!(g.value(x).producer.is_some() || g.is_graph_input(x));
    if dtype_of(g, x) != Some(DataType::Float) {
        decline!("element type is not float32 (or unknown)");
    }
    // The dense bias before the activation, if read only by the pattern.
    let last = dims(g, x).and_then(|d| match d.last() {
        Some(Dim::Known(n)) => Some(*n),
        _ => None,
    });
    let bias = (|| {
        let add = producer_is(g, x, "Add")?;
        if g.is_graph_output(x) || !g.value(x).uses.iter().all(|u| nodes.contains(&u.node)) {
            return None;
        }
        let (a, b) = (input(g, add, 0)?, input(g, add, 1)?);
        let is_bias = |v: ValueId| {
            g.constant(v).is_some_and(|t| {
                t.dtype() == DataType::Float && t.dims().len() == 1 && Some(t.dims()[0]) == last
            })
        };
        let same_shape = |m: ValueId| dims(g, m).is_some() && dims(g, m) == dims(g, x);
        if is_bias(b) && same_shape(a) {
            Some((a, b, add))
        } else if is_bias(a) && same_shape(b) {
            Some((b, a, add))
        } else {
            None
        }
    })();
    let op = match (form, bias.is_some()) {
        (Form::Erf, true) => "BiasGelu",
        (Form::Erf, false) => "Gelu",
        (Form::Tanh, _) => "FastGelu",
    };
    let mut node = Node::new(op);
    node.domain = Some(MS_DOMAIN.to_string());
    node.name = Some(node_label(g, id));
    let inputs = match bias {
        Some((m, b, _)) => vec![Some(PatchValue::Existing(m)), Some(PatchValue::Existing(b))],
        None => vec![Some(PatchValue::Existing(x))],
    };
    let mut p = Patch::new();
    let n = p.add_node(node, inputs, vec![String::new()]);
    let out = PatchValue::NewNode { node: n, output: 0 };
    p.replace(y, out);
    carry_type(&mut p, g, y, out);
    for &n in &nodes {
        p.remove_node(n);
    }
    if let Some((_, _, add)) = bias {
        p.remove_node(add);
    }
    Outcome::Rewrite(p)
}

impl Pass for FuseBiasGelu {
    fn name(&self) -> &'static str {
        "fuse-bias-gelu"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        crate::util::run_contrib_fusion(self.name(), "com.microsoft.BiasGelu", model, cx, &rule)
    }
}
