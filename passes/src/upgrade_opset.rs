//! Converts the model's default-domain opset to a newer version.
//!
//! ## What it does
//! Raises the imported version of the default ONNX domain from its current
//! value (7 or later) to `to` (at most 24), rewriting every node, in the main
//! graph and in subgraphs, whose operator changed form or meaning between
//! the two versions:
//! - list attributes that became inputs: `axes` of Squeeze/Unsqueeze/
//!   ReduceSum (13) and of the other reductions (18), `split` of Split (13),
//!   `min`/`max` of Clip (11), `pads`/`value` of Pad (11), `starts`/`ends`/
//!   `axes` of Slice (10), `k` of TopK (10), `ratio` of Dropout (12), `axis`
//!   of DFT (20); each becomes a constant initializer;
//! - Split without a `split` input gets `num_outputs` (18);
//! - Softmax/LogSoftmax/Hardmax (13, now along one axis instead of the
//!   flattened trailing dims): `axis` set to the last axis when it was, else
//!   `Reshape(op(Flatten(x, axis), axis=1), Shape(x))`;
//! - Upsample (deprecated at 10) and Resize-10 become Resize-11 with the
//!   `asymmetric` coordinate mode (and `floor` nearest mode) they implied;
//! - BatchNormalization (14): unused training outputs dropped, `spatial`
//!   (removed at 9) dropped when 1; RoiAlign (16): the old default
//!   `output_half_pixel` written out; GridSample (20): `bilinear`/`bicubic`
//!   renamed `linear`/`cubic`; GroupNormalization (21): per-group scale and
//!   bias repeated per channel; Scatter (deprecated at 11): ScatterElements.
//!
//! Every other change in that range only added types or attributes whose
//! default keeps the old meaning. Model-local functions importing the
//! default domain are raised with the model when none of their ops changed.
//! The IR version is raised to the minimum the new opset needs. The optimizer's later passes then see the new opset
//! (LayerNormalization from 17, Gelu from 20, RMSNormalization from 23).
//!
//! ## When it declines
//! It does not decline node by node: when one node cannot be converted
//! exactly, the whole conversion is refused with an error naming the node and
//! the op (Resize with the `tf_half_pixel_for_nn` mode removed at 13,
//! BatchNormalization whose training outputs are read, `spatial=0`,
//! attributes that are not constants, GroupNormalization with non-constant
//! weights or an unknown channel count, Scan from before opset 9, a
//! model-local function using an op that changed, a model older than
//! opset 7, a target newer than 24). A model already at `to` or newer is
//! left unchanged (lowering an opset is not this pass's job).
//!
//! ## Numerics
//! None: every rewrite computes the same values.
//!
//! ## Example
//! At opset 11, `y = Unsqueeze(x, axes=[0])` becomes, at opset 13,
//! `y = Unsqueeze(x, [0])` with the axes in an initializer.

crate::register_pass! {
    name: "upgrade-opset",
    kind: Canonicalize,
    file: "upgrade_opset.rs",
    options: UpgradeOpsetOptions,
    build: |o: &UpgradeOpsetOptions| UpgradeOpset { to: o.to },
}

use infopt_ir::infer::{GraphFacts, InferReport, Opsets, Scope, infer_graph};
use infopt_ir::{Attribute, DataType, Dim, Graph, Model, Node, NodeId, PatchValue, Tensor, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::for_each_graph_mut;
use crate::util::{input, output, tensor_from_f64};

/// Newest default-domain opset this pass converts to.
pub const MAX_OPSET: i64 = 24;
/// Oldest default-domain opset this pass converts from.
pub const MIN_SOURCE_OPSET: i64 = 7;

/// How a fusion that needs a newer opset says so in its decline reason:
/// "an upgrade-opset step to 17 raises it". One phrase, written here and
/// read back by [`remedy_opset`], so a front end can add its own way of
/// asking for that step (`--upgrade-opset 17` on the command line).
pub fn remedy(to: i64) -> String {
    format!("an upgrade-opset step to {to} raises it")
}

/// The opset a decline reason's [`remedy`] asks for, if it has one.
pub fn remedy_opset(reason: &str) -> Option<i64> {
    let rest = reason.split("an upgrade-opset step to ").nth(1)?;
    rest.strip_suffix(" raises it")?.parse().ok()
}

#[derive(serde::Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UpgradeOpsetOptions {
    /// The default-domain opset to convert to (default 23).
    pub to: i64,
}

