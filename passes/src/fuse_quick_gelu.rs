//! Fuses `x · Sigmoid(α·x)` (SiLU / Swish, and the sigmoid GELU approximation) into ONNX Runtime's `com.microsoft.QuickGelu` (target onnxruntime).
//!
//! ## What it does
//! `y = Mul(x, Sigmoid(x))` becomes `y = com.microsoft.QuickGelu(x, alpha=1)`
//! and `y = Mul(x, Sigmoid(Mul(x, α)))` (α a constant scalar, either operand
//! order) becomes `QuickGelu(x, alpha=α)`: the SiLU of EfficientNet, YOLOv5/8
//! and Llama's MLP, and CLIP's `x · σ(1.702·x)`. This is the rewrite ONNX
//! Runtime's own `QuickGeluFusion` makes at its extended level; done ahead of
//! time the saved model is what the runtime runs. The fused node takes the
//! Mul's name and the output keeps its name. Adds the `com.microsoft` opset
//! import (version 1).
//!
//! With another target the pass changes nothing and leaves a note.
//!
//! ## When it declines
//! Only with target `onnxruntime`, where the pattern is present: when the
//! element type is not float32 or unknown (ONNX Runtime's CPU kernel is
//! float32 only), when the Sigmoid (or the scaling Mul) has readers outside
//! the pattern or is a graph output, or when α is not a constant scalar.
//! A Sigmoid of a value other than the Mul's other operand (an
//! squeeze-excitation gate `x · σ(conv(pool(x)))`) is not this pattern.
//!
//! ## Numerics
//! The same function in one float32 kernel (ONNX Runtime computes the
//! logistic with its vectorized MLAS routine, as it does for the fused
//! graph): rounding differences of a few ULP.
//!
//! ## Example
//! `s = Sigmoid(c)`, `y = Mul(c, s)` becomes `y = com.microsoft.QuickGelu(c, alpha=1.0)`.

crate::register_pass! {
    name: "fuse-quick-gelu",
    kind: Fuse,
    file: "fuse_quick_gelu.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseQuickGelu,
}

use infopt_ir::{Attribute, DataType, Graph, Model, Node, NodeId, PatchValue, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::Outcome;
use crate::util::{
    MS_DOMAIN, dtype_of, input, node_label, only_read_by, output, producer_is, replace_with_node,
};
use crate::{decline, require, require_some};

pub struct FuseQuickGelu;

/// The value of a constant float scalar (any rank, one element).
fn scalar(g: &Graph, v: ValueId) -> Option<f32> {
    let t = g.constant(v)?;
    if t.numel() != Some(1) || t.dtype() != DataType::Float {
        return None;
    }
    t.to_f64_vec().ok()?.first().map(|&x| x as f32)
}

/// `Sigmoid(x)` or `Sigmoid(Mul(x, α))` at `s`, given `x`: α and the nodes.
fn sigmoid_of(g: &Graph, s: ValueId, x: ValueId) -> Option<(f32, Vec<NodeId>)> {
    let sig = producer_is(g, s, "Sigmoid")?;
    let arg = input(g, sig, 0)?;
    if arg == x {
        return Some((1.0, vec![sig]));
    }
    let scale = producer_is(g, arg, "Mul")?;
    let (a, b) = (input(g, scale, 0)?, input(g, scale, 1)?);
    let alpha = match (a == x, b == x) {
        (true, _) => scalar(g, b)?,
        (_, true) => scalar(g, a)?,
        _ => return None,
    };
    only_read_by(g, arg, sig).then_some((alpha, vec![sig, scale]))
}

fn rule(g: &Graph, id: NodeId, _cx: &mut PassCx) -> Outcome {
    require!(g.node(id).is("Mul") && g.node(id).domain().is_empty());
    let (a, b) = (
        require_some!(input(g, id, 0)),
        require_some!(input(g, id, 1)),
    );
    let found = [(a, b), (b, a)]
        .into_iter()
        .find_map(|(x, s)| sigmoid_of(g, s, x).map(|(alpha, nodes)| (x, s, alpha, nodes)));
    let (x, s, alpha, nodes) = require_some!(found);
    if !only_read_by(g, s, id) {
        decline!("the Sigmoid output has readers outside x·sigmoid(x)");
    }
    if !alpha.is_finite() {
        decline!("the Sigmoid's scale is not finite");
    }
    match dtype_of(g, x) {
        Some(DataType::Float) => {}
        Some(d) => {
            decline!("element type {d}: ONNX Runtime's QuickGelu CPU kernel is float32 only")
        }
        None => decline!("element type is unknown"),
    }
    let y = require_some!(output(g, id, 0));
    let mut node = Node::new("QuickGelu");
    node.domain = Some(MS_DOMAIN.to_string());
    node.name = Some(node_label(g, id));
    node.set_attr(Attribute::float("alpha", alpha));
    let mut remove = nodes;
    remove.push(id);
    Outcome::Rewrite(replace_with_node(
        g,
        node,
        vec![Some(PatchValue::Existing(x))],
        y,
        &remove,
    ))
}

impl Pass for FuseQuickGelu {
    fn name(&self) -> &'static str {
        "fuse-quick-gelu"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        crate::util::run_contrib_fusion(self.name(), "com.microsoft.QuickGelu", model, cx, &rule)
    }
}
