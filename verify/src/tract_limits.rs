//! Forms of ops tract 0.23.9 computes wrong, found by ONNX's backend node
//! tests. tract serves twice, and must be kept out of both roles for these:
//! - as the fallback evaluator of constant folding (`src/tract_eval.rs`), a
//!   wrong value would be folded into the model;
//! - as the reference of verification (when ONNX Runtime is absent or cannot
//!   load the model), a wrong reference refuses a right fold (exit 4) or,
//!   worse, passes a wrong one computed by tract itself.
//!
//! Ops that infopt's reference kernels implement (BitShift, DepthToSpace,
//! SpaceToDepth, Celu, Swish) never reach tract when folding, but still
//! disqualify it as a reference.

use infopt_ir::{Graph, Model, Node};

/// Why tract computes `node` wrong, if it does.
pub fn wrong_in_tract(node: &Node) -> Option<String> {
    wrong_in_tract_with(node, None)
}

/// [`wrong_in_tract`] knowing BitShift's counts (`shifts`: values and bit
/// width) when they are constants.
fn wrong_in_tract_with(node: &Node, shifts: Option<(&[i64], u32)>) -> Option<String> {
    if !node.domain().is_empty() {
        return None;
    }
    let op = node.op_type.as_str();
    let string = |name: &str| node.attr_string(name).ok().flatten();
    let float = |name: &str, default: f32| node.attr_float_or(name, default).unwrap_or(default);
    match op {
        "RNN" | "GRU" | "LSTM" => {
            let direction = string("direction").unwrap_or_else(|| "forward".into());
            (direction != "forward")
                .then(|| format!("tract computes {op} with direction={direction} as forward"))
        }
        "DepthToSpace" | "SpaceToDepth" => {
            let mode = string("mode").unwrap_or_else(|| "DCR".into());
            (mode == "CRD").then(|| format!("tract computes {op} mode=CRD as DCR"))
        }
        // The count is data: out of range (negative, or at least the bit
        // width) tract takes it modulo the width.
        "BitShift" => {
            let in_range = shifts.is_some_and(|(counts, width)| {
                counts.iter().all(|&c| (0..i64::from(width)).contains(&c))
            });
            (!in_range).then(|| {
                "tract takes BitShift counts modulo the bit width (a count outside [0, width) shifts every bit out)".into()
            })
        }
        // ONNX's test_celu (float32) has no negative input, so only its
        // float16 case showed it; the property test finds float32 wrong too.
        "Celu" => (float("alpha", 1.0) != 1.0)
            .then(|| "tract drops the alpha factor of Celu's negative branch".into()),
        "Swish" => (float("alpha", 1.0) != 1.0).then(|| "tract computes Swish with alpha 1".into()),
        _ => None,
    }
}

/// The first node of `model` (subgraphs included) tract computes wrong,
/// named, with the reason.
pub fn model_wrong_in_tract(model: &Model) -> Option<String> {
    graph_wrong_in_tract(&model.graph)
}

fn graph_wrong_in_tract(g: &Graph) -> Option<String> {
    for (_, node) in g.nodes() {
        // Constant BitShift counts, all in range, are computed right.
        let shift_values = (node.op_type == "BitShift")
            .then(|| node.inputs.get(1).copied().flatten())
            .flatten()
            .and_then(|v| g.constant(v))
            .and_then(|t| {
                let width = t.dtype().bit_width()? as u32;
                let values = infopt_ir::kernels::Array::from_tensor(t)
                    .ok()?
                    .buf
                    .to_i64()?;
                Some((values, width))
            });
        let shifts = shift_values.as_ref().map(|(v, w)| (v.as_slice(), *w));
        if let Some(why) = wrong_in_tract_with(node, shifts) {
            let name = node.name.as_deref().unwrap_or("");
            return Some(format!("{} `{name}`: {why}", node.op_type));
        }
        for sub in node.subgraphs() {
            if let Some(why) = graph_wrong_in_tract(sub) {
                return Some(why);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::Attribute;

    fn node(op: &str, attrs: Vec<Attribute>) -> Node {
        Node {
            op_type: op.into(),
            attributes: attrs,
            ..Default::default()
        }
    }

    #[test]
    fn the_forms_onnx_tests_found_wrong_are_named_and_the_others_pass() {
        let dir = |d: &str| vec![Attribute::string("direction", d)];
        assert!(wrong_in_tract(&node("GRU", dir("reverse"))).is_some());
        assert!(wrong_in_tract(&node("LSTM", dir("bidirectional"))).is_some());
        assert!(wrong_in_tract(&node("RNN", dir("forward"))).is_none());
        assert!(wrong_in_tract(&node("RNN", vec![])).is_none());
        let mode = |m: &str| vec![Attribute::string("mode", m)];
        assert!(wrong_in_tract(&node("SpaceToDepth", mode("CRD"))).is_some());
        assert!(wrong_in_tract(&node("DepthToSpace", mode("DCR"))).is_none());
        let alpha = |a: f32| vec![Attribute::float("alpha", a)];
        assert!(wrong_in_tract(&node("Celu", alpha(2.0))).is_some());
        assert!(wrong_in_tract(&node("Celu", alpha(1.5))).is_some());
        assert!(wrong_in_tract(&node("Celu", alpha(1.0))).is_none());
        assert!(wrong_in_tract(&node("Swish", alpha(0.5))).is_some());
        assert!(wrong_in_tract(&node("Swish", vec![])).is_none());
        assert!(wrong_in_tract(&node("BitShift", vec![])).is_some());
        let shift = node("BitShift", vec![]);
        assert!(wrong_in_tract_with(&shift, Some((&[0, 7], 8))).is_none());
        assert!(wrong_in_tract_with(&shift, Some((&[0, 8], 8))).is_some());
        assert!(wrong_in_tract_with(&shift, Some((&[-1], 32))).is_some());
    }
}