impl Default for UpgradeOpsetOptions {
    fn default() -> Self {
        // RMSNormalization's opset: every fusion of the pipeline can apply.
        UpgradeOpsetOptions { to: 23 }
    }
}

pub struct UpgradeOpset {
    pub to: i64,
}

/// One conversion: source and target opset, for "crossed version v" tests.
#[derive(Clone, Copy)]
struct Span {
    from: i64,
    to: i64,
}

impl Span {
    /// True when the op's version `v` lies in (from, to]: the conversion crosses it.
    fn crosses(self, v: i64) -> bool {
        self.from < v && v <= self.to
    }
}

type Refusal = String;

/// Converts `model` to opset `to`; `Err` is the one-line reason.
pub fn upgrade(model: &mut Model, to: i64) -> Result<usize, Refusal> {
    let from = model.opset("").unwrap_or(1);
    if to > MAX_OPSET {
        return Err(format!(
            "cannot upgrade to opset {to}: infopt converts up to opset {MAX_OPSET}"
        ));
    }
    if to <= from {
        // Already as new (or newer): nothing to raise; lowering is another job.
        return Ok(0);
    }
    if from < MIN_SOURCE_OPSET {
        return Err(format!(
            "cannot raise opset {from} -> {to}: models older than opset {MIN_SOURCE_OPSET} are not supported; convert with onnx.version_converter first"
        ));
    }
    let span = Span { from, to };
    let functions = functions_to_raise(model, span)?;
    let opsets = Opsets {
        onnx: from,
        microsoft: model.opset("com.microsoft"),
    };
    // Convert a copy: a refusal leaves the model as it was.
    let mut graph = model.graph.clone();
    let mut changed = 0;
    let mut refusal: Option<Refusal> = None;
    let result = for_each_graph_mut(&mut graph, &mut |g| {
        let mut report = InferReport::default();
        let facts = infer_graph(g, opsets, &Scope::default(), &mut report);
        match convert_graph(g, span, &facts) {
            Ok(n) => {
                changed += n;
                Ok(())
            }
            Err(e) => {
                refusal = Some(e.clone());
                Err(PassError::Model(e))
            }
        }
    });
    if let Some(r) = refusal {
        return Err(r);
    }
    result.map_err(|e| e.to_string())?;
    model.graph = graph;
    for i in functions {
        for o in &mut model.meta.functions[i].opset_import {
            let d = o.domain.as_deref().unwrap_or("");
            if d.is_empty() || d == "ai.onnx" {
                o.version = Some(to);
            }
        }
    }
    for o in &mut model.meta.opset_import {
        let d = o.domain.as_deref().unwrap_or("");
        if d.is_empty() || d == "ai.onnx" {
            o.version = Some(to);
        }
    }
    let ir = model.meta.ir_version.unwrap_or(0);
    if ir < infopt_ir::model::min_ir_version(to) {
        model.meta.ir_version = Some(infopt_ir::model::min_ir_version(to));
    }
    // The opset itself changed even when no node had to.
    Ok(changed + 1)
}

/// Whether a default-domain `op` changed form or meaning in `span` (the
/// ops `convert_node` rewrites).
fn changes(op: &str, span: Span) -> bool {
    match op {
        "Squeeze" | "Unsqueeze" | "ReduceSum" | "Softmax" | "LogSoftmax" | "Hardmax" => {
            span.crosses(13)
        }
        op if REDUCE_18.contains(&op) => span.crosses(18),
        "Split" => span.crosses(13) || span.crosses(18),
        "Clip" | "Pad" | "Scatter" => span.crosses(11),
        "Slice" | "TopK" => span.crosses(10),
        "Dropout" => span.crosses(12),
        "BatchNormalization" => span.crosses(9) || span.crosses(14),
        "Upsample" => true,
        "Resize" => span.crosses(11) || span.crosses(13),
        "Scan" => span.crosses(9),
        "RoiAlign" => span.crosses(16),
        "GridSample" | "DFT" => span.crosses(20),
        "GroupNormalization" => span.crosses(21),
        _ => false,
    }
}

