//! Values for inputs that select what a model computes.
//!
//! A scalar input compared with a constant (`Equal(sr, 16000)` feeding an
//! `If`, as in silero-vad) is a mode switch, not data: a random value picks
//! the branch nobody meant (here the 8 kHz one, which cannot run on the
//! frames of the 16 kHz one) and verification fails for a reason that has
//! nothing to do with the rewrite. Such an input gets the constant it is
//! compared with. An input named like a sample rate with no comparison gets
//! the most common rate the graph holds as a constant.
//!
//! When a run still fails, [`branch_inputs`] names the inputs that decide an
//! `If`, so the error can say which value to give with `--inputs`.

use infopt_ir::{DataType, Dim, Graph, Model, Node, Tensor, ValueId};

/// A value chosen for one input, and why (for the report's notes).
#[derive(Clone, Debug, PartialEq)]
pub struct ValueHint {
    pub input: String,
    pub value: f64,
    pub why: String,
}

/// Ops that pass a value through unchanged (up to dtype and shape).
const PASS_THROUGH: &[&str] = &[
    "Cast",
    "Identity",
    "Squeeze",
    "Unsqueeze",
    "Reshape",
    "Flatten",
];

/// Sample rates, most common first.
const SAMPLE_RATES: &[i64] = &[16000, 8000, 22050, 24000, 44100, 48000, 32000, 11025];

/// Scalar (one-element) graph inputs of a numeric type.
fn scalar_inputs(g: &Graph) -> Vec<(ValueId, String)> {
    g.inputs
        .iter()
        .map(|io| io.value)
        .filter(|&v| g.value(v).initializer.is_none())
        .filter(|&v| {
            g.value_type(v).is_some_and(|t| {
                t.dtype != DataType::String
                    && t.dtype != DataType::Bool
                    && t.shape
                        .is_some_and(|s| s.iter().all(|d| matches!(d, Dim::Known(1))))
            })
        })
        .map(|v| (v, g.value(v).name.clone()))
        .collect()
}

/// The one-element constant `v` holds: an initializer or a Constant's output.
fn scalar_constant(g: &Graph, v: ValueId) -> Option<f64> {
    let t: Tensor = match g.constant(v) {
        Some(t) => t.clone(),
        None => {
            let p = g.producer(v)?;
            if !p.is("Constant") {
                return None;
            }
            infopt_ir::infer::constant_value(p)?
        }
    };
    if t.numel()? != 1 {
        return None;
    }
    t.to_f64_vec().ok()?.first().copied()
}

/// Values `v` reaches through pass-through ops, with `v` first (bounded).
fn aliases(g: &Graph, v: ValueId) -> Vec<ValueId> {
    let mut out = vec![v];
    let mut i = 0;
    while i < out.len() && out.len() < 32 {
        let cur = out[i];
        for (n, slot) in g.input_uses(cur) {
            let node = g.node(n);
            if slot == 0
                && node.domain().is_empty()
                && PASS_THROUGH.contains(&node.op_type.as_str())
                && let Some(Some(o)) = node.outputs.first()
                && !out.contains(o)
            {
                out.push(*o);
            }
        }
        i += 1;
    }
    out
}

/// The constant an `Equal` compares `v` (or a pass-through of it) with.
fn compared_with(g: &Graph, v: ValueId) -> Option<(f64, &Node)> {
    for a in aliases(g, v) {
        for (n, slot) in g.input_uses(a) {
            let node = g.node(n);
            if !node.is("Equal") || !node.domain().is_empty() {
                continue;
            }
            let other = node.inputs.get(1 - slot.min(1) as usize).copied().flatten();
            if let Some(c) = other.and_then(|o| scalar_constant(g, o)) {
                return Some((c, node));
            }
        }
    }
    None
}

/// Every integer scalar constant of `g` and its subgraphs.
fn integer_constants(g: &Graph, out: &mut Vec<i64>) {
    for (_, t) in g.initializers() {
        if t.numel() == Some(1)
            && let Ok(v) = t.to_i64_vec()
        {
            out.extend(v);
        }
    }
    for (_, n) in g.nodes() {
        if n.is("Constant")
            && let Some(t) = infopt_ir::infer::constant_value(n)
            && t.numel() == Some(1)
            && let Ok(v) = t.to_i64_vec()
        {
            out.extend(v);
        }
        for sub in n.subgraphs() {
            integer_constants(sub, out);
        }
    }
}

fn looks_like_sample_rate(name: &str) -> bool {
    let n = name.to_lowercase();
    n == "sr"
        || n.contains("sample_rate")
        || n.contains("sampling_rate")
        || n.contains("samplerate")
}

/// Values for the mode-switch inputs of `model` (see the module doc).
pub fn chosen_values(model: &Model) -> Vec<ValueHint> {
    let g = &model.graph;
    let mut out = Vec::new();
    let mut constants: Option<Vec<i64>> = None;
    for (v, name) in scalar_inputs(g) {
        if let Some((value, node)) = compared_with(g, v) {
            out.push(ValueHint {
                why: format!(
                    "input `{name}` set to {value}, the value {} `{}` compares it with",
                    node.op_type,
                    node.name_or_op()
                ),
                input: name,
                value,
            });
            continue;
        }
        if !looks_like_sample_rate(&name) {
            continue;
        }
        let consts = constants.get_or_insert_with(|| {
            let mut c = Vec::new();
            integer_constants(g, &mut c);
            c
        });
        if let Some(&rate) = SAMPLE_RATES.iter().find(|r| consts.contains(r)) {
            out.push(ValueHint {
                why: format!(
                    "input `{name}` set to {rate}, a sample rate the graph holds as a constant"
                ),
                input: name,
                value: rate as f64,
            });
        }
    }
    out
}

/// Scalar inputs that decide the condition of an `If` of the main graph,
/// with that If's name: `(input, if)`.
pub fn branch_inputs(model: &Model) -> Vec<(String, String)> {
    let g = &model.graph;
    let mut out = Vec::new();
    for (v, name) in scalar_inputs(g) {
        // Forward from the input through any op but Shape/Size (they read
        // the shape, not the value), bounded.
        let mut seen = vec![v];
        let mut i = 0;
        while i < seen.len() && seen.len() < 256 {
            for (n, slot) in g.input_uses(seen[i]) {
                let node = g.node(n);
                if node.is("If") && slot == 0 {
                    let label = node.name_or_op().to_string();
                    if !out.contains(&(name.clone(), label.clone())) {
                        out.push((name.clone(), label));
                    }
                    continue;
                }
                if node.is("Shape") || node.is("Size") {
                    continue;
                }
                for o in node.outputs.iter().flatten() {
                    if !seen.contains(o) {
                        seen.push(*o);
                    }
                }
            }
            i += 1;
        }
    }
    out
}
