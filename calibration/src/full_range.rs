//! Tensors whose whole range carries meaning, which [`Method::Auto`]
//! (crate::Method) never clips:
//!
//! * **bounded outputs**: Sigmoid, HardSigmoid, Softmax, Tanh and Clip with
//!   constant bounds (ReLU6): swish and squeeze-excite gates, attention
//!   weights, probabilities. A gate at 1.0 is not an outlier, and the
//!   interval is small anyway.
//! * **tensors decided by their largest values**: what a Softmax,
//!   LogSoftmax, ReduceMax, ArgMax or TopK reads, or an Exp whose output a
//!   ReduceSum normalizes (a softmax written out), and the tensors that
//!   reach it through a shift or a reshape (`x - max(x)`, `x + c`, `x * c`,
//!   Reshape, Transpose, ...). A softmax is decided by its largest inputs,
//!   and clipping those is exactly what changes the winning class: magika's
//!   logits, clipped by the least-squares range at 21.6 where the files
//!   reached 23.4, changed the class of files none of whose other tensors
//!   clipped.

use std::collections::HashMap;

use infopt_ir::{Model, ValueId};

/// Why a tensor keeps its whole range (the method named in range tables).
pub const BOUNDED: &str = "minmax (bounded output)";
pub const DECIDED_BY_LARGEST: &str = "minmax (its largest values decide a softmax or max)";

/// Ops whose outputs lie in a fixed interval whatever their input.
const BOUNDED_OPS: &[&str] = &["Sigmoid", "HardSigmoid", "Softmax", "Tanh"];

/// Ops whose result is decided by the largest values of their first input.
const MAX_DECIDED_OPS: &[&str] = &[
    "Softmax",
    "LogSoftmax",
    "Exp",
    "ReduceMax",
    "ArgMax",
    "TopK",
];

/// Ops that pass their first input's order of values on unchanged (a
/// shift, a positive or constant scale, a reshape).
const ORDER_KEEPING_OPS: &[&str] = &[
    "Sub",
    "Add",
    "Mul",
    "Div",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Identity",
    "Cast",
];

/// The reason named `text` (as a calibration part writes it, see [`crate::shard`]).
pub fn reason_named(text: &str) -> Option<&'static str> {
    [BOUNDED, DECIDED_BY_LARGEST]
        .into_iter()
        .find(|r| *r == text)
}

/// Whether the Exp `n` is a written-out softmax's: a ReduceSum reads its
/// output. An Exp whose output is not summed decides nothing by its
/// largest inputs: lowered Mish (`x / (1 + 2 / (e^x (e^x + 2)))`) reads a
/// Conv's output with one, and keeping that output float left every Conv
/// of a CSPDarknet backbone without its QLinearConv in ONNX Runtime
/// (74.5 ms "in INT8" against 74.4 in float, where with the Conv outputs
/// quantized it ran 34.3 ms).
fn normalized_by_a_sum(g: &infopt_ir::Graph, n: &infopt_ir::Node) -> bool {
    n.outputs.first().copied().flatten().is_some_and(|e| {
        g.input_uses(e).any(|(r, _)| {
            let r = g.node(r);
            r.domain().is_empty() && r.op_type == "ReduceSum"
        })
    })
}