/// The first default-domain op of `nodes` (and their subgraphs) that
/// changed in `span`.
fn changed_op_in(nodes: &[infopt_ir::proto::NodeProto], span: Span) -> Option<String> {
    for n in nodes {
        let domain = n.domain.as_deref().unwrap_or("");
        let op = n.op_type.as_deref().unwrap_or("");
        if (domain.is_empty() || domain == "ai.onnx") && changes(op, span) {
            return Some(op.to_string());
        }
        for a in &n.attribute {
            for sg in a.g.iter().chain(a.graphs.iter()) {
                if let Some(op) = changed_op_in(&sg.node, span) {
                    return Some(op);
                }
            }
        }
    }
    None
}

/// Model-local functions importing the default domain: their nodes follow
/// the function's own import, which must match the model's. Functions
/// whose ops all kept their form are raised with the model (indices
/// returned); one that uses a changed op refuses the upgrade.
fn functions_to_raise(model: &Model, span: Span) -> Result<Vec<usize>, Refusal> {
    let mut out = Vec::new();
    for (i, f) in model.meta.functions.iter().enumerate() {
        let imports_default = f.opset_import.iter().any(|o| {
            let d = o.domain.as_deref().unwrap_or("");
            d.is_empty() || d == "ai.onnx"
        });
        if !imports_default {
            continue;
        }
        if let Some(op) = changed_op_in(&f.node, span) {
            return Err(format!(
                "cannot raise opset {} -> {}: model-local function '{}' uses {op}, whose form changed in between; convert the model with onnx.version_converter first",
                span.from,
                span.to,
                f.name.as_deref().unwrap_or("?")
            ));
        }
        out.push(i);
    }
    Ok(out)
}

fn refuse(g: &Graph, id: NodeId, span: Span, why: &str) -> Refusal {
    let n = g.node(id);
    format!(
        "cannot raise opset {} -> {}: {} '{}' {why}",
        span.from,
        span.to,
        n.op_type,
        n.name_or_op()
    )
}

fn convert_graph(g: &mut Graph, span: Span, facts: &GraphFacts) -> Result<usize, Refusal> {
    let mut changed = 0;
    for id in g.node_ids() {
        if g.try_node(id).is_none() || !g.node(id).domain().is_empty() {
            continue;
        }
        if convert_node(g, id, span, facts)? {
            changed += 1;
        }
    }
    Ok(changed)
}

const REDUCE_18: &[&str] = &[
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
];

