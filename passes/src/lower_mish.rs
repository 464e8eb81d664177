//! Rewrites Mish, `x · tanh(softplus(x))`, as `x / (1 + 2 / (eˣ · (eˣ + 2)))`: ONNX Runtime's Mish and Softplus kernels are about nine times slower than those six ops (targets portable and onnxruntime).
//!
//! ## What it does
//! `y = Mish(x)` (opset 18), and the form exporters write before it,
//! `y = Mul(x, Tanh(Softplus(x)))` (either operand order; the Softplus and
//! the Tanh read by nothing else), becomes `e = Exp(x)`,
//! `n = Mul(e, Add(e, 2))`, `y = Div(x, Add(Div(2, n), 1))`: with
//! `tanh(log(1 + e)) = n / (n + 2)`, Mish is `x / (1 + 2 / n)`. ONNX Runtime
//! 1.32's CPU Mish took 17.5 ms at one thread on a `[1, 64, 152, 152]`
//! tensor, its Softplus + Tanh + Mul 17.4 ms, the six ops 1.9-2.0 ms: Mish
//! sits after every convolution of CSPDarknet (YOLOv4 and its scaled
//! variants). Standard ONNX, so the model still runs anywhere; TensorRT has
//! an activation of its own for it, and with target tensorrt the pass
//! changes nothing and leaves a note. The final Div takes the root node's
//! name (the Mish, or the Mul) and the output keeps its name; the new nodes
//! are named after it (`.exp`, `.shifted`, `.product`, `.ratio`,
//! `.denominator`), with scalar initializers `.one` and `.two`.
//!
//! ## When it declines
//! When the element type is not float32 or unknown; below opset 7 (the
//! scalar constants broadcast from opset 7); in the `Mul` form, when the
//! Softplus or Tanh output is read by another node or is a graph output
//! (they would have to stay); when the pipeline's precision map puts the
//! node in float16 or bfloat16 (`--fp16`, `--bf16`): there the exponential
//! would stay a float32 island with Casts around it, where the Mish or its
//! parts convert as they are.
//!
//! ## Numerics
//! Within a few units in the last place of float32 (largest relative
//! difference from ONNX Runtime's Mish 5.8e-7 over normal values of either
//! sign), with the same special values and no clamp: where `eˣ` overflows
//! (`x > 88.7`), `2 / inf = 0` and `y = x`; where `eˣ · (eˣ + 2)`
//! underflows or `2 / n` overflows (`x < -87`), `y = x / inf = -0` where the
//! true value is below 1e-36; `±inf` and NaN give what Mish gives (`inf`,
//! NaN for `-inf · 0`, NaN). No intermediate cancels: for very negative `x`
//! the ratio is `n / 2`, not `1 - something`. The same form stays finite in
//! float16, should `convert-float16` run after it (`eˣ` overflows to inf
//! at 11 and gives `y = x`), though it declines there (above).
//!
//! ## Example
//! `y = Mul(c, Tanh(Softplus(c)))` becomes `e = Exp(c)`, `s = Add(e, 2)`,
//! `n = Mul(e, s)`, `r = Div(2, n)`, `d = Add(r, 1)`, `y = Div(c, d)`.

crate::register_pass! {
    name: "lower-mish",
    kind: Lower,
    file: "lower_mish.rs",
    options: crate::registry::NoOptions,
    build: |_| LowerMish,
}

use infopt_ir::{DataType, Graph, Model, NodeId, Patch, PatchValue, Tensor, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::precision::{Precision, PrecisionMap};
use crate::rule::Outcome;
use crate::util::{
    add_named_step, run_lowering, dtype_of, input, node_label, only_read_by, output, producer_is,
};
use crate::{decline, require_some};

pub struct LowerMish;

/// `t = Tanh(Softplus(x))`, given `x`: the Softplus and the Tanh, or why
/// the Mul form cannot be rewritten; None where `t` is not of that form.
fn tanh_softplus_of(
    g: &Graph,
    t: ValueId,
    x: ValueId,
    mul: NodeId,
) -> Option<Result<Vec<NodeId>, &'static str>> {
    let tanh = producer_is(g, t, "Tanh")?;
    let s = input(g, tanh, 0)?;
    let softplus = producer_is(g, s, "Softplus")?;
    if input(g, softplus, 0)? != x {
        return None;
    }
    if !only_read_by(g, t, mul) {
        return Some(Err("the Tanh output has readers outside x·tanh(softplus(x))"));
    }
    if !only_read_by(g, s, tanh) {
        return Some(Err(
            "the Softplus output has readers outside x·tanh(softplus(x))",
        ));
    }
    Some(Ok(vec![softplus, tanh]))
}

