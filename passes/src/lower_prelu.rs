//! Rewrites `PRelu(x, slope)` as `Relu(x) + slope · Min(x, 0)`: ONNX Runtime's PRelu kernel is an order of magnitude slower than those four (targets portable and onnxruntime).
//!
//! ## What it does
//! `y = PRelu(x, slope)` with a constant slope becomes
//! `y = Add(Relu(x), Mul(Min(x, 0), slope))`. ONNX Runtime's CPU PRelu
//! broadcasts a per-channel slope `[C, 1, 1]` through its generic path: on a
//! `[1, 48, 96, 96]` tensor it took 1.83 ms at one thread where Relu, Min,
//! Mul and Add took 0.17 ms together, and it was half of MediaPipe's palm
//! detector (3.9 of 7.5 ms) and of its iris landmarks; rewritten, they ran
//! 1.56x and 1.64x as fast (a scalar slope is as slow: 1.68 against 0.17
//! ms; on a tensor of a few thousand values the four nodes cost about a
//! microsecond more than the one). Standard ONNX, so the model still runs
//! anywhere; TensorRT has a PReLU layer of its own, and with target
//! tensorrt the pass changes nothing and leaves a note. The Add takes the
//! PRelu's name and the output keeps its name; the new nodes are named
//! after it (`.relu`, `.negative`, `.scaled`), with a scalar zero
//! initializer `.zero`.
//!
//! ## When it declines
//! When the slope is not a constant, or holds a value that is not finite
//! (`slope · 0` is NaN there, where PRelu gives `x` for `x > 0`); when the
//! element type is not float32 or unknown; below opset 8 (Min broadcasts
//! from opset 8).
//!
//! ## Numerics
//! Exact up to the sign of zero: for `x > 0` the sum is `x + slope · 0 = x`,
//! for `x < 0` it is `0 + slope · x`, the product PRelu computes; NaN stays
//! NaN, and `x = -inf` gives `slope · -inf` both ways.
//!
//! ## Example
//! `y = PRelu(c, s)` with `s: [32, 1, 1]` becomes `r = Relu(c)`,
//! `m = Min(c, 0)`, `q = Mul(m, s)`, `y = Add(r, q)`.

crate::register_pass! {
    name: "lower-prelu",
    kind: Lower,
    file: "lower_prelu.rs",
    options: crate::registry::NoOptions,
    build: |_| LowerPrelu,
}

use infopt_ir::{DataType, Graph, Model, NodeId, Patch, PatchValue, Tensor};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::Outcome;
use crate::util::{add_named_step, dtype_of, input, node_label, output, run_lowering};
use crate::{decline, require, require_some};

pub struct LowerPrelu;

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let n = g.node(id);
    require!(n.is("PRelu") && n.domain().is_empty());
    let x = require_some!(input(g, id, 0));
    let slope = require_some!(input(g, id, 1));
    let y = require_some!(output(g, id, 0));
    if cx.opset < 8 {
        decline!("opset {}: Min broadcasts from opset 8", cx.opset);
    }
    match dtype_of(g, x) {
        Some(DataType::Float) => {}
        Some(d) => decline!("element type {d}: only float32 is rewritten"),
        None => decline!("element type is unknown"),
    }
    let Some(values) = g.constant(slope).and_then(|t| t.to_f64_vec().ok()) else {
        decline!("the slope '{}' is not a constant", g.value(slope).name);
    };
    if values.iter().any(|v| !v.is_finite()) {
        decline!(
            "the slope '{}' holds a value that is not finite (slope * 0 would be NaN where PRelu gives x)",
            g.value(slope).name
        );
    }
    let name = node_label(g, id);
    let mut p = Patch::new();
    let zero = p.add_initializer(&format!("{name}.zero"), Tensor::from_f32(vec![], &[0.0]));
    // Each new node named after the PRelu; the Add takes over `y`.
    let mut step = |op: &str, suffix: &str, inputs: Vec<PatchValue>| {
        add_named_step(&mut p, &name, op, suffix, inputs)
    };
    let relu = step("Relu", ".relu", vec![PatchValue::Existing(x)]);
    let negative = step("Min", ".negative", vec![PatchValue::Existing(x), zero]);
    let scaled = step("Mul", ".scaled", vec![negative, PatchValue::Existing(slope)]);
    let sum = step("Add", "", vec![relu, scaled]);
    p.replace(y, sum);
    p.remove_node(id);
    Outcome::Rewrite(p)
}

impl Pass for LowerPrelu {
    fn name(&self) -> &'static str {
        "lower-prelu"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        run_lowering(
            model,
            cx,
            "lower-prelu does nothing for target tensorrt: TensorRT runs PRelu as a layer of its own",
            &rule,
        )
    }
}