/// Rewrites one node; returns whether it changed.
fn convert_node(g: &mut Graph, id: NodeId, span: Span, facts: &GraphFacts) -> Result<bool, Refusal> {
    let op = g.node(id).op_type.clone();
    let mut changed = false;
    match op.as_str() {
        "Squeeze" | "Unsqueeze" | "ReduceSum" if span.crosses(13) => {
            changed |= ints_attr_to_input(g, id, span, "axes", 1)?;
        }
        op if REDUCE_18.contains(&op) && span.crosses(18) => {
            changed |= ints_attr_to_input(g, id, span, "axes", 1)?;
        }
        "Split" => {
            if span.crosses(13) {
                changed |= ints_attr_to_input(g, id, span, "split", 1)?;
            }
            if span.crosses(18) && input(g, id, 1).is_none() {
                let n = g.node(id).outputs.len() as i64;
                g.node_mut(id).set_attr(Attribute::int("num_outputs", n));
                changed = true;
            }
        }
        "Softmax" | "LogSoftmax" | "Hardmax" if span.crosses(13) => {
            softmax_13(g, id, span, facts)?;
            changed = true;
        }
        "Clip" if span.crosses(11) => changed |= clip_11(g, id, span, facts)?,
        "Pad" if span.crosses(11) => changed |= pad_11(g, id, span, facts)?,
        "Slice" if span.crosses(10) => {
            // Slice-1: starts/ends/axes attributes; Slice-10: inputs 1..3.
            for (attr, slot) in [("starts", 1), ("ends", 2), ("axes", 3)] {
                changed |= ints_attr_to_input(g, id, span, attr, slot)?;
            }
        }
        "TopK" if span.crosses(10) => {
            let k = g
                .node(id)
                .attr_int("k")
                .map_err(|e| refuse(g, id, span, &e.to_string()))?
                .ok_or_else(|| refuse(g, id, span, "has no k"))?;
            let v = g.add_initializer(&format!("{}_k", label(g, id)), Tensor::from_i64(vec![1], &[k]));
            g.set_input(id, 1, Some(v));
            g.node_mut(id).remove_attr("k");
            changed = true;
        }
        "Dropout" if span.crosses(12) => {
            if g.node(id).attr("is_test").is_some() {
                g.node_mut(id).remove_attr("is_test");
                changed = true;
            }
            if let Some(r) = g.node(id).attr_float("ratio").ok().flatten() {
                g.node_mut(id).remove_attr("ratio");
                let v = g.add_initializer(
                    &format!("{}_ratio", label(g, id)),
                    Tensor::from_f32(vec![], &[r]),
                );
                g.set_input(id, 1, Some(v));
                changed = true;
            }
        }
        "BatchNormalization" if span.crosses(14) || span.crosses(9) => {
            changed |= batch_norm(g, id, span)?;
        }
        "Upsample" => {
            upsample_to_resize(g, id, span)?;
            changed = true;
        }
        "Resize" => {
            if span.from <= 10 && span.to >= 11 {
                resize_10_11(g, id, span)?;
                changed = true;
            }
            if span.crosses(13) {
                let mode = g.node(id).attr_string("coordinate_transformation_mode").ok().flatten();
                if mode.as_deref() == Some("tf_half_pixel_for_nn") {
                    return Err(refuse(
                        g,
                        id,
                        span,
                        "uses coordinate_transformation_mode tf_half_pixel_for_nn, removed at opset 13 with no exact replacement",
                    ));
                }
            }
        }
        "Scatter" if span.to >= 11 => {
            // Deprecated at 11 for ScatterElements, which has the same meaning.
            g.node_mut(id).op_type = "ScatterElements".into();
            changed = true;
        }
        "Scan" if span.crosses(9) => {
            return Err(refuse(
                g,
                id,
                span,
                "is Scan-8 (batch semantics removed at 9); convert with onnx.version_converter first",
            ));
        }
        "RoiAlign"
            if span.crosses(16) && g.node(id).attr("coordinate_transformation_mode").is_none() =>
        {
            g.node_mut(id).set_attr(Attribute::string(
                "coordinate_transformation_mode",
                "output_half_pixel",
            ));
            changed = true;
        }
        "GridSample" if span.crosses(20) => {
            let mode = g.node(id).attr_string("mode").ok().flatten();
            let new = match mode.as_deref() {
                None | Some("bilinear") => "linear",
                Some("bicubic") => "cubic",
                Some("nearest") => "nearest",
                Some(m) => return Err(refuse(g, id, span, &format!("has unknown mode '{m}'"))),
            };
            g.node_mut(id).set_attr(Attribute::string("mode", new));
            changed = true;
        }
        "DFT" if span.crosses(20) => {
            let axis = g.node(id).attr_int_or("axis", 1).unwrap_or(1);
            g.node_mut(id).remove_attr("axis");
            let v = g.add_initializer(&format!("{}_axis", label(g, id)), Tensor::from_i64(vec![], &[axis]));
            g.set_input(id, 2, Some(v));
            changed = true;
        }
        "GroupNormalization" if span.crosses(21) => {
            group_norm_21(g, id, span, facts)?;
            changed = true;
        }
        _ => {}
    }
    Ok(changed)
}

fn label(g: &Graph, id: NodeId) -> String {
    crate::util::node_label(g, id)
}

/// Moves an INT64 list attribute to a new constant input at `slot`.
fn ints_attr_to_input(
    g: &mut Graph,
    id: NodeId,
    span: Span,
    attr: &str,
    slot: usize,
) -> Result<bool, Refusal> {
    let values = match g.node(id).attr_ints(attr) {
        Ok(Some(v)) => v.to_vec(),
        Ok(None) => return Ok(false),
        Err(e) => return Err(refuse(g, id, span, &format!("has a malformed '{attr}': {e}"))),
    };
    if input(g, id, slot).is_some() {
        return Err(refuse(g, id, span, &format!("has both a '{attr}' attribute and input {slot}")));
    }
    let name = format!("{}_{attr}", label(g, id));
    let v = g.add_initializer(&name, Tensor::from_i64(vec![values.len() as i64], &values));
    // Optional inputs before `slot` stay empty.
    g.set_input(id, slot, Some(v));
    g.node_mut(id).remove_attr(attr);
    Ok(true)
}

fn dtype_of(g: &Graph, facts: &GraphFacts, v: ValueId) -> Option<DataType> {
    facts
        .get(v)
        .map(|f| f.ty.dtype)
        .filter(|d| *d != DataType::Undefined)
        .or_else(|| g.value_type(v).map(|t| t.dtype))
        .filter(|d| *d != DataType::Undefined)
}