/// The Mish's input and the nodes it replaces, rooted at `id`: None where
/// there is no Mish here, Err why where one cannot be rewritten.
fn mish_at(g: &Graph, id: NodeId) -> Result<Option<(ValueId, Vec<NodeId>)>, &'static str> {
    let n = g.node(id);
    if !n.domain().is_empty() {
        return Ok(None);
    }
    if n.is("Mish") {
        return Ok(input(g, id, 0).map(|x| (x, vec![id])));
    }
    if !n.is("Mul") {
        return Ok(None);
    }
    let (Some(a), Some(b)) = (input(g, id, 0), input(g, id, 1)) else {
        return Ok(None);
    };
    let found = [(a, b), (b, a)]
        .into_iter()
        .find_map(|(x, t)| tanh_softplus_of(g, t, x, id).map(|nodes| (x, nodes)));
    let Some((x, nodes)) = found else {
        return Ok(None);
    };
    let mut nodes = nodes?;
    nodes.push(id);
    Ok(Some((x, nodes)))
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let (x, remove) = match mish_at(g, id) {
        Ok(found) => require_some!(found),
        Err(why) => decline!("{why}"),
    };
    let y = require_some!(output(g, id, 0));
    if cx.opset < 7 {
        decline!("opset {}: scalar constants broadcast from opset 7", cx.opset);
    }
    // In float16 the six ops would be an island of float32 around every
    // Mish (an exponential, which the conversion keeps in float32 unless
    // real inputs show it fits), with Casts in and out, where the Mish
    // itself converts: the rewrite is for float32 kernels.
    if let Some(map) = cx.side.get::<PrecisionMap>() {
        let p = map.precision_of(g.node(id));
        if matches!(p, Precision::Fp16 | Precision::Bf16) {
            decline!(
                "the Mish is to run in {p}: its exponential would stay a float32 island there; the rewrite is for float32"
            );
        }
    }
    match dtype_of(g, x) {
        Some(DataType::Float) => {}
        Some(d) => decline!("element type {d}: only float32 is rewritten"),
        None => decline!("element type is unknown"),
    }
    let name = node_label(g, id);
    let mut p = Patch::new();
    let one = p.add_initializer(&format!("{name}.one"), Tensor::from_f32(vec![], &[1.0]));
    let two = p.add_initializer(&format!("{name}.two"), Tensor::from_f32(vec![], &[2.0]));
    // Each new node named after the root; the last Div takes over `y`.
    let mut step = |op: &str, suffix: &str, inputs: Vec<PatchValue>| {
        add_named_step(&mut p, &name, op, suffix, inputs)
    };
    let exp = step("Exp", ".exp", vec![PatchValue::Existing(x)]);
    let shifted = step("Add", ".shifted", vec![exp, two]);
    let product = step("Mul", ".product", vec![exp, shifted]);
    let ratio = step("Div", ".ratio", vec![two, product]);
    let denominator = step("Add", ".denominator", vec![ratio, one]);
    let quotient = step("Div", "", vec![PatchValue::Existing(x), denominator]);
    p.replace(y, quotient);
    for node in remove {
        p.remove_node(node);
    }
    Outcome::Rewrite(p)
}

impl Pass for LowerMish {
    fn name(&self) -> &'static str {
        "lower-mish"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        run_lowering(
            model,
            cx,
            "lower-mish does nothing for target tensorrt: TensorRT runs Mish as an activation of its own",
            &rule,
        )
    }
}
