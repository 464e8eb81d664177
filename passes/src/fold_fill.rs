//! Data movement of a fill, folded without writing the fill out: a
//! `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Transpose`, `Expand`,
//! `Tile` or `Identity` of `ConstantOfShape(s)` is `ConstantOfShape(s')` with
//! the same value, `s'` the output shape inference knows. ONNX's `light`
//! models make their weights this way (`Reshape(ConstantOfShape([1000,
//! 1024]))` before a Gemm), too large for the folding budget; the fold keeps
//! them a few bytes. Exact: every element is the fill value either way.

use infopt_ir::infer::GraphFacts;
use infopt_ir::{Graph, NodeId, Tensor};

/// Ops that only move or repeat elements.
const MOVES: &[&str] = &[
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Expand",
    "Tile",
    "Identity",
];

/// Rewrites node `id` into a `ConstantOfShape` when it moves a fill; true
/// when it did. `opset` is the default domain's.
pub(crate) fn refill(g: &mut Graph, facts: &GraphFacts, id: NodeId, opset: i64) -> bool {
    let Some((dims, value)) = moved_fill(g, facts, id, opset) else {
        return false;
    };
    let out = g.node(id).outputs[0].expect("checked by moved_fill");
    let base = format!("{}.shape", g.value(out).name);
    let mut name = base.clone();
    let mut k = 1;
    while g.find_value(&name).is_some() {
        name = format!("{base}_{k}");
        k += 1;
    }
    let rank = dims.len() as i64;
    let shape = g.add_initializer(&name, Tensor::from_i64(vec![rank], &dims));
    let n_inputs = g.node(id).inputs.len();
    for slot in 1..n_inputs {
        g.set_input(id, slot, None);
    }
    g.set_input(id, 0, Some(shape));
    g.trim_inputs(id);
    let node = g.node_mut(id);
    node.op_type = "ConstantOfShape".into();
    node.domain = None;
    node.attributes.clear();
    if let Some(v) = value {
        node.set_attr(infopt_ir::Attribute::tensor("value", &v));
    }
    true
}

/// The output dims and fill value (None: ONNX's default float32 zero) when
/// node `id` moves the output of a `ConstantOfShape` to a shape inference
/// knows, in the fill's own dtype.
fn moved_fill(
    g: &Graph,
    facts: &GraphFacts,
    id: NodeId,
    opset: i64,
) -> Option<(Vec<i64>, Option<Tensor>)> {
    let node = g.node(id);
    if opset < 9 || !node.domain().is_empty() || !MOVES.contains(&node.op_type.as_str()) {
        return None;
    }
    let [Some(out)] = node.outputs.as_slice() else {
        return None;
    };
    let src = node.inputs.first().copied().flatten()?;
    let (p, _) = g.value(src).producer?;
    let fill = g.node(p);
    if !(fill.domain().is_empty() && fill.op_type == "ConstantOfShape") {
        return None;
    }
    let value = fill.attr_tensor("value").ok()?;
    let fill_type = value
        .as_ref()
        .map_or(infopt_ir::DataType::Float, |t| t.dtype());
    let fact = facts.get(*out)?;
    if fact.ty.dtype != fill_type {
        return None;
    }
    let dims = fact.ty.known_dims()?;
    if dims.iter().any(|&d| d < 0) {
        return None;
    }
    Some((dims.to_vec(), value))
}
