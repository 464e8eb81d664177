//! Attributes that size what a pass or a runtime allocates: a convolution's
//! `group`, kernel, strides, dilations and pads, and a pool's window. A file
//! may set them to anything; a value no runtime can run (a group that does
//! not divide the channels, a zero stride, a negative pad) is a model error
//! naming the node, found when the model is loaded, before a pass computes
//! channel counts from it or a runtime sizes a buffer by it (a Conv with
//! `group = 2147483647` once made `fuse-conv-bn` ask for 17 GB).
//!
//! Channel counts come from the weights (initializers or `Constant` nodes)
//! and from the shapes inference derives from the declared inputs; a dim
//! that stays unknown is not checked.

use crate::error::{IrError, Result};
use crate::graph::{Graph, Node, ValueId};
use crate::infer::{GraphFacts, Opsets, Scope, infer_graph};
use crate::model::Model;
use crate::shape::Dim;

impl Model {
    /// Checks every node's sizing attributes against the shapes of its
    /// inputs (main graph with inferred shapes, subgraphs with declared ones).
    pub fn check_attributes(&self) -> Result<()> {
        // Inference records what it finds in value_info; the model loaded
        // must stay as the file had it, so it runs on a copy (tensor data is
        // shared, not copied).
        let mut scratch = self.graph.clone();
        let mut report = crate::infer::InferReport::default();
        let facts = infer_graph(
            &mut scratch,
            Opsets::of(self),
            &Scope::default(),
            &mut report,
        );
        check_graph(&self.graph, Some(&facts), self.opset("").unwrap_or(1))
    }
}

fn check_graph(g: &Graph, facts: Option<&GraphFacts>, opset: i64) -> Result<()> {
    crate::operand_types::check_operand_types(g, facts)?;
    crate::operand_ranks::check_operand_ranks(g, facts)?;
    for (_, node) in g.nodes() {
        if node.domain().is_empty() {
            let dims = |slot: usize| input_dims(g, facts, node, slot);
            match node.op_type.as_str() {
                "Conv" | "ConvInteger" => check_conv(g, node, &dims, false)?,
                "ConvTranspose" => check_conv(g, node, &dims, true)?,
                "MaxPool" | "AveragePool" | "LpPool" => check_window(node)?,
                "Transpose" => crate::axis_bounds::check_perm(node, dims(0).map(|d| d.len()))?,
                "Slice" => crate::axis_bounds::check_slice_steps(g, node)?,
                "Range" => crate::axis_bounds::check_range_delta(g, node)?,
                "Einsum" => crate::axis_bounds::check_einsum_equation(node)?,
                "If" => check_if_branches(node)?,
                "Unsqueeze" | "Squeeze" => check_squeeze_axes(
                    node,
                    dims(0).map(|d| d.len()),
                    squeeze_axes(g, facts, node)?.as_deref(),
                )?,
                "Expand" => {
                    crate::axis_bounds::check_sizes_not_negative(g, node)?;
                    let shape = node.inputs.get(1).copied().flatten();
                    let shape = shape.and_then(|v| partial_ints(g, facts, v));
                    check_expand_broadcast(g, node, dims(0).as_deref(), shape.as_deref())?
                }
                "ConstantOfShape" | "Tile" => {
                    crate::axis_bounds::check_sizes_not_negative(g, node)?
                }
                "Gather" => crate::axis_bounds::check_gather_indices(g, node, dims(0))?,
                "Resize" => crate::axis_bounds::check_resize_has_a_size(g, node, opset)?,
                "Reshape" => crate::reshape_volume::check_reshape_volume(
                    g,
                    node,
                    dims(0).as_deref(),
                    reshape_target(g, facts, node)?.as_deref(),
                )?,
                _ => {}
            }
        }
        for sg in node.subgraphs() {
            check_graph(sg, None, opset)?;
        }
    }
    Ok(())
}

