//! Raising the default-domain opset to 13, where `DequantizeLinear` takes an
//! `axis` (per-channel scales).
//!
//! From 11/12 to 13 only a few operators changed meaning; those are rewritten
//! to their opset-13 form, and anything this module cannot rewrite exactly
//! refuses the upgrade with the node's name (a model whose opset import says
//! 13 while its nodes use opset-11 attributes is invalid; ONNX Runtime's
//! `quantize_static` writes such models).

use infopt_ir::{Attribute, Graph, Model, NodeId, Tensor};

/// Ops whose opset-13 form differs from their opset-11/12 form.
const CHANGED: &[&str] = &[
    "Split",
    "Squeeze",
    "Unsqueeze",
    "ReduceSum",
    "Softmax",
    "LogSoftmax",
    "Hardmax",
    "Dropout",
];

/// Rewrites the model to opset 13; `Err` names the node that prevents it.
pub fn upgrade_to_13(model: &mut Model) -> Result<Vec<String>, String> {
    let from = model.opset("").unwrap_or(1);
    if from >= 13 {
        return Ok(Vec::new());
    }
    if from < 11 {
        // The quantize step converts these with `upgrade-opset`'s converter.
        return Err(format!(
            "per-channel INT8 needs opset 13 and the model imports opset {from}; raise it with --upgrade-opset 13"
        ));
    }
    let g = &mut model.graph;
    for (_, n) in g.nodes() {
        if n.has_subgraphs() && subgraph_has_changed_ops(n.subgraphs()) {
            return Err(format!(
                "cannot raise opset {from} -> 13: node '{}' ({}) has a subgraph with ops whose form changed at 13; convert the model with onnx.version_converter first",
                n.name_or_op(),
                n.op_type
            ));
        }
    }
    let mut changes = Vec::new();
    for id in g.node_ids() {
        let n = g.node(id);
        if !n.domain().is_empty() || !CHANGED.contains(&n.op_type.as_str()) {
            continue;
        }
        if let Some(change) = rewrite(g, id, from)? {
            changes.push(change);
        }
    }
    for o in &mut model.meta.opset_import {
        let d = o.domain.as_deref().unwrap_or("");
        if d.is_empty() || d == "ai.onnx" {
            o.version = Some(13);
        }
    }
    Ok(changes)
}

fn subgraph_has_changed_ops<'a>(graphs: impl Iterator<Item = &'a Graph>) -> bool {
    graphs.into_iter().any(|sg| {
        sg.nodes().any(|(_, n)| {
            (n.domain().is_empty() && CHANGED.contains(&n.op_type.as_str()))
                || (n.has_subgraphs() && subgraph_has_changed_ops(n.subgraphs()))
        })
    })
}

/// Moves an INT64 list attribute to a new constant input at `slot`.
fn attr_to_input(g: &mut Graph, id: NodeId, attr: &str, slot: usize) -> Result<bool, String> {
    let values = match g.node(id).attr_ints(attr) {
        Ok(Some(v)) => v.to_vec(),
        Ok(None) => return Ok(false),
        Err(e) => return Err(format!("node '{}': {e}", g.node(id).name_or_op())),
    };
    let name = format!("{}_{attr}", g.node(id).name_or_op());
    let v = g.add_initializer(&name, Tensor::from_i64(vec![values.len() as i64], &values));
    if g.node(id).inputs.len() > slot {
        return Err(format!(
            "node '{}' has both a '{attr}' attribute and input {slot}",
            g.node(id).name_or_op()
        ));
    }
    g.set_input(id, slot, Some(v));
    g.node_mut(id).remove_attr(attr);
    Ok(true)
}

fn rewrite(g: &mut Graph, id: NodeId, from: i64) -> Result<Option<String>, String> {
    let op = g.node(id).op_type.clone();
    let name = g.node(id).name_or_op().to_string();
    match op.as_str() {
        "Split" => Ok(attr_to_input(g, id, "split", 1)?
            .then(|| format!("Split '{name}': split attribute -> input"))),
        "Squeeze" | "Unsqueeze" | "ReduceSum" => Ok(attr_to_input(g, id, "axes", 1)?
            .then(|| format!("{op} '{name}': axes attribute -> input"))),
        "Dropout" => {
            // Opset 12 moved `ratio` to an input; at inference Dropout is an
            // identity, so the attribute only has to go.
            if g.node(id).attr("ratio").is_some() {
                g.node_mut(id).remove_attr("ratio");
                return Ok(Some(format!(
                    "Dropout '{name}': ratio attribute dropped (inference)"
                )));
            }
            Ok(None)
        }
        _ => {
            // Softmax family: before 13 the input is flattened to 2-D at
            // `axis` (default 1); at 13 the op runs along `axis` (default -1).
            // The two agree only when `axis` is the last dimension.
            let n = g.node(id);
            let axis = n.attr_int_or("axis", 1).unwrap_or(1);
            let rank = n
                .inputs
                .first()
                .copied()
                .flatten()
                .and_then(|x| g.value_type(x))
                .and_then(|t| t.shape)
                .map(|s| s.len() as i64);
            let Some(rank) = rank else {
                return Err(format!(
                    "cannot raise opset {from} -> 13: {op} '{name}' has an input of unknown rank (its meaning changed at 13); run infer-shapes first"
                ));
            };
            let norm = if axis < 0 { axis + rank } else { axis };
            if norm != rank - 1 {
                return Err(format!(
                    "cannot raise opset {from} -> 13: {op} '{name}' normalizes over dims {norm}.. of a rank-{rank} input, which opset 13 cannot express in one node; convert the model with onnx.version_converter first"
                ));
            }
            g.node_mut(id).set_attr(Attribute::int("axis", rank - 1));
            Ok(Some(format!(
                "{op} '{name}': axis {axis} kept as the last axis"
            )))
        }
    }
}
