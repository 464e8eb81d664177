//! Small graph queries shared by passes.

use infopt_ir::{Graph, NodeId, Tensor, ValueId};

/// The constant tensor behind an optional input.
pub fn const_input(g: &Graph, v: Option<ValueId>) -> Option<&Tensor> {
    g.constant(v?)
}

/// A convolution's `group` when it splits the weight's first axis (a
/// Conv's output channels, a ConvTranspose's input channels) into whole
/// groups; `None` for any other value, which a rule declines on rather than
/// sizing channel tables by it (loading refuses such models; this keeps the
/// rules safe on graphs built without that check).
pub fn conv_group(node: &infopt_ir::Node, weight_dims: &[i64]) -> Option<usize> {
    let group = node.attr_int_or("group", 1).ok()?;
    let split = *weight_dims.first()?;
    (group >= 1 && split >= 1 && split % group == 0).then_some(group as usize)
}

/// Integer constant values (shapes, axes, pads).
pub fn const_i64s(g: &Graph, v: Option<ValueId>) -> Option<Vec<i64>> {
    const_input(g, v)?.to_i64_vec().ok()
}

/// Input `slot` of `node`, if present.
pub fn input(g: &Graph, node: NodeId, slot: usize) -> Option<ValueId> {
    g.node(node).inputs.get(slot).copied().flatten()
}

/// Output `slot` of `node`, if present.
pub fn output(g: &Graph, node: NodeId, slot: usize) -> Option<ValueId> {
    g.node(node).outputs.get(slot).copied().flatten()
}

/// A Clip's bounds, `(min, max)`: its attributes before opset 11, its
/// optional scalar inputs since; a bound left out is the float range's end.
/// Err, with the reason, for a bound input that is not a float scalar
/// constant.
pub fn clip_bounds(g: &Graph, clip: NodeId) -> Result<(f32, f32), String> {
    let n = g.node(clip);
    if n.attr("min").is_some() || n.attr("max").is_some() {
        return Ok((
            n.attr_float_or("min", f32::MIN).unwrap_or(f32::MIN),
            n.attr_float_or("max", f32::MAX).unwrap_or(f32::MAX),
        ));
    }
    let bound = |slot: usize, default: f32, which: &str| -> Result<f32, String> {
        let Some(v) = input(g, clip, slot) else {
            return Ok(default);
        };
        let Some(t) = g.constant(v) else {
            return Err(format!(
                "Clip {which} '{}' is not a constant",
                g.value(v).name
            ));
        };
        if t.numel() != Some(1) {
            return Err(format!("Clip {which} is not a scalar"));
        }
        match t.to_f64_vec() {
            Ok(vals) if t.dtype().is_float() => Ok(vals[0] as f32),
            _ => Err(format!("Clip {which} has dtype {}", t.dtype())),
        }
    };
    Ok((bound(1, f32::MIN, "min")?, bound(2, f32::MAX, "max")?))
}

/// The only reader of `v` (a node input), when `v` has exactly one reader and
/// is not a graph output.
pub fn single_reader(g: &Graph, v: ValueId) -> Option<(NodeId, u32)> {
    if g.reader_count(v) != 1 {
        return None;
    }
    g.input_uses(v).next()
}

pub use infopt_ir::graph::is_nondeterministic;

/// True for ops of the default domain or `com.microsoft` (known semantics, no side effects).
pub fn is_known_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "com.microsoft"
}

/// True when the value's name may change: it is not part of the graph's
/// interface (input/output) and not read from an enclosing scope.
pub fn is_renamable(g: &Graph, v: ValueId) -> bool {
    !g.is_graph_input(v) && !g.is_graph_output(v) && !g.value(v).outer
}

/// A tensor of `dtype` (float32, float64, float16 or bfloat16) holding
/// `values` rounded to that type; `None` for other types.
pub fn tensor_from_f64(
    dtype: infopt_ir::DataType,
    dims: Vec<i64>,
    values: &[f64],
) -> Option<Tensor> {
    use infopt_ir::DataType;
    let bytes: Vec<u8> = match dtype {
        DataType::Float => values
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect(),
        DataType::Double => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        DataType::Float16 => values
            .iter()
            .flat_map(|&v| half::f16::from_f64(v).to_le_bytes())
            .collect(),
        DataType::Bfloat16 => values
            .iter()
            .flat_map(|&v| half::bf16::from_f64(v).to_le_bytes())
            .collect(),
        _ => return None,
    };
    Some(Tensor::from_raw(dtype, dims, bytes::Bytes::from(bytes)))
}