/// An If's branches make as many outputs as each other and as the node
/// has (tract unwrapped its own error on a mismatch and panicked: fuzz
/// seed 5151 case 954; ONNX Runtime refuses the model).
fn check_if_branches(node: &Node) -> Result<()> {
    let count = |name: &str| {
        node.attributes
            .iter()
            .find(|a| a.name() == name)
            .and_then(|a| a.subgraphs.first())
            .map(|g| g.outputs.len())
    };
    let (Some(then), Some(otherwise)) = (count("then_branch"), count("else_branch")) else {
        return Ok(());
    };
    let outputs = node.outputs.len();
    if then == otherwise && then == outputs {
        return Ok(());
    }
    Err(IrError::Invalid(format!(
        "node '{}' (If): then_branch makes {then} outputs, else_branch {otherwise} and the node has {outputs}; the three counts must agree",
        node.name_or_op()
    )))
}

/// Expand's input and `shape` broadcast: aligned from the last axis, two
/// dims both known are equal or one of them is 1 (fuzz seed 24680 case
/// 1555: a Reshape to `[4,1,1,2,1,1,2^31]` expanded to `[N,1,256]`; the
/// ONNX shape inference inside ONNX Runtime went on to a negative dim and
/// aborted the process). `shape` entries inference knows only in part
/// are `None`.
fn check_expand_broadcast(
    g: &Graph,
    node: &Node,
    x: Option<&[Option<i64>]>,
    shape: Option<&[Option<i64>]>,
) -> Result<()> {
    let (Some(x), Some(shape)) = (x, shape) else {
        return Ok(());
    };
    for (a, b) in x.iter().rev().zip(shape.iter().rev()) {
        if let (Some(a), Some(b)) = (*a, *b)
            && a != b
            && a != 1
            && b != 1
        {
            let show = |d: &[Option<i64>]| {
                let parts: Vec<String> = d
                    .iter()
                    .map(|n| n.map_or("?".to_string(), |n| n.to_string()))
                    .collect();
                format!("[{}]", parts.join(","))
            };
            return Err(IrError::Invalid(format!(
                "node '{}' (Expand): input '{}' {} does not broadcast to shape {} ({a} against {b}); dims broadcast when equal or one of them is 1",
                node.name_or_op(),
                input_name(g, node, 0),
                show(x),
                show(shape)
            )));
        }
    }
    Ok(())
}

/// Squeeze's and Unsqueeze's axes: the `axes` input (opset 13+), or the
/// attribute of earlier opsets.
fn squeeze_axes(
    g: &Graph,
    facts: Option<&GraphFacts>,
    node: &Node,
) -> Result<Option<Vec<Option<i64>>>> {
    match node.inputs.get(1).copied().flatten() {
        Some(v) => Ok(partial_ints(g, facts, v)),
        None => Ok(node
            .attr_ints("axes")?
            .map(|a| a.iter().copied().map(Some).collect())),
    }
}

/// The integers `v` holds as the file or inference fixes them; entries
/// inference knows only in part are `None` (Squeeze/Unsqueeze axes,
/// Expand's shape).
fn partial_ints(g: &Graph, facts: Option<&GraphFacts>, v: ValueId) -> Option<Vec<Option<i64>>> {
    if let Some(t) = g.constant(v) {
        return t
            .to_i64_vec()
            .ok()
            .map(|a| a.into_iter().map(Some).collect());
    }
    let value = facts?.get(v)?.value.as_ref()?;
    Some(
        value
            .elems
            .iter()
            .map(|d| match d {
                Dim::Known(n) => Some(*n),
                _ => None,
            })
            .collect(),
    )
}