/// A scalar of `dtype` holding `value`.
fn scalar_of(dtype: DataType, value: f64) -> Option<Tensor> {
    tensor_from_f64(dtype, vec![], &[value])
}

/// Clip-6: `min`/`max` attributes (defaults ∓ float max) → inputs 1 and 2.
fn clip_11(g: &mut Graph, id: NodeId, span: Span, facts: &GraphFacts) -> Result<bool, Refusal> {
    let n = g.node(id);
    let lo = n.attr_float("min").ok().flatten();
    let hi = n.attr_float("max").ok().flatten();
    if lo.is_none() && hi.is_none() {
        return Ok(false);
    }
    let x = input(g, id, 0).ok_or_else(|| refuse(g, id, span, "has no input"))?;
    let dtype = dtype_of(g, facts, x)
        .ok_or_else(|| refuse(g, id, span, "has an input of unknown type"))?;
    let base = label(g, id);
    for (slot, v, name) in [(1, lo, "min"), (2, hi, "max")] {
        if let Some(v) = v {
            let t = scalar_of(dtype, v as f64)
                .ok_or_else(|| refuse(g, id, span, &format!("clips {dtype:?} data")))?;
            let init = g.add_initializer(&format!("{base}_{name}"), t);
            g.set_input(id, slot, Some(init));
        }
    }
    let n = g.node_mut(id);
    n.remove_attr("min");
    n.remove_attr("max");
    Ok(true)
}

/// Pad-2: `pads` and `value` attributes → inputs 1 and 2.
fn pad_11(g: &mut Graph, id: NodeId, span: Span, facts: &GraphFacts) -> Result<bool, Refusal> {
    let n = g.node(id);
    let Some(pads) = n.attr_ints("pads").ok().flatten().map(|p| p.to_vec()) else {
        return Ok(false);
    };
    let value = n.attr_float_or("value", 0.0).unwrap_or(0.0);
    let base = label(g, id);
    let p = g.add_initializer(&format!("{base}_pads"), Tensor::from_i64(vec![pads.len() as i64], &pads));
    g.set_input(id, 1, Some(p));
    if value != 0.0 {
        let x = input(g, id, 0).ok_or_else(|| refuse(g, id, span, "has no input"))?;
        let dtype = dtype_of(g, facts, x)
            .ok_or_else(|| refuse(g, id, span, "has an input of unknown type"))?;
        let t = scalar_of(dtype, value as f64)
            .ok_or_else(|| refuse(g, id, span, &format!("pads {dtype:?} data with a value")))?;
        let c = g.add_initializer(&format!("{base}_value"), t);
        g.set_input(id, 2, Some(c));
    }
    let n = g.node_mut(id);
    n.remove_attr("pads");
    n.remove_attr("value");
    Ok(true)
}

/// Softmax family before 13: over the dims from `axis` (default 1) on,
/// flattened. Same as the opset-13 op along the last axis when `axis` is
/// the last; otherwise flattened explicitly.
fn softmax_13(g: &mut Graph, id: NodeId, span: Span, facts: &GraphFacts) -> Result<(), Refusal> {
    let axis = g
        .node(id)
        .attr_int_or("axis", 1)
        .map_err(|e| refuse(g, id, span, &e.to_string()))?;
    let x = input(g, id, 0).ok_or_else(|| refuse(g, id, span, "has no input"))?;
    let rank = facts
        .get(x)
        .and_then(|f| f.shape().map(|s| s.len()))
        .or_else(|| g.value_type(x).and_then(|t| t.shape).map(|s| s.len()));
    if let Some(r) = rank {
        let r = r as i64;
        let norm = if axis < 0 { axis + r } else { axis };
        if norm == r - 1 {
            g.node_mut(id).set_attr(Attribute::int("axis", -1));
            return Ok(());
        }
    }
    // Reshape(op(Flatten(x, axis), axis=-1), Shape(x)).
    let out = output(g, id, 0).ok_or_else(|| refuse(g, id, span, "has no output"))?;
    let name = g.node(id).name.clone();
    let mut p = infopt_ir::Patch::new();
    let mut flatten = Node::new("Flatten");
    flatten.name = name.as_ref().map(|n| format!("{n}/flatten"));
    flatten.set_attr(Attribute::int("axis", axis));
    let f = p.add_node(flatten, vec![Some(PatchValue::Existing(x))], vec![String::new()]);
    let mut op = g.node(id).clone();
    op.inputs.clear();
    op.outputs.clear();
    op.set_attr(Attribute::int("axis", -1));
    let s = p.add_node(
        op,
        vec![Some(PatchValue::NewNode { node: f, output: 0 })],
        vec![String::new()],
    );
    let mut shape = Node::new("Shape");
    shape.name = name.as_ref().map(|n| format!("{n}/shape"));
    let sh = p.add_node(shape, vec![Some(PatchValue::Existing(x))], vec![String::new()]);
    let mut reshape = Node::new("Reshape");
    reshape.name = name.as_ref().map(|n| format!("{n}/reshape"));
    let r = p.add_node(
        reshape,
        vec![
            Some(PatchValue::NewNode { node: s, output: 0 }),
            Some(PatchValue::NewNode { node: sh, output: 0 }),
        ],
        vec![String::new()],
    );
    let new = PatchValue::NewNode { node: r, output: 0 };
    p.replace(out, new);
    crate::util::carry_type(&mut p, g, out, new);
    p.remove_node(id);
    g.apply(p).map_err(|e| refuse(g, id, span, &e.to_string()))
}