/// A float32 tensor's bytes with each block of `block` consecutive values
/// multiplied by `factor(block index)`: the product in f64, rounded once to
/// f32 (what converting to f64, scaling and converting back gives), without
/// an f64 copy of the tensor. `None` when `raw` is not whole blocks. A large
/// weight is scaled on every core ([`crate::par::fill_rows`]); each value is
/// computed alone, so the bytes are the same however it is split.
pub fn scale_f32_blocks(
    raw: &[u8],
    block: usize,
    factor: impl Fn(usize) -> f64 + Sync,
) -> Option<Vec<u8>> {
    let bytes = block.checked_mul(4).filter(|&b| b > 0)?;
    if !raw.len().is_multiple_of(bytes) {
        return None;
    }
    let blocks = raw.len() / bytes;
    Some(crate::par::fill_rows(blocks, bytes, |first, dst| {
        let src = &raw[first * bytes..first * bytes + dst.len()];
        for (i, (src, dst)) in src
            .chunks_exact(bytes)
            .zip(dst.chunks_exact_mut(bytes))
            .enumerate()
        {
            let k = factor(first + i);
            for (c, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(4)) {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64 * k;
                d.copy_from_slice(&(v as f32).to_le_bytes());
            }
        }
    }))
}

/// Label of a node for derived names: its name, else its first output's name.
pub fn node_label(g: &Graph, node: NodeId) -> String {
    let n = g.node(node);
    match n.name.as_deref() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => n
            .outputs
            .iter()
            .flatten()
            .next()
            .map(|&v| g.value(v).name.clone())
            .unwrap_or_else(|| n.op_type.clone()),
    }
}

/// Makes the patch give `new` the `value_info` type `old` has, if any.
pub fn carry_type(p: &mut infopt_ir::Patch, g: &Graph, old: ValueId, new: infopt_ir::PatchValue) {
    if let Some(ty) = g.value(old).tensor_type() {
        p.set_type(new, ty);
    }
}

/// A patch in which `node` (reading `inputs`) replaces the nodes `remove`;
/// its single output takes over `out` (readers, name and type).
pub fn replace_with_node(
    g: &Graph,
    node: infopt_ir::Node,
    inputs: Vec<Option<infopt_ir::PatchValue>>,
    out: ValueId,
    remove: &[NodeId],
) -> infopt_ir::Patch {
    let mut p = infopt_ir::Patch::new();
    let n = p.add_node(node, inputs, vec![String::new()]);
    let new = infopt_ir::PatchValue::NewNode { node: n, output: 0 };
    p.replace(out, new);
    carry_type(&mut p, g, out, new);
    for &r in remove {
        p.remove_node(r);
    }
    p
}

/// Adds one node of a lowering to `p`: `op` reading `inputs`, named
/// `{name}{suffix}` (after the node it replaces) with its output
/// `{name}{suffix}_out`; with an empty suffix the node takes `name` itself
/// and its output is left unnamed, for the value it takes over (see
/// `Patch::replace`) to keep its name.
pub fn add_named_step(
    p: &mut infopt_ir::Patch,
    name: &str,
    op: &str,
    suffix: &str,
    inputs: Vec<infopt_ir::PatchValue>,
) -> infopt_ir::PatchValue {
    let mut node = infopt_ir::Node::new(op);
    node.name = Some(format!("{name}{suffix}"));
    let out = match suffix {
        "" => String::new(),
        _ => format!("{name}{suffix}_out"),
    };
    let added = p.add_node(node, inputs.into_iter().map(Some).collect(), vec![out]);
    infopt_ir::PatchValue::NewNode {
        node: added,
        output: 0,
    }
}

/// Runs a lowering's `rule` over `model`, typed first, unless the target is
/// TensorRT, which runs the lowered op as a layer of its own: then nothing
/// changes and `tensorrt_note` says why.
pub fn run_lowering(
    model: &mut infopt_ir::Model,
    cx: &mut crate::pass::PassCx,
    tensorrt_note: &str,
    rule: &dyn Fn(&Graph, NodeId, &mut crate::pass::PassCx) -> crate::rule::Outcome,
) -> Result<usize, crate::pass::PassError> {
    if cx.target == crate::pass::Target::Tensorrt {
        cx.not_applied(tensorrt_note.to_string());
        return Ok(0);
    }
    infopt_ir::infer::infer_shapes(model);
    crate::rule::apply_rule(model, cx, rule)
}

/// The producer of `v` if it is `op` of the default domain.
pub fn producer_is(g: &Graph, v: ValueId, op: &str) -> Option<NodeId> {
    let (id, _) = g.value(v).producer?;
    let n = g.node(id);
    (n.is(op) && n.domain().is_empty()).then_some(id)
}

/// Whether `v` is read only by `reader` and is no graph output.
pub fn only_read_by(g: &Graph, v: ValueId, reader: NodeId) -> bool {
    !g.is_graph_output(v) && g.value(v).uses.iter().all(|u| u.node == reader)
}