/// Every axis names an axis of the output (Unsqueeze: rank + number of
/// axes) or of the input (Squeeze), once (an Unsqueeze whose axes came from
/// a rewired shape computation indexed past tract's dims and panicked: fuzz
/// seed 5151 case 980; ONNX Runtime refuses it when it runs).
fn check_squeeze_axes(
    node: &Node,
    rank: Option<usize>,
    axes: Option<&[Option<i64>]>,
) -> Result<()> {
    let (Some(rank), Some(axes)) = (rank, axes) else {
        return Ok(());
    };
    let unsqueeze = node.op_type == "Unsqueeze";
    let limit = if unsqueeze { rank + axes.len() } else { rank } as i64;
    let mut seen = std::collections::HashSet::new();
    for &a in axes.iter().flatten() {
        let axis = if a < 0 { a.saturating_add(limit) } else { a };
        let why = if !(0..limit).contains(&axis) {
            format!("axis {a} is outside [-{limit}, {}]", limit - 1)
        } else if !seen.insert(axis) {
            format!("axis {a} is named twice")
        } else {
            continue;
        };
        let listed: Vec<String> = axes
            .iter()
            .map(|a| a.map_or("?".to_string(), |n| n.to_string()))
            .collect();
        return Err(IrError::Invalid(format!(
            "node '{}' ({}): {why} for its rank-{rank} input and axes [{}]",
            node.name_or_op(),
            node.op_type,
            listed.join(", ")
        )));
    }
    Ok(())
}

/// The target of a Reshape when the file fixes it: the `shape` input's
/// value (a constant, or what inference computes from fixed dims), or the
/// `shape` attribute of opset 1-4.
fn reshape_target(g: &Graph, facts: Option<&GraphFacts>, node: &Node) -> Result<Option<Vec<i64>>> {
    let Some(v) = node.inputs.get(1).copied().flatten() else {
        return Ok(node.attr_ints("shape")?.map(<[i64]>::to_vec));
    };
    let tensor = facts
        .and_then(|f| f.known_value(v))
        .or_else(|| g.constant(v).cloned());
    Ok(tensor.and_then(|t| t.to_i64_vec().ok()))
}

/// Known dims of input `slot` (`None` where a dim is not a number).
fn input_dims(
    g: &Graph,
    facts: Option<&GraphFacts>,
    node: &Node,
    slot: usize,
) -> Option<Vec<Option<i64>>> {
    let v = (*node.inputs.get(slot)?)?;
    let shape = match facts
        .and_then(|f| f.get(v))
        .and_then(|f| f.ty.shape.clone())
    {
        Some(s) => s,
        None => declared_shape(g, v)?,
    };
    Some(
        shape
            .iter()
            .map(|d| match d {
                Dim::Known(n) => Some(*n),
                _ => None,
            })
            .collect(),
    )
}

/// The shape the file states for `v`: its type, or the tensor of the
/// `Constant` node producing it (PaddlePaddle exports keep weights there).
fn declared_shape(g: &Graph, v: ValueId) -> Option<Vec<Dim>> {
    if let Some(s) = g.value_type(v).and_then(|t| t.shape) {
        return Some(s);
    }
    let producer = g.producer(v)?;
    if !(producer.domain().is_empty() && producer.op_type == "Constant") {
        return None;
    }
    let t = producer.attr("value")?.proto.t.as_ref()?;
    Some(t.dims.iter().map(|&d| Dim::Known(d)).collect())
}

fn attr_error(node: &Node, attr: &str, problem: String) -> IrError {
    IrError::Attribute {
        node: node.name_or_op().to_string(),
        op: node.op_type.clone(),
        attr: attr.to_string(),
        problem,
    }
}

fn dims_text(dims: &[Option<i64>]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| d.map_or_else(|| "?".to_string(), |n| n.to_string()))
        .collect();
    format!("[{}]", parts.join(","))
}

fn input_name(g: &Graph, node: &Node, slot: usize) -> String {
    node.inputs
        .get(slot)
        .copied()
        .flatten()
        .map(|v| g.value(v).name.clone())
        .unwrap_or_default()
}

/// Every element of the ints attribute `name` (when present) at least `lo`.
fn check_ints_at_least(node: &Node, name: &str, lo: i64, what: &str) -> Result<()> {
    if let Some(values) = node.attr_ints(name)?
        && let Some(bad) = values.iter().find(|&&v| v < lo)
    {
        return Err(attr_error(
            node,
            name,
            format!("{bad} is not {what} (values {values:?})"),
        ));
    }
    Ok(())
}

/// Most positions a pooling window may cover. Runtimes enumerate a window's
/// positions up front (tract builds a table of their offsets, and with a
/// kernel of 2147483647 x 2147483647 never finishes); real pools stay far
/// below this (a whole 4096 x 4096 map is 16777216).
const MAX_WINDOW_POSITIONS: i128 = 1 << 24;