/// Every tensor of `model` that keeps its whole range, with the reason.
pub fn full_range_tensors(model: &Model) -> HashMap<String, &'static str> {
    let g = &model.graph;
    let mut out: HashMap<String, &'static str> = HashMap::new();
    let mut stack: Vec<ValueId> = Vec::new();
    for (_, n) in g.nodes() {
        if !n.domain().is_empty() {
            continue;
        }
        let op = n.op_type.as_str();
        let clip_with_bounds = op == "Clip"
            && n.inputs.len() == 3
            && n.inputs[1..]
                .iter()
                .all(|v| v.is_some_and(|v| g.constant(v).is_some()));
        if (BOUNDED_OPS.contains(&op) || clip_with_bounds)
            && let Some(v) = n.outputs.first().copied().flatten()
        {
            out.insert(g.value(v).name.clone(), BOUNDED);
        }
        if MAX_DECIDED_OPS.contains(&op)
            && (op != "Exp" || normalized_by_a_sum(g, n))
            && let Some(v) = n.inputs.first().copied().flatten()
        {
            stack.push(v);
        }
    }
    // Back from those inputs through the order-keeping ops.
    while let Some(v) = stack.pop() {
        let name = &g.value(v).name;
        if g.constant(v).is_some() || out.contains_key(name) {
            continue;
        }
        out.insert(name.clone(), DECIDED_BY_LARGEST);
        let Some((p, _)) = g.value(v).producer else {
            continue;
        };
        let n = g.node(p);
        if n.domain().is_empty() && ORDER_KEEPING_OPS.contains(&n.op_type.as_str()) {
            // The data input: for Sub the first (`x - max(x)`); for Mul and
            // Div the one scaled by a constant (nothing when both vary); for
            // Add every varying one (a mask added to attention scores).
            let inputs: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
            let varying: Vec<ValueId> = inputs
                .iter()
                .copied()
                .filter(|x| g.constant(*x).is_none())
                .collect();
            let data: Vec<ValueId> = match n.op_type.as_str() {
                "Add" => varying,
                "Mul" if varying.len() == 1 => varying,
                "Div" if varying.len() == 1 && varying[0] == inputs[0] => varying,
                "Mul" | "Div" => Vec::new(),
                _ => inputs.into_iter().take(1).collect(),
            };
            stack.extend(data);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};

    #[test]
    fn logits_of_a_written_out_softmax_and_attention_scores_keep_their_range() {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4"]));
        // A dense head whose softmax is written out as exp(x - max) / sum.
        let w = b.f32("w", &[4, 3], &[0.1; 12]);
        let bias = b.f32("bias", &[3], &[0.0; 3]);
        let mm = b.op("MatMul", &[x, w], vec![]);
        let logits = b.op("Add", &[mm, bias], vec![]);
        let max = b.op(
            "ReduceMax",
            &[logits],
            vec![Attribute::ints("axes", vec![-1])],
        );
        let shifted = b.op("Sub", &[logits, max], vec![]);
        let e = b.op("Exp", &[shifted], vec![]);
        let sum = b.op("ReduceSum", &[e], vec![]);
        let probs = b.op("Div", &[e, sum], vec![]);
        // Attention: softmax(x·k * c + mask) · v; x·k reaches it through a
        // constant scale and the mask Add.
        let k = b.f32("k", &[4, 4], &[0.2; 16]);
        let scores = b.op("MatMul", &[x, k], vec![]);
        let c = b.f32("c", &[], &[0.5]);
        let scaled = b.op("Mul", &[scores, c], vec![]);
        let mask = b.input("mask", DataType::Float, dims(&["1", "4"]));
        let masked = b.op("Add", &[scaled, mask], vec![]);
        let attn = b.op("Softmax", &[masked], vec![Attribute::int("axis", -1)]);
        // A gate: x * sigmoid(x); its Mul of two varying inputs stops the walk.
        let gate = b.op("Sigmoid", &[x], vec![]);
        let swish = b.op("Mul", &[x, gate], vec![]);
        let after = b.op("Exp", &[swish], vec![]);
        let after_sum = b.op("ReduceSum", &[after], vec![]);
        b.output(probs, "probs", DataType::Float, None);
        b.output(attn, "attn", DataType::Float, None);
        b.output(after_sum, "after", DataType::Float, None);
        let m = b.build(13);
        let name = |v| m.graph.value(v).name.clone();
        let keep = full_range_tensors(&m);
        for v in [logits, mm, shifted, scores, scaled, masked, swish] {
            assert_eq!(keep.get(&name(v)), Some(&DECIDED_BY_LARGEST), "{}", name(v));
        }
        for v in [attn, gate] {
            assert_eq!(keep.get(&name(v)), Some(&BOUNDED), "{}", name(v));
        }
        // Not decided by their largest values: the max itself (the Sub's
        // second input), the sum, the swish's input through the varying Mul.
        for v in [max, sum, e] {
            assert_eq!(keep.get(&name(v)), None, "{}", name(v));
        }
        // The walk stops at a layer (MatMul): what it reads is not marked.
        assert_eq!(keep.get(&name(x)), None);
    }

    #[test]
    fn an_exp_no_sum_normalizes_leaves_its_input_to_the_method() {
        // Mish written out as lower-mish writes it: x / (1 + 2 / (e (e + 2))),
        // e = Exp(x). Nothing sums e: x's largest values decide nothing.
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4"]));
        let w = b.f32("w", &[4, 4], &[0.1; 16]);
        let h = b.op("MatMul", &[x, w], vec![]);
        let e = b.op("Exp", &[h], vec![]);
        let one = b.f32("one", &[], &[1.0]);
        let two = b.f32("two", &[], &[2.0]);
        let shifted = b.op("Add", &[e, two], vec![]);
        let n = b.op("Mul", &[e, shifted], vec![]);
        let r = b.op("Div", &[two, n], vec![]);
        let d = b.op("Add", &[r, one], vec![]);
        let y = b.op("Div", &[h, d], vec![]);
        b.output(y, "y", DataType::Float, None);
        let m = b.build(13);
        let keep = full_range_tensors(&m);
        assert_eq!(keep.get(&m.graph.value(h).name), None, "{keep:?}");
    }
}