/// BatchNormalization: `spatial` (removed at 9) and the training outputs
/// (saved mean/var removed at 14; running mean/var only in training mode).
fn batch_norm(g: &mut Graph, id: NodeId, span: Span) -> Result<bool, Refusal> {
    let mut changed = false;
    if span.crosses(9) && g.node(id).attr("spatial").is_some() {
        if g.node(id).attr_int_or("spatial", 1).unwrap_or(1) != 1 {
            return Err(refuse(g, id, span, "has spatial=0, which opset 9 removed"));
        }
        g.node_mut(id).remove_attr("spatial");
        changed = true;
    }
    if g.node(id).attr("is_test").is_some() {
        g.node_mut(id).remove_attr("is_test");
        changed = true;
    }
    if span.crosses(14) {
        let extra: Vec<ValueId> = g.node(id).outputs.iter().skip(1).flatten().copied().collect();
        for v in &extra {
            if g.reader_count(*v) > 0 || g.is_graph_output(*v) {
                return Err(refuse(
                    g,
                    id,
                    span,
                    "has training outputs that are read; opset 14 computes them only in training mode",
                ));
            }
        }
        if !extra.is_empty() {
            g.node_mut(id).outputs.truncate(1);
            for v in extra {
                g.value_mut(v).producer = None;
                g.remove_value(v);
            }
            changed = true;
        }
    }
    Ok(changed)
}

/// An empty float tensor (Resize-11's `roi` when unused).
fn empty_roi() -> Tensor {
    Tensor::from_f32(vec![0], &[])
}

/// The Resize-11 attributes equivalent to Upsample/Resize-10's sampling.
fn set_asymmetric(n: &mut Node, mode: &str) {
    n.set_attr(Attribute::string("coordinate_transformation_mode", "asymmetric"));
    if mode == "nearest" {
        n.set_attr(Attribute::string("nearest_mode", "floor"));
    }
}

/// Resize-10 `(X, scales)` → Resize-11 `(X, roi, scales)`.
fn resize_10_11(g: &mut Graph, id: NodeId, span: Span) -> Result<(), Refusal> {
    let scales = input(g, id, 1).ok_or_else(|| refuse(g, id, span, "has no scales"))?;
    let mode = g.node(id).attr_string("mode").ok().flatten().unwrap_or_else(|| "nearest".into());
    let roi = g.add_initializer(&format!("{}_roi", label(g, id)), empty_roi());
    g.set_input(id, 1, Some(roi));
    g.set_input(id, 2, Some(scales));
    set_asymmetric(g.node_mut(id), &mode);
    Ok(())
}