fn check_window(node: &Node) -> Result<()> {
    check_ints_at_least(node, "kernel_shape", 1, "a positive size")?;
    if let Some(kernel) = node.attr_ints("kernel_shape")? {
        let positions: i128 = kernel
            .iter()
            .map(|&k| i128::from(k))
            .fold(1, |acc, k| acc.saturating_mul(k));
        if positions > MAX_WINDOW_POSITIONS {
            return Err(attr_error(
                node,
                "kernel_shape",
                format!(
                    "{kernel:?} covers {positions} positions, more than the {MAX_WINDOW_POSITIONS} a window may cover"
                ),
            ));
        }
    }
    check_ints_at_least(node, "strides", 1, "a positive stride")?;
    check_ints_at_least(node, "dilations", 1, "a positive dilation")?;
    check_ints_at_least(node, "pads", 0, "a pad (pads are not negative)")?;
    check_ints_at_most(node, "strides", MAX_STEP, "a stride")?;
    check_ints_at_most(node, "dilations", MAX_STEP, "a dilation")?;
    Ok(())
}

/// Largest stride or dilation a window may take. tract ran past 120 s on a
/// Conv with a stride of 2^32 (fuzz seed 4242 case 515); real models step
/// by a few positions, and a step this long leaves one output position on
/// any axis a runtime can hold in memory.
const MAX_STEP: i64 = 1 << 24;

fn check_ints_at_most(node: &Node, name: &str, hi: i64, what: &str) -> Result<()> {
    if let Some(values) = node.attr_ints(name)?
        && let Some(bad) = values.iter().find(|&&v| v > hi)
    {
        return Err(attr_error(
            node,
            name,
            format!(
                "{bad} is larger than {hi}, the longest {what} infopt accepts (values {values:?})"
            ),
        ));
    }
    Ok(())
}

/// Conv `W` is `[M, C/group, k..]`; ConvTranspose `W` is `[C, M/group, k..]`.
fn check_conv(
    g: &Graph,
    node: &Node,
    dims: &dyn Fn(usize) -> Option<Vec<Option<i64>>>,
    transpose: bool,
) -> Result<()> {
    check_window(node)?;
    if transpose {
        check_ints_at_least(node, "output_padding", 0, "a padding (it is not negative)")?;
    }
    let group = node.attr_int_or("group", 1)?;
    if group < 1 {
        return Err(attr_error(
            node,
            "group",
            format!("{group} is not a positive number of groups"),
        ));
    }
    let Some(w) = dims(1) else { return Ok(()) };
    let weight = || format!("weight '{}' {}", input_name(g, node, 1), dims_text(&w));
    if w.len() < 3 {
        return Err(IrError::Invalid(format!(
            "node '{}' ({}): {} has rank {}; a convolution's weight has rank 3 or more",
            node.name_or_op(),
            node.op_type,
            weight(),
            w.len()
        )));
    }
    if let Some(kernel) = node.attr_ints("kernel_shape")?
        && w[2..].iter().all(Option::is_some)
    {
        let from_weight: Vec<i64> = w[2..].iter().flatten().copied().collect();
        if kernel != from_weight.as_slice() {
            return Err(attr_error(
                node,
                "kernel_shape",
                format!("{kernel:?} differs from the kernel of {}", weight()),
            ));
        }
    }
    let (split, split_what) = if transpose {
        (w[0], "input channels")
    } else {
        (w[0], "output channels")
    };
    if let Some(n) = split
        && n % group != 0
    {
        return Err(attr_error(
            node,
            "group",
            format!(
                "{group} does not divide the {n} {split_what} of {}",
                weight()
            ),
        ));
    }
    // One pad per spatial axis and side, one stride / dilation / kernel
    // entry per spatial axis (fuzz seed 11235 case 1105: two pads on a 2-D
    // Conv made tract index past them and panic; ONNX Runtime refuses it).
    let spatial = w.len() - 2;
    for (name, per_axis) in [
        ("pads", 2),
        ("strides", 1),
        ("dilations", 1),
        ("kernel_shape", 1),
    ] {
        if let Some(values) = node.attr_ints(name)?
            && values.len() != per_axis * spatial
        {
            return Err(attr_error(
                node,
                name,
                format!(
                    "{values:?} has {} entries; the {spatial} spatial axes of {} take {}",
                    values.len(),
                    weight(),
                    per_axis * spatial
                ),
            ));
        }
    }
    if let Some(x) = dims(0)
        && x.len() != w.len()
    {
        // ONNX Runtime's embedded shape inference, meeting such a Conv,
        // computed a negative dim and aborted the process on a Slice after
        // it (fuzz seed 24680 case 1555: a rank-7 Reshape target upstream).
        return Err(IrError::Invalid(format!(
            "node '{}' ({}): input '{}' has rank {}, {}: a convolution's input and weight have the same rank",
            node.name_or_op(),
            node.op_type,
            input_name(g, node, 0),
            x.len(),
            weight()
        )));
    }
    if !transpose {
        check_window_fits(g, node, dims(0).as_deref(), &w)?;
    }
    // The data input's channels: Conv reads W[1] per group, ConvTranspose W[0].
    let channels = dims(0).and_then(|x| x.get(1).copied().flatten());
    let expected = if transpose {
        w[0]
    } else {
        w[1].and_then(|per_group| per_group.checked_mul(group))
    };
    if let (Some(c), Some(e)) = (channels, expected)
        && c != e
    {
        let how = if transpose {
            String::new()
        } else {
            format!(" with group {group}")
        };
        return Err(attr_error(
            node,
            "group",
            format!(
                "input '{}' has {c} channels, but {}{how} reads {e}",
                input_name(g, node, 0),
                weight()
            ),
        ));
    }
    Ok(())
}

