//! Periodic functions of a computed argument: `Sin(t)`, `Cos(t)`. What
//! matters to them is the argument's absolute error, and a half type keeps
//! a relative one: float16 spaces 20 apart by 0.016 and 500 by 0.25
//! (bfloat16 eight times coarser), so a windowed-sinc kernel's phase
//! (`sin(t) / t` for `|t|` up to 6 pi), or a sinusoidal position
//! (`sin(pos * freq)`), is off by a good part of a radian where float32 is
//! exact to 1e-6. onnx-asr's 11 kHz -> 16 kHz resampler computes its
//! kernel in the graph that way; in float16 its output reached cosine
//! 0.9961 on audio. The Sin/Cos and the elementwise chain that computes
//! their argument stay float32 whatever the inputs: they are a handful of
//! cheap ops, and what reads their result (the kernel, the embedding)
//! converts.

use std::collections::HashMap;

use infopt_ir::{Graph, NodeId};

/// The periodic ops.
const PERIODIC: &[&str] = &["Sin", "Cos", "Tan"];

/// Elementwise ops that compute an argument upstream of a Sin/Cos.
const ARGUMENT: &[&str] = &[
    "Mul", "Add", "Sub", "Div", "Neg", "Abs", "Clip", "Max", "Min", "Floor", "Ceil", "Round",
    "Mod", "Where", "Unsqueeze", "Squeeze", "Reshape", "Expand", "CumSum",
];

/// How far upstream of the Sin/Cos the argument's chain is followed.
const DEPTH: usize = 6;

/// Nodes kept in float32 because a half type would lose the absolute
/// precision of a Sin/Cos argument, with the reason.
pub fn periodic(g: &Graph) -> HashMap<NodeId, String> {
    let mut out: HashMap<NodeId, String> = HashMap::new();
    for (id, n) in g.nodes() {
        if !n.domain().is_empty() || !PERIODIC.contains(&n.op_type.as_str()) {
            continue;
        }
        let why = format!(
            "periodic: {} needs its argument to a fixed absolute precision, which a half type loses as the argument grows (float16 spaces 20 apart by 0.016): it and the chain computing its argument stay float32",
            n.op_type
        );
        out.insert(id, why.clone());
        super::guards::keep_argument_chain(g, id, DEPTH, ARGUMENT, &why, &mut out);
    }
    out
}