/// Upsample-7 (scales attribute) / Upsample-9,10 (scales input) → Resize-11.
fn upsample_to_resize(g: &mut Graph, id: NodeId, span: Span) -> Result<(), Refusal> {
    let mode = g.node(id).attr_string("mode").ok().flatten().unwrap_or_else(|| "nearest".into());
    let mode = match mode.as_str() {
        "nearest" => "nearest",
        "linear" | "bilinear" => "linear",
        m => return Err(refuse(g, id, span, &format!("has mode '{m}'"))),
    };
    let scales = match input(g, id, 1) {
        Some(s) => s,
        None => {
            let s = g
                .node(id)
                .attr_floats("scales")
                .ok()
                .flatten()
                .map(|s| s.to_vec())
                .ok_or_else(|| refuse(g, id, span, "has no scales"))?;
            g.add_initializer(
                &format!("{}_scales", label(g, id)),
                Tensor::from_f32(vec![s.len() as i64], &s),
            )
        }
    };
    if span.to < 11 {
        return Err(refuse(g, id, span, "is deprecated; raise the opset to 11 or later to turn it into Resize"));
    }
    let roi = g.add_initializer(&format!("{}_roi", label(g, id)), empty_roi());
    let n = g.node_mut(id);
    n.op_type = "Resize".into();
    n.remove_attr("scales");
    n.set_attr(Attribute::string("mode", mode));
    set_asymmetric(n, mode);
    g.set_input(id, 1, Some(roi));
    g.set_input(id, 2, Some(scales));
    Ok(())
}

/// GroupNormalization-18's scale and bias have one entry per group;
/// GroupNormalization-21's one per channel: repeat each C/G times.
fn group_norm_21(g: &mut Graph, id: NodeId, span: Span, facts: &GraphFacts) -> Result<(), Refusal> {
    let groups = g
        .node(id)
        .attr_int("num_groups")
        .ok()
        .flatten()
        .filter(|&n| n > 0)
        .ok_or_else(|| refuse(g, id, span, "has no num_groups"))?;
    let x = input(g, id, 0).ok_or_else(|| refuse(g, id, span, "has no input"))?;
    let dims = facts
        .get(x)
        .and_then(|f| f.shape().map(|s| s.to_vec()))
        .or_else(|| g.value_type(x).and_then(|t| t.shape));
    let channels = match dims.as_deref().and_then(|d| d.get(1)) {
        Some(Dim::Known(c))
            if *c > 0 && c % groups == 0 && *c <= crate::pattern::MAX_NORM_ELEMS =>
        {
            *c
        }
        _ => return Err(refuse(g, id, span, "has an input whose channel count is not known")),
    };
    let per = (channels / groups) as usize;
    for slot in [1usize, 2] {
        let v = input(g, id, slot).ok_or_else(|| refuse(g, id, span, "lacks scale or bias"))?;
        let t = g
            .constant(v)
            .ok_or_else(|| refuse(g, id, span, "has a scale or bias that is not a constant"))?;
        let vals = t
            .to_f64_vec()
            .map_err(|e| refuse(g, id, span, &e.to_string()))?;
        if vals.len() as i64 != groups {
            return Err(refuse(g, id, span, "has a scale or bias not of one entry per group"));
        }
        let wide: Vec<f64> = vals.iter().flat_map(|&v| std::iter::repeat_n(v, per)).collect();
        let t = tensor_from_f64(t.dtype(), vec![channels], &wide)
            .ok_or_else(|| refuse(g, id, span, "has weights of an unsupported type"))?;
        let name = format!("{}_{}", label(g, id), if slot == 1 { "scale" } else { "bias" });
        let nv = g.add_initializer(&name, t);
        g.set_input(id, slot, Some(nv));
    }
    Ok(())
}


impl Pass for UpgradeOpset {
    fn name(&self) -> &'static str {
        "upgrade-opset"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let from = model.opset("").unwrap_or(1);
        let n = upgrade(model, self.to).map_err(PassError::Model)?;
        if from > self.to {
            cx.note(format!(
                "upgrade-opset: the model already imports opset {from} (newer than {}); left as is",
                self.to
            ));
        }
        if n > 0 {
            // Later passes read the opset from the context.
            cx.opset = self.to;
            cx.note(format!("opset raised to {}", self.to));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod remedy_tests {
    use super::{remedy, remedy_opset};

    #[test]
    fn a_decline_reason_gives_back_the_opset_its_remedy_asks_for() {
        let reason = format!("GELU needs opset 20 for Gelu (model has 13); {}", remedy(20));
        assert_eq!(remedy_opset(&reason), Some(20));
        assert_eq!(remedy_opset("no range for input x"), None);
        assert_eq!(remedy_opset("an upgrade-opset step to x raises it"), None);
    }
}