/// A convolution has at least one output position along every spatial
/// axis: the input's dim plus its explicit pads covers the dilated kernel
/// (fuzz seed 13579 case 1404: an input declared with a spatial dim of 0
/// made tract divide by zero; ONNX Runtime refuses it when it runs). Only
/// where the file fixes the dim and `auto_pad` is unset.
fn check_window_fits(
    g: &Graph,
    node: &Node,
    x: Option<&[Option<i64>]>,
    w: &[Option<i64>],
) -> Result<()> {
    let Some(x) = x else { return Ok(()) };
    let auto = node.attr_string("auto_pad")?.unwrap_or_default();
    if !(auto.is_empty() || auto == "NOTSET") || x.len() != w.len() {
        return Ok(());
    }
    let spatial = x.len().saturating_sub(2);
    let pads = node.attr_ints("pads")?.unwrap_or(&[]);
    let dilations = node.attr_ints("dilations")?.unwrap_or(&[]);
    for k in 0..spatial {
        let (Some(d), Some(kernel)) = (x[2 + k], w[2 + k]) else {
            continue;
        };
        let before = pads.get(k).copied().unwrap_or(0);
        let after = pads.get(k + spatial).copied().unwrap_or(0);
        let dilation = dilations.get(k).copied().unwrap_or(1);
        let padded = d.saturating_add(before).saturating_add(after);
        let window = dilation
            .saturating_mul(kernel.saturating_sub(1))
            .saturating_add(1);
        if padded < window {
            return Err(IrError::Invalid(format!(
                "node '{}' ({}): input '{}' has {d} along axis {}, {padded} with its pads, shorter than the kernel's window of {window}: the convolution has no output there",
                node.name_or_op(),
                node.op_type,
                input_name(g, node, 0),
                k + 2
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::builder::{GraphBuilder, dims};
    use crate::{Attribute, DataType, Model};

    /// x [1, 4, 8, 8] -> Conv(W [4, 4/groups, 3, 3], group); `mutate` edits the Conv.
    fn conv_model(groups: i64, mutate: impl FnOnce(&mut crate::Node)) -> Model {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4", "8", "8"]));
        let per = 4 / groups;
        let w = b.f32("w", &[4, per, 3, 3], &vec![0.5; (4 * per * 9) as usize]);
        let y = b.op("Conv", &[x, w], vec![Attribute::int("group", groups)]);
        b.output(y, "y", DataType::Float, None);
        let mut m = b.build(17);
        let id = m.graph.node_ids()[0];
        mutate(m.graph.node_mut(id));
        m
    }

    fn message(m: &Model) -> String {
        m.check_attributes()
            .map(|_| String::new())
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn a_string_tensor_read_by_a_conv_names_the_node_and_the_tensor() {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4", "8", "8"]));
        let w = b.f32("w", &[4, 4, 3, 3], &[0.5; 144]);
        // A string input, as a damaged file may declare a bias.
        let bias = b.input("bias", DataType::String, dims(&["4"]));
        let y = b.op("Conv", &[x, w, bias], vec![]);
        b.output(y, "y", DataType::Float, None);
        assert_eq!(
            message(&b.build(17)),
            "invalid graph: node 'conv_1' (Conv): input 'bias' is a string tensor, and Conv computes on numbers; the file is damaged or was written with the wrong type"
        );
    }

    #[test]
    fn a_perm_that_is_not_a_permutation_and_a_zero_step_name_the_node() {
        let transpose = |perm: Vec<i64>| {
            let mut b = GraphBuilder::new();
            let x = b.input("x", DataType::Float, dims(&["1", "4", "8"]));
            let y = b.op("Transpose", &[x], vec![Attribute::ints("perm", perm)]);
            b.output(y, "y", DataType::Float, None);
            message(&b.build(17))
        };
        assert_eq!(transpose(vec![2, 0, 1]), "");
        assert_eq!(
            transpose(vec![0, 2147483647, 1]),
            "invalid graph: node 'transpose_1' (Transpose): attribute 'perm': [0, 2147483647, 1] is not a permutation of the 3 axes of its input"
        );
        assert_eq!(
            transpose(vec![0, 0, 1]),
            "invalid graph: node 'transpose_1' (Transpose): attribute 'perm': [0, 0, 1] is not a permutation of the 3 axes of its input"
        );
        assert_eq!(
            transpose(vec![1, 0]),
            "invalid graph: node 'transpose_1' (Transpose): attribute 'perm': [1, 0] has 2 entries for an input of rank 3"
        );
        let slice = |step: i64| {
            let mut b = GraphBuilder::new();
            let x = b.input("x", DataType::Float, dims(&["1", "4", "8"]));
            let starts = b.i64("starts", &[1], &[0]);
            let ends = b.i64("ends", &[1], &[8]);
            let axes = b.i64("axes", &[1], &[2]);
            let steps = b.i64("steps", &[1], &[step]);
            let y = b.op("Slice", &[x, starts, ends, axes, steps], vec![]);
            b.output(y, "y", DataType::Float, None);
            message(&b.build(17))
        };
        assert_eq!(slice(2), "");
        assert_eq!(
            slice(0),
            "invalid graph: node 'slice_1' (Slice): input 'steps' ('steps') is [0]; a slice step is never 0"
        );
    }

    /// `MatMul(x [1, 4], b)` with `b` a constant of `b_dims`.
    fn matmul_of(op: &str, b_dims: &[i64]) -> Model {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4"]));
        let n: i64 = b_dims.iter().product();
        let w = b.f32("w", b_dims, &vec![2.0; n as usize]);
        let y = b.op(op, &[x, w], vec![]);
        b.output(y, "y", DataType::Float, None);
        b.build(17)
    }

    #[test]
    fn a_matmul_of_a_scalar_and_a_gemm_of_a_vector_name_the_node() {
        assert_eq!(
            message(&matmul_of("MatMul", &[])),
            "invalid graph: node 'matmul_1' (MatMul): input 1 'w' has rank 0, and MatMul takes rank 1 or more there"
        );
        assert_eq!(
            message(&matmul_of("Gemm", &[4])),
            "invalid graph: node 'gemm_1' (Gemm): input 1 'w' has rank 1, and Gemm takes rank 2 there"
        );
        // Vectors and batches of matrices are MatMul's to take.
        assert_eq!(message(&matmul_of("MatMul", &[4])), "");
        assert_eq!(message(&matmul_of("MatMul", &[2, 4, 3])), "");
        assert_eq!(message(&matmul_of("Gemm", &[4, 3])), "");
    }

    #[test]
    fn a_valid_grouped_conv_passes() {
        assert_eq!(message(&conv_model(2, |_| {})), "");
        assert_eq!(message(&conv_model(4, |_| {})), "");
    }

    #[test]
    fn a_group_that_does_not_divide_the_channels_names_the_node() {
        let m = conv_model(1, |n| n.set_attr(Attribute::int("group", 2147483647)));
        assert_eq!(
            message(&m),
            "node 'conv_1' (Conv): attribute 'group': 2147483647 does not divide the 4 output channels of weight 'w' [4,4,3,3]"
        );
    }

    #[test]
    fn a_group_at_odds_with_the_input_channels_is_refused() {
        // W [4, 1, 3, 3] with group 2 reads 2 channels; x has 4.
        let m = conv_model(4, |n| n.set_attr(Attribute::int("group", 2)));
        assert_eq!(
            message(&m),
            "node 'conv_1' (Conv): attribute 'group': input 'x' has 4 channels, but weight 'w' [4,1,3,3] with group 2 reads 2"
        );
    }

    #[test]
    fn strides_and_dilations_past_the_longest_step_are_refused() {
        let m = conv_model(1, |n| {
            n.set_attr(Attribute::ints("strides", vec![4294967296, 3]))
        });
        assert_eq!(
            message(&m),
            "node 'conv_1' (Conv): attribute 'strides': 4294967296 is larger than 16777216, the longest a stride infopt accepts (values [4294967296, 3])"
        );
        let m = conv_model(1, |n| {
            n.set_attr(Attribute::ints("dilations", vec![1, 16777217]))
        });
        assert_eq!(
            message(&m),
            "node 'conv_1' (Conv): attribute 'dilations': 16777217 is larger than 16777216, the longest a dilation infopt accepts (values [1, 16777217])"
        );
        let m = conv_model(1, |n| {
            n.set_attr(Attribute::ints("strides", vec![16777216, 1]))
        });
        let at_the_bound = message(&m);
        assert!(!at_the_bound.contains("longest"), "{at_the_bound}");
    }

    #[test]
    fn non_positive_groups_strides_and_negative_pads_are_refused() {
        let m = conv_model(1, |n| n.set_attr(Attribute::int("group", 0)));
        assert_eq!(
            message(&m),
            "node 'conv_1' (Conv): attribute 'group': 0 is not a positive number of groups"
        );
        let m = conv_model(1, |n| n.set_attr(Attribute::ints("strides", vec![0, 1])));
        assert_eq!(
            message(&m),
            "node 'conv_1' (Conv): attribute 'strides': 0 is not a positive stride (values [0, 1])"
        );
        let m = conv_model(1, |n| {
            n.set_attr(Attribute::ints("pads", vec![-5, 0, 0, 0]))
        });
        assert_eq!(
            message(&m),
            "node 'conv_1' (Conv): attribute 'pads': -5 is not a pad (pads are not negative) (values [-5, 0, 0, 0])"
        );
    }

    #[test]
    fn a_pooling_window_beyond_the_bound_is_refused() {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4", "h", "w"]));
        let k = 2147483647;
        let y = b.op(
            "AveragePool",
            &[x],
            vec![Attribute::ints("kernel_shape", vec![k, k])],
        );
        b.output(y, "y", DataType::Float, None);
        assert_eq!(
            message(&b.build(17)),
            "node 'averagepool_1' (AveragePool): attribute 'kernel_shape': [2147483647, 2147483647] covers 4611686014132420609 positions, more than the 16777216 a window may cover"
        );
    }

    #[test]
    fn a_kernel_shape_unlike_the_weight_is_refused() {
        let m = conv_model(1, |n| {
            n.set_attr(Attribute::ints("kernel_shape", vec![100000, 3]))
        });
        assert_eq!(
            message(&m),
            "node 'conv_1' (Conv): attribute 'kernel_shape': [100000, 3] differs from the kernel of weight 'w' [4,4,3,3]"
        );
    }
}