/// Dims rendered as `[1,16,1,1]` for messages.
pub fn dims_string(dims: &[i64]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// The nodes that become dead once every reader of `root` reads another
/// value: `root`'s producer and, walking back, every producer whose outputs
/// are read only by nodes already in the set. Values in `keep` (read by the
/// replacement) and their producers stay. At most `limit` nodes.
pub fn dead_cone(g: &Graph, root: ValueId, keep: &[ValueId], limit: usize) -> Vec<NodeId> {
    let Some((first, _)) = g.value(root).producer else {
        return Vec::new();
    };
    let only_root_read = g
        .node(first)
        .outputs
        .iter()
        .flatten()
        .all(|&o| o == root || (g.reader_count(o) == 0 && !g.is_graph_output(o)));
    if !only_root_read {
        return Vec::new();
    }
    let mut dead = vec![first];
    let mut changed = true;
    while changed && dead.len() < limit {
        changed = false;
        let frontier: Vec<ValueId> = dead
            .iter()
            .flat_map(|&n| g.node(n).inputs.iter().flatten().copied())
            .collect();
        for v in frontier {
            if keep.contains(&v) {
                continue;
            }
            let Some((p, _)) = g.value(v).producer else {
                continue;
            };
            if dead.contains(&p) || g.node(p).has_subgraphs() {
                continue;
            }
            let all_dead = g.node(p).outputs.iter().flatten().all(|&o| {
                !g.is_graph_output(o) && g.value(o).uses.iter().all(|u| dead.contains(&u.node))
            });
            let produces_kept = g.node(p).outputs.iter().flatten().any(|o| keep.contains(o));
            if all_dead && !produces_kept && dead.len() < limit {
                dead.push(p);
                changed = true;
            }
        }
    }
    dead
}

/// The `com.microsoft` domain of ONNX Runtime's contrib ops.
pub const MS_DOMAIN: &str = "com.microsoft";

/// Declares `com.microsoft` version 1 in the model's opset imports (the
/// version ONNX Runtime's contrib ops are registered at), if missing.
pub fn import_ms_domain(model: &mut infopt_ir::Model) {
    if model.opset(MS_DOMAIN).is_none() {
        model
            .meta
            .opset_import
            .push(infopt_ir::proto::OperatorSetIdProto {
                domain: Some(MS_DOMAIN.to_string()),
                version: Some(1),
            });
    }
}

/// For passes that emit ONNX Runtime contrib ops: true when the pipeline
/// targets ONNX Runtime; otherwise says once why the pass did nothing: a
/// note when the user chose the pass, a JSON-only detail when a built-in
/// pipeline holds it for the onnxruntime target's sake.
pub fn targets_onnxruntime(pass: &str, op: &str, cx: &mut crate::pass::PassCx) -> bool {
    if cx.target == crate::pass::Target::Onnxruntime {
        return true;
    }
    let note = format!(
        "{pass} does nothing for target {}: {op} is an ONNX Runtime contrib op",
        cx.target
    );
    cx.not_applied(note);
    false
}

/// The body of a com.microsoft fusion pass: only for target onnxruntime (a
/// note otherwise), on inferred shapes, declaring the `com.microsoft` domain
/// once something was fused (the checker refuses the node without it).
pub fn run_contrib_fusion(
    pass: &str,
    op: &str,
    model: &mut infopt_ir::Model,
    cx: &mut crate::pass::PassCx,
    rule: &dyn Fn(
        &infopt_ir::Graph,
        infopt_ir::NodeId,
        &mut crate::pass::PassCx,
    ) -> crate::rule::Outcome,
) -> Result<usize, crate::pass::PassError> {
    if !targets_onnxruntime(pass, op, cx) {
        return Ok(0);
    }
    infopt_ir::infer::infer_shapes(model);
    let count = crate::rule::apply_rule(model, cx, rule)?;
    if count > 0 {
        import_ms_domain(model);
    }
    Ok(count)
}

/// The element type of `v`, if known.
pub fn dtype_of(g: &Graph, v: ValueId) -> Option<infopt_ir::DataType> {
    g.value_type(v)
        .map(|t| t.dtype)
        .filter(|d| *d != infopt_ir::DataType::Undefined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_blocks_round_once_from_f64_and_refuse_partial_blocks() {
        let values = [1.5f32, -3.25, 1e-7, 7.0, f32::MAX, 0.1];
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let factors = [1.0 / 3.0, 2.5, 0.1];
        let out = scale_f32_blocks(&raw, 2, |i| factors[i]).unwrap();
        let expected: Vec<u8> = values
            .iter()
            .enumerate()
            .flat_map(|(i, &v)| ((v as f64 * factors[i / 2]) as f32).to_le_bytes())
            .collect();
        assert_eq!(out, expected);
        assert!(scale_f32_blocks(&raw, 4, |_| 1.0).is_none());
        assert!(scale_f32_blocks(&raw, 0, |_| 1.0).is_none());
    }
}
