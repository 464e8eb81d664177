//! Replaces activations written out as elementwise ops by the ONNX op.
//!
//! ## What it does
//! `x * Clip(x + 3, 0, 6) / 6` (MobileNetV3 / PP-LCNet hard-swish, the Div
//! also as a Mul by 1/6, the operands of the Mul and Add in either order)
//! becomes `HardSwish(x)` (opset 14 and later), and `Clip(x + 3, 0, 6) / 6`
//! becomes `HardSigmoid(x, alpha=1/6, beta=0.5)`; `x * HardSigmoid(x)` with
//! those parameters becomes `HardSwish(x)`. Clip's bounds are read
//! from its inputs (opset 11 and later) or attributes. The new node takes
//! the name of the last node of the pattern and its output.
//!
//! ## When it declines
//! Only where the pattern is present: when an intermediate value of the
//! pattern has another reader or is a graph output (it would still be
//! needed). Before opset 14 (no HardSwish op) hard-swish becomes
//! `x * HardSigmoid(x, 1/6, 0.5)`, two nodes instead of four.
//!
//! ## Numerics
//! Not bit-exact: the op computes `x · max(0, min(1, x/6 + 0.5))` where the
//! pattern computed `x · clip(x + 3, 0, 6) / 6`; the two round differently
//! (about one ulp).
//!
//! ## Example
//! `a = Add(x, 3)`, `c = Clip(a, 0, 6)`, `m = Mul(x, c)`, `y = Div(m, 6)`
//! becomes `y = HardSwish(x)`.

crate::register_pass! {
    name: "fuse-activation-patterns",
    kind: Fuse,
    file: "fuse_activation_patterns.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseActivationPatterns,
}

use infopt_ir::{Attribute, Graph, Model, Node, NodeId, PatchValue, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::{clip_bounds, input, output, replace_with_node};
use crate::{decline, require, require_some};

pub struct FuseActivationPatterns;

/// The single value of a constant holding one number.
fn scalar(g: &Graph, v: Option<ValueId>) -> Option<f64> {
    let t = g.constant(v?)?;
    let vals = t.to_f64_vec().ok()?;
    (vals.len() == 1).then(|| vals[0])
}

/// The default-domain producer of `v` when it is `op`.
fn producer<'g>(g: &'g Graph, v: ValueId, op: &str) -> Option<(NodeId, &'g Node)> {
    let (p, _) = g.value(v).producer?;
    let node = g.node(p);
    (node.domain().is_empty() && node.is(op)).then_some((p, node))
}

/// True when `v` is read by one node only (not a graph output).
fn private(g: &Graph, v: ValueId) -> bool {
    !g.is_graph_output(v) && g.reader_count(v) == 1
}

/// `v / 6` or `v * (1/6)`: returns `v`.
fn divided_by_six(g: &Graph, id: NodeId) -> Option<ValueId> {
    let node = g.node(id);
    let (a, b) = (input(g, id, 0)?, input(g, id, 1)?);
    match node.op_type.as_str() {
        "Div" => (scalar(g, Some(b))? == 6.0).then_some(a),
        "Mul" => {
            let sixth = |c: f64| ((c - 1.0 / 6.0) * 6.0).abs() < 1e-6;
            if scalar(g, Some(b)).is_some_and(sixth) {
                Some(a)
            } else if scalar(g, Some(a)).is_some_and(sixth) {
                Some(b)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// `Clip(x + 3, 0, 6)` producing `v`: returns (x, the Clip, the Add).
fn relu6_of_x_plus_3(g: &Graph, v: ValueId) -> Option<(ValueId, NodeId, NodeId)> {
    let (clip, _) = producer(g, v, "Clip")?;
    if clip_bounds(g, clip).ok()? != (0.0, 6.0) {
        return None;
    }
    let added = input(g, clip, 0)?;
    let (add, _) = producer(g, added, "Add")?;
    let (a, b) = (input(g, add, 0)?, input(g, add, 1)?);
    let x = if scalar(g, Some(b)) == Some(3.0) {
        a
    } else if scalar(g, Some(a)) == Some(3.0) {
        b
    } else {
        return None;
    };
    private(g, added).then_some((x, clip, add))
}

/// `x * HardSigmoid(x, 1/6, 0.5)` (what the hard-sigmoid rewrite leaves of
/// `x * (Clip(x + 3, 0, 6) / 6)`) is `HardSwish(x)`.
fn times_hard_sigmoid(g: &Graph, id: NodeId, opset: i64) -> Outcome {
    let (a, b) = (require_some!(input(g, id, 0)), require_some!(input(g, id, 1)));
    let found = [(a, b), (b, a)].into_iter().find_map(|(x, s)| {
        let (hs, hs_node) = producer(g, s, "HardSigmoid")?;
        let alpha = hs_node.attr_float_or("alpha", 0.2).ok()?;
        let beta = hs_node.attr_float_or("beta", 0.5).ok()?;
        (input(g, hs, 0) == Some(x) && alpha == (1.0f64 / 6.0) as f32 && beta == 0.5)
            .then_some((x, s, hs))
    });
    let (x, s, hs) = require_some!(found);
    // Before opset 14 this Mul is what the hard-swish rewrite leaves.
    require!(opset >= 14);
    if !private(g, s) {
        decline!("the HardSigmoid output has other readers");
    }
    let mut swish = Node::new("HardSwish");
    swish.name = g.node(id).name.clone();
    let out = require_some!(output(g, id, 0));
    let inputs = vec![Some(PatchValue::Existing(x))];
    Outcome::Rewrite(replace_with_node(g, swish, inputs, out, &[hs, id]))
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty() && matches!(node.op_type.as_str(), "Div" | "Mul"));
    if node.is("Mul")
        && let Outcome::Rewrite(p) = times_hard_sigmoid(g, id, cx.opset)
    {
        return Outcome::Rewrite(p);
    }
    let inner = require_some!(divided_by_six(g, id));
    let out = require_some!(output(g, id, 0));
    // Hard-sigmoid: the divided value is the Clip itself.
    if let Some((x, clip, add)) = relu6_of_x_plus_3(g, inner) {
        if !private(g, inner) {
            decline!("the Clip output has other readers");
        }
        let mut hs = Node::new("HardSigmoid");
        hs.name = node.name.clone();
        hs.set_attr(Attribute::float("alpha", 1.0 / 6.0));
        hs.set_attr(Attribute::float("beta", 0.5));
        let inputs = vec![Some(PatchValue::Existing(x))];
        return Outcome::Rewrite(replace_with_node(g, hs, inputs, out, &[add, clip, id]));
    }
    // Hard-swish: the divided value is x * Clip(x + 3, 0, 6).
    let (mul, _) = require_some!(producer(g, inner, "Mul"));
    let (a, b) = (require_some!(input(g, mul, 0)), require_some!(input(g, mul, 1)));
    let found = [(a, b), (b, a)].into_iter().find_map(|(x, c)| {
        relu6_of_x_plus_3(g, c)
            .filter(|(cx_, _, _)| *cx_ == x)
            .map(|(_, clip, add)| (x, c, clip, add))
    });
    let (x, clipped, clip, add) = require_some!(found);
    if !private(g, inner) || !private(g, clipped) {
        decline!("a value inside the hard-swish pattern has other readers");
    }
    if cx.opset < 14 {
        return hard_swish_before_opset_14(g, x, out, &[add, clip, mul, id]);
    }
    let mut hs = Node::new("HardSwish");
    hs.name = node.name.clone();
    let inputs = vec![Some(PatchValue::Existing(x))];
    Outcome::Rewrite(replace_with_node(g, hs, inputs, out, &[add, clip, mul, id]))
}

/// Without the HardSwish op: `x * HardSigmoid(x, 1/6, 0.5)`, two nodes for
/// the pattern's four.
fn hard_swish_before_opset_14(g: &Graph, x: ValueId, out: ValueId, remove: &[NodeId]) -> Outcome {
    let last = *require_some!(remove.last());
    let mut p = infopt_ir::Patch::new();
    let mut hs = Node::new("HardSigmoid");
    hs.name = g.node(last).name.as_ref().map(|n| format!("{n}.hard_sigmoid"));
    hs.set_attr(Attribute::float("alpha", 1.0 / 6.0));
    hs.set_attr(Attribute::float("beta", 0.5));
    let h = p.add_node(hs, vec![Some(PatchValue::Existing(x))], vec![String::new()]);
    let mut mul = Node::new("Mul");
    mul.name = g.node(last).name.clone();
    let m = p.add_node(
        mul,
        vec![
            Some(PatchValue::Existing(x)),
            Some(PatchValue::NewNode { node: h, output: 0 }),
        ],
        vec![String::new()],
    );
    let new = PatchValue::NewNode { node: m, output: 0 };
    p.replace(out, new);
    crate::util::carry_type(&mut p, g, out, new);
    for &r in remove {
        p.remove_node(r);
    }
    Outcome::Rewrite(p)
}

impl Pass for FuseActivationPatterns {
    fn name(&self) -> &'static str {
        "fuse-activation-patterns"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
