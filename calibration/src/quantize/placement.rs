//! Where the Q/DQ pairs go, per target.
//!
//! The plan is computed on the unchanged graph and then applied as one
//! patch: a list of activations to quantize (with the node inputs that read
//! the dequantized copy), of weights (with their channel axis) and, for ONNX
//! Runtime, of biases to store as INT32.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use infopt_ir::{DataType, Graph, NodeId, Slot, Use, ValueId};
use infopt_passes::util::clip_bounds;
use infopt_passes::{PrecisionMap, Target};

use super::qdq::ActParams;
use crate::Amax;

/// Which nodes stay float by the user's choice.
#[derive(Debug)]
pub enum Matcher {
    Name(String),
    Op(String),
    Regex(regex_lite::Regex),
    /// The nodes the precision map (`--precision NAME_OR_OP=fp32`, the
    /// pipeline's `precision:` section) puts in a float type: matched as
    /// `convert-float16` matches them (first override wins).
    Precision(PrecisionMap),
}

impl Matcher {
    pub fn matches(&self, g: &Graph, id: NodeId) -> bool {
        let n = g.node(id);
        match self {
            Matcher::Name(s) => n.name.as_deref() == Some(s.as_str()),
            Matcher::Op(s) => n.op_type == *s,
            Matcher::Regex(r) => r.is_match(n.name.as_deref().unwrap_or("")),
            Matcher::Precision(map) => map.kept_float(n).is_some(),
        }
    }

    /// Why node `id` (which this matches) stays float, for the report.
    fn describe(&self, g: &Graph, id: NodeId) -> String {
        match self {
            Matcher::Name(s) => format!("excluded by name '{s}'"),
            Matcher::Op(s) => format!("excluded by op {s}"),
            Matcher::Regex(r) => format!("excluded by regex '{}'", r.as_str()),
            Matcher::Precision(map) => match map.kept_float(g.node(id)) {
                Some(o) => format!(
                    "{KEPT_BY_USER}: the override for {} says {}",
                    o.selector, o.to
                ),
                None => KEPT_BY_USER.to_string(),
            },
        }
    }
}

/// How the report marks a layer the user's precision map keeps float (the
/// INT8 search's own are "excluded by name").
pub const KEPT_BY_USER: &str = "kept float by the user's precision map";

pub struct Settings {
    pub target: Target,
    pub exclude: Vec<Matcher>,
    pub keep_first_last: bool,
    /// Activation integer type on ONNX Runtime (INT8 elsewhere).
    pub ort_activation: DataType,
    /// ONNX Runtime: depthwise convolutions stay float.
    pub ort_float_depthwise: bool,
    /// ONNX Runtime: SiLU's Sigmoid and Mul and LeakyRelu stay float
    /// between quantized layers (see `float_elementwise_op`).
    pub ort_float_elementwise: bool,
}

/// One activation to quantize.
#[derive(Debug, Clone)]
pub struct ActQ {
    pub params: ActParams,
    pub uses: BTreeSet<(NodeId, u32)>,
}

#[derive(Debug, Clone)]
pub struct WeightQ {
    pub axis: usize,
    pub uses: BTreeSet<(NodeId, u32)>,
}

/// A bias read as INT32 (`scale = s_x * s_w`) by a quantized layer.
#[derive(Debug, Clone)]
pub struct BiasQ {
    pub bias: ValueId,
    pub layer: NodeId,
    pub slot: u32,
    pub act: ValueId,
    pub weight: ValueId,
}

#[derive(Debug, Default)]
pub struct Plan {
    pub acts: BTreeMap<ValueId, ActQ>,
    pub weights: BTreeMap<ValueId, WeightQ>,
    pub biases: Vec<BiasQ>,
    /// Weighted layers that read quantized inputs.
    pub layers: Vec<NodeId>,
    /// (node label, reason) of layers and ops left in float.
    pub skipped: Vec<(String, String)>,
}

impl Plan {
    pub fn per_channel(&self) -> bool {
        !self.weights.is_empty()
    }

    fn add_act(&mut self, t: ValueId, params: ActParams, user: NodeId, slot: u32) {
        self.acts
            .entry(t)
            .or_insert_with(|| ActQ {
                params,
                uses: BTreeSet::new(),
            })
            .uses
            .insert((user, slot));
    }
}

pub fn uses_of(q: &BTreeSet<(NodeId, u32)>) -> Vec<Use> {
    q.iter()
        .map(|&(node, slot)| Use {
            node,
            slot: Slot::Input(slot),
        })
        .collect()
}

/// A weighted layer: activation input slots, its constant weight and bias.
#[derive(Debug, Clone)]
struct Layer {
    node: NodeId,
    acts: Vec<u32>,
    weight: Option<(u32, ValueId, usize)>,
    bias: Option<(u32, ValueId)>,
}

fn label(g: &Graph, id: NodeId) -> String {
    let n = g.node(id);
    match &n.name {
        Some(name) if !name.is_empty() => format!("{} '{name}'", n.op_type),
        _ => n.op_type.clone(),
    }
}

fn input(g: &Graph, id: NodeId, slot: usize) -> Option<ValueId> {
    g.node(id).inputs.get(slot).copied().flatten()
}

fn float_const(g: &Graph, v: ValueId) -> bool {
    g.constant(v).is_some_and(|t| t.dtype() == DataType::Float)
}

/// The ops INT8 quantizes as layers (weights and activation inputs).
pub const WEIGHTED_OPS: &[&str] = &["Conv", "ConvTranspose", "Gemm", "MatMul"];

/// Whether `op` is one of [`WEIGHTED_OPS`].
pub fn is_weighted_op(op: &str) -> bool {
    WEIGHTED_OPS.contains(&op)
}

/// `Ok(None)`: not a weighted layer; `Err`: a weighted layer that cannot be
/// quantized, with the reason.
fn weighted_layer(g: &Graph, id: NodeId) -> Result<Option<Layer>, String> {
    let n = g.node(id);
    if !n.domain().is_empty() || n.has_subgraphs() {
        return Ok(None);
    }
    let op = n.op_type.as_str();
    if !is_weighted_op(op) {
        return Ok(None);
    }
    let Some(x) = input(g, id, 0) else {
        return Err("no input".into());
    };
    let Some(w) = input(g, id, 1) else {
        return Err("no weight input".into());
    };
    if g.constant(x).is_some() {
        return Err("its first input is a constant".into());
    }
    if let Some(out) = n.outputs.first().copied().flatten()
        && let Some((bn, _)) = g
            .input_uses(out)
            .find(|&(r, _)| g.node(r).op_type == "BatchNormalization")
    {
        return Err(format!(
            "BatchNormalization '{}' reads its output: run fuse-conv-bn before quantize-int8 (the quantized weights must be the folded ones)",
            g.node(bn).name_or_op()
        ));
    }
    let bias = input(g, id, 2)
        .filter(|&b| float_const(g, b))
        .map(|b| (2u32, b));
    if g.constant(w).is_none() {
        return match op {
            // Two activations (attention scores, batched products): both per tensor.
            "MatMul" | "Gemm" => Ok(Some(Layer {
                node: id,
                acts: vec![0, 1],
                weight: None,
                bias: None,
            })),
            _ => Err(format!("weight '{}' is not a constant", g.value(w).name)),
        };
    }
    if !float_const(g, w) {
        return Err(format!("weight '{}' is not float32", g.value(w).name));
    }
    let rank = g.constant(w).map(|t| t.dims().len()).unwrap_or(0);
    let axis = match op {
        "Conv" => 0,
        // [C_in, C_out/group, k...]: output channels along axis 1.
        "ConvTranspose" => 1,
        "Gemm" => {
            if rank != 2 {
                return Err(format!("Gemm weight of rank {rank}"));
            }
            // B is [K, N] (or [N, K] with transB): per output column N.
            if n.attr_int_or("transB", 0).unwrap_or(0) != 0 {
                0
            } else {
                1
            }
        }
        _ => {
            if rank < 2 {
                return Err(format!("MatMul weight of rank {rank}"));
            }
            // [.., K, N]: per output column.
            rank - 1
        }
    };
    if matches!(op, "Conv" | "ConvTranspose") && rank < 3 {
        return Err(format!("{op} weight of rank {rank}"));
    }
    Ok(Some(Layer {
        node: id,
        acts: vec![0],
        weight: Some((1, w, axis)),
        bias,
    }))
}

/// The usable range of a float activation (a range table may also name
/// integer tensors, which are never quantized).
fn range_of(g: &Graph, amax: &Amax, v: ValueId) -> Option<f32> {
    if g.constant(v).is_some() || g.value_type(v).is_some_and(|t| t.dtype != DataType::Float) {
        return None;
    }
    amax.get(&g.value(v).name)
        .filter(|a| a.is_finite() && *a > 0.0)
}

fn excluded_by<'a>(s: &'a Settings, g: &Graph, id: NodeId) -> Option<&'a Matcher> {
    s.exclude.iter().find(|m| m.matches(g, id))
}

/// Ops that always stay float: their accuracy collapses in INT8 and no
/// runtime fuses them with Q/DQ.
pub const FLOAT_OPS: &[&str] = &[
    "Softmax",
    "LogSoftmax",
    "LayerNormalization",
    "GroupNormalization",
    "InstanceNormalization",
    "BatchNormalization",
    "Erf",
    "Gelu",
    "Exp",
    "Log",
    "Pow",
    "Sqrt",
    "ReduceMean",
    "Div",
];

pub fn plan(g: &Graph, amax: &Amax, s: &Settings) -> Result<Plan, String> {
    let order = g
        .topological_order()
        .map_err(|e| format!("graph is not a DAG: {e}"))?;
    let mut plan = Plan::default();
    // Candidate layers, in order.
    let mut layers = Vec::new();
    for &id in &order {
        match weighted_layer(g, id) {
            Ok(None) => {}
            Ok(Some(l)) => {
                if let Some(m) = excluded_by(s, g, id) {
                    plan.skipped.push((label(g, id), m.describe(g, id)));
                    continue;
                }
                layers.push(l);
            }
            Err(reason) => plan.skipped.push((label(g, id), reason)),
        }
    }
    if s.keep_first_last && !layers.is_empty() {
        let last = layers.len() - 1;
        for i in [last, 0] {
            if i < layers.len() {
                let l = layers.remove(i);
                plan.skipped.push((
                    label(g, l.node),
                    "keep_first_last: first/last weighted layer stays float".into(),
                ));
            }
        }
    }
    match s.target {
        Target::Onnxruntime => plan_ort(g, amax, s, &order, layers, &mut plan),
        Target::Tensorrt | Target::Portable => plan_trt(g, amax, s, &order, layers, &mut plan),
    }
    Ok(plan)
}

/// Layers whose activation inputs all have a range; the others are skipped.
fn with_ranges(g: &Graph, amax: &Amax, layers: Vec<Layer>, plan: &mut Plan) -> Vec<Layer> {
    layers
        .into_iter()
        .filter(|l| {
            let missing = l
                .acts
                .iter()
                .filter_map(|&s| input(g, l.node, s as usize))
                .find(|&v| range_of(g, amax, v).is_none());
            if let Some(v) = missing {
                plan.skipped.push((
                    label(g, l.node),
                    format!(
                        "no range for input '{}' (not in the ranges, or amax 0)",
                        g.value(v).name
                    ),
                ));
                return false;
            }
            true
        })
        .collect()
}

/// A Concat whose inputs' ranges (amax) are further apart than this is not
/// quantized: its inputs would share the largest range, and a detector's
/// scores (0..1) concatenated with its boxes (0..320) would all round to
/// 0 (ORT's `quantize_static` kept none of nudenet's detections so).
pub const CONCAT_SPREAD: f32 = 16.0;

/// TensorRT's explicit-quantization placement: Q/DQ on the inputs of weighted
/// layers (weights per output channel), on the residual branch of an Add fed
/// by a quantized layer (so the layer fuses the Add), on pooling inputs and on
/// Concat inputs (one shared scale, so the Concat runs in INT8). Outputs of
/// weighted layers are not quantized: TensorRT fuses the following
/// activation / Add into the layer and quantizes where the next layer reads.
fn plan_trt(
    g: &Graph,
    amax: &Amax,
    s: &Settings,
    order: &[NodeId],
    layers: Vec<Layer>,
    plan: &mut Plan,
) {
    let layers = with_ranges(g, amax, layers, plan);
    // Concat inputs share the largest of their ranges.
    let mut shared: BTreeMap<ValueId, f32> = BTreeMap::new();
    let mut concats = Vec::new();
    for &id in order {
        let n = g.node(id);
        if n.op_type != "Concat" || !n.domain().is_empty() || excluded_by(s, g, id).is_some() {
            continue;
        }
        let ins: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
        // A Concat of integers (shape arithmetic: `[batch, -1]` built from
        // Shape/Gather) is no candidate at all, and no decline to report.
        if ins.iter().any(|&v| {
            g.value_type(v)
                .is_some_and(|t| !t.dtype.is_float() && t.dtype != DataType::Undefined)
        }) {
            continue;
        }
        let ranges: Option<Vec<f32>> = ins
            .iter()
            .map(|&v| {
                if g.constant(v).is_some()
                    || g.value_type(v).is_some_and(|t| t.dtype != DataType::Float)
                {
                    None
                } else {
                    range_of(g, amax, v)
                }
            })
            .collect();
        let Some(ranges) = ranges else {
            plan.skipped.push((
                label(g, id),
                "an input is constant, not float, or has no range".into(),
            ));
            continue;
        };
        let m = ranges.iter().copied().fold(0f32, f32::max);
        let lo = ranges.iter().copied().fold(f32::INFINITY, f32::min);
        if m > CONCAT_SPREAD * lo {
            plan.skipped.push((
                label(g, id),
                format!(
                    "its inputs' ranges are {} apart (amax {lo:.3e} to {m:.3e}): one shared scale would leave the smaller ones a few INT8 steps",
                    if lo > 0.0 {
                        format!("{:.0}x", m / lo)
                    } else {
                        "infinitely".to_string()
                    }
                ),
            ));
            continue;
        }
        for &v in &ins {
            let e = shared.entry(v).or_insert(m);
            *e = e.max(m);
        }
        concats.push(id);
    }
    let params = |v: ValueId| -> Option<ActParams> {
        shared
            .get(&v)
            .copied()
            .or_else(|| range_of(g, amax, v))
            .map(ActParams::symmetric)
    };
    let quantized: HashSet<NodeId> = layers.iter().map(|l| l.node).collect();
    for l in &layers {
        for &slot in &l.acts {
            if let Some(v) = input(g, l.node, slot as usize)
                && let Some(p) = params(v)
            {
                plan.add_act(v, p, l.node, slot);
            }
        }
        if let Some((slot, w, axis)) = l.weight {
            plan.weights
                .entry(w)
                .or_insert_with(|| WeightQ {
                    axis,
                    uses: BTreeSet::new(),
                })
                .uses
                .insert((l.node, slot));
        }
        plan.layers.push(l.node);
    }
    for &id in &concats {
        for (slot, v) in g.node(id).inputs.iter().enumerate() {
            if let Some(v) = *v
                && let Some(p) = params(v)
            {
                plan.add_act(v, p, id, slot as u32);
            }
        }
    }
    for &id in order {
        let n = g.node(id);
        if !n.domain().is_empty() || excluded_by(s, g, id).is_some() {
            continue;
        }
        match n.op_type.as_str() {
            "Add" => {
                let (Some(a), Some(b)) = (input(g, id, 0), input(g, id, 1)) else {
                    continue;
                };
                if g.constant(a).is_some() || g.constant(b).is_some() {
                    continue;
                }
                let from_layer = |v: ValueId| {
                    g.value(v)
                        .producer
                        .is_some_and(|(p, _)| quantized.contains(&p))
                };
                // The branch that does not come from a layer; with two
                // layer outputs, the second: the first layer fuses the Add
                // and reads the other, quantized, as its residual.
                let slot = match (from_layer(a), from_layer(b)) {
                    (true, _) => 1,
                    (false, true) => 0,
                    (false, false) => continue,
                };
                let v = if slot == 1 { b } else { a };
                match params(v) {
                    Some(p) => plan.add_act(v, p, id, slot),
                    None => plan.skipped.push((
                        label(g, id),
                        format!("no range for residual input '{}'", g.value(v).name),
                    )),
                }
            }
            "MaxPool" | "AveragePool" | "GlobalAveragePool" | "GlobalMaxPool" => {
                if let Some(v) = input(g, id, 0)
                    && let Some(p) = params(v)
                {
                    plan.add_act(v, p, id, 0);
                }
            }
            _ => {}
        }
    }
}

/// True when `v` cannot be negative: a Relu output, a Clip's with a
/// lower bound of at least 0 (ReLU6), or a pooling / reshaping of such a
/// value.
fn non_negative(g: &Graph, v: ValueId) -> bool {
    let Some((p, _)) = g.value(v).producer else {
        return false;
    };
    let n = g.node(p);
    if !n.domain().is_empty() {
        return false;
    }
    match n.op_type.as_str() {
        "Relu" | "Clip" => absorbed_by_q(g, p),
        "MaxPool" | "AveragePool" | "GlobalAveragePool" | "GlobalMaxPool" | "Flatten"
        | "Reshape" | "Transpose" | "Squeeze" | "Unsqueeze" => {
            input(g, p, 0).is_some_and(|x| non_negative(g, x))
        }
        _ => false,
    }
}

/// An activation that ONNX Runtime drops in front of a QuantizeLinear whose
/// range it covers: a Relu, or a Clip with a lower bound of at least 0 (a
/// ReLU6, as torch, Keras and TFLite export it) once the Q's range is the
/// Clip output's, within its bounds.
fn absorbed_by_q(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    n.domain().is_empty()
        && match n.op_type.as_str() {
            "Relu" => true,
            "Clip" => clip_bounds(g, id).is_ok_and(|(lo, _)| lo >= 0.0),
            _ => false,
        }
}

fn is_depthwise(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    let group = n.attr_int_or("group", 1).unwrap_or(1);
    group > 1
        && input(g, id, 1)
            .and_then(|w| g.constant(w))
            .is_some_and(|w| w.dims().get(1) == Some(&1))
}

/// ONNX Runtime's CPU placement: the Q/DQ groups its QDQ transformer turns
/// into integer kernels. A Conv becomes QLinearConv only when every input
/// (bias included, as INT32) is a DQ and its output goes to a Q, so layer
/// outputs are quantized too (after a following Relu or ReLU6 Clip, with
/// the lowest zero point so ORT drops it); Add, Concat and pooling between quantized
/// tensors become QLinearAdd / QLinearMul / QLinearConcat /
/// QLinearGlobalAveragePool / QLinearSigmoid / QLinearLeakyRelu, and
/// MaxPool / reshapes keep their input's parameters so ORT drops their Q/DQ.
fn plan_ort(
    g: &Graph,
    amax: &Amax,
    s: &Settings,
    order: &[NodeId],
    layers: Vec<Layer>,
    plan: &mut Plan,
) {
    let ort = Ort { g, amax, s };
    let mut layers = with_ranges(g, amax, layers, plan);
    if s.ort_float_depthwise {
        layers.retain(|l| {
            let dw = g.node(l.node).op_type == "Conv" && is_depthwise(g, l.node);
            if dw {
                plan.skipped.push((
                    label(g, l.node),
                    "depthwise Conv kept float (float_depthwise: true)".into(),
                ));
            }
            !dw
        });
    }
    // Quantized tensors whose every reader reads the DQ (layer outputs).
    let mut all_readers: BTreeMap<ValueId, ActParams> = BTreeMap::new();
    for l in layers {
        let op = g.node(l.node).op_type.clone();
        let out = ort.quantized_output(l.node);
        if out.is_none() && matches!(op.as_str(), "Conv" | "ConvTranspose") {
            plan.skipped.push((
                label(g, l.node),
                "output is a graph output or has no range (ONNX Runtime runs a Conv in INT8 only with a quantized output)".into(),
            ));
            continue;
        }
        for &slot in &l.acts {
            if let Some(v) = input(g, l.node, slot as usize)
                && let Some(a) = range_of(g, amax, v)
            {
                plan.add_act(v, ort.params_for(v, a), l.node, slot);
            }
        }
        if let Some((slot, w, axis)) = l.weight {
            plan.weights
                .entry(w)
                .or_insert_with(|| WeightQ {
                    axis,
                    uses: BTreeSet::new(),
                })
                .uses
                .insert((l.node, slot));
            if let (Some((bslot, b)), Some(x)) = (l.bias, input(g, l.node, 0))
                && g.constant(b).map(|t| t.dims().len()) == Some(1)
            {
                plan.biases.push(BiasQ {
                    bias: b,
                    layer: l.node,
                    slot: bslot,
                    act: x,
                    weight: w,
                });
            }
        }
        if let Some(o) = out
            && let Some(a) = range_of(g, amax, o)
        {
            all_readers.insert(o, ort.params_for(o, a));
        }
        plan.layers.push(l.node);
    }
    // Integer ops between quantized tensors; then the float tensors whose
    // quantizing turns every reader integer, and the ops after them again.
    // A few rounds: each source can only open chains further down.
    for _ in 0..4 {
        ort.propagate(order, plan, &mut all_readers);
        let sources = ort.integer_sources(order, plan, &all_readers);
        if sources.is_empty() {
            break;
        }
        all_readers.extend(sources);
    }
    for (v, p) in all_readers {
        for (node, slot) in g.input_uses(v) {
            plan.add_act(v, p, node, slot);
        }
        // A pass-through output keeps its input's parameters even where a
        // layer also reads it, so ORT can drop the pair around the op.
        if let Some(a) = plan.acts.get_mut(&v) {
            a.params = p;
        }
    }
}

/// The graph, ranges and settings ONNX Runtime's placement reads.
struct Ort<'a> {
    g: &'a Graph,
    amax: &'a Amax,
    s: &'a Settings,
}

impl Ort<'_> {
    fn params_for(&self, v: ValueId, a: f32) -> ActParams {
        let dtype = self.s.ort_activation;
        if non_negative(self.g, v) {
            ActParams::non_negative(a, dtype)
        } else {
            ActParams::symmetric_in(a, dtype)
        }
    }

    /// The tensor that carries a node's quantized output: the output
    /// itself, or the output of its only reader when that is a Relu or a
    /// ReLU6 Clip. Quantizing a Conv's output in front of a ReLU6 spent the
    /// INT8 steps on the negative side and beyond 6 (MediaPipe's hand
    /// landmarks: [-28, 35] where 0..6 was kept; 20 dB after the first
    /// layer).
    fn quantized_output(&self, id: NodeId) -> Option<ValueId> {
        let (g, amax, s) = (self.g, self.amax, self.s);
        let out = g.node(id).outputs.first().copied().flatten()?;
        if g.is_graph_output(out) {
            return None;
        }
        let readers: Vec<(NodeId, u32)> = g.input_uses(out).collect();
        if readers.len() == 1 {
            let (r, _) = readers[0];
            let rn = g.node(r);
            if absorbed_by_q(g, r) && excluded_by(s, g, r).is_none() {
                let ro = rn.outputs.first().copied().flatten()?;
                if !g.is_graph_output(ro) && range_of(g, amax, ro).is_some() {
                    return Some(ro);
                }
            }
        }
        if readers.is_empty() || range_of(g, amax, out).is_none() {
            return None;
        }
        Some(out)
    }

    /// The data inputs (slot, tensor) by which `id` runs as an integer op
    /// between quantized tensors; None for ops that never do (or that the
    /// settings keep float).
    fn integer_op_inputs(&self, id: NodeId) -> Option<Vec<(u32, ValueId)>> {
        let (g, s) = (self.g, self.s);
        let n = g.node(id);
        if !n.domain().is_empty() || n.has_subgraphs() || excluded_by(s, g, id).is_some() {
            return None;
        }
        let ins = n
            .inputs
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i as u32, v)));
        let op = n.op_type.as_str();
        // With `ort_float_elementwise`, the SiLU / squeeze-excite ops run in
        // float: each then costs a DQ before it and a Q after it, and on a
        // model whose chains the search broke (layers kept float) those
        // pairs can cost more than the integer kernels save.
        let elementwise = matches!(op, "Sigmoid" | "LeakyRelu" | "Mul");
        if elementwise && s.ort_float_elementwise {
            return None;
        }
        let slots: Vec<(u32, ValueId)> = match op {
            "MaxPool" | "Flatten" | "Reshape" | "Transpose" | "Squeeze" | "Unsqueeze"
            | "GlobalAveragePool" | "AveragePool" | "Sigmoid" | "LeakyRelu" => {
                ins.take(1).collect()
            }
            // Run as a GlobalAveragePool (see `is_spatial_mean`).
            "ReduceMean" if is_spatial_mean(g, id) => ins.take(1).collect(),
            "Add" | "Mul" | "Concat" => ins.collect(),
            _ => return None,
        };
        (!slots.is_empty()).then_some(slots)
    }

    /// Turns every op whose data inputs are all quantized into an integer
    /// op (its output quantized), in order so chains propagate.
    fn propagate(
        &self,
        order: &[NodeId],
        plan: &mut Plan,
        all_readers: &mut BTreeMap<ValueId, ActParams>,
    ) {
        let g = self.g;
        for &id in order {
            let Some(data_slots) = self.integer_op_inputs(id) else {
                continue;
            };
            if !data_slots
                .iter()
                .all(|&(_, v)| is_quantized(plan, all_readers, v))
            {
                continue;
            }
            let Some(out) = self.quantized_output(id) else {
                continue;
            };
            if all_readers.contains_key(&out) {
                continue;
            }
            let n = g.node(id);
            let same_params = matches!(
                n.op_type.as_str(),
                "MaxPool" | "Flatten" | "Reshape" | "Transpose" | "Squeeze" | "Unsqueeze"
            ) && out == n.outputs[0].unwrap_or(out);
            let p = if same_params {
                match quantized_params(plan, all_readers, data_slots[0].1) {
                    Some(p) => p,
                    None => continue,
                }
            } else {
                let Some(a) = range_of(g, self.amax, out) else {
                    continue;
                };
                self.params_for(out, a)
            };
            for &(slot, v) in &data_slots {
                if let Some(params) = quantized_params(plan, all_readers, v) {
                    plan.add_act(v, params, id, slot);
                }
            }
            all_readers.insert(out, p);
        }
    }

    /// Float tensors (the output of an op ONNX Runtime runs in float, such
    /// as a fused SiLU) that no quantized layer reads but a pooling op does,
    /// and whose every reader would run as an integer op if they were
    /// quantized, into a tensor that is quantized already: one Q on each
    /// lets those readers run integer and adds no other pair. Only where a
    /// pool reads it: a float pool needs the whole activation transposed out
    /// of ONNX Runtime's NHWC layout; elsewhere (PP-OCRv6 tiny rec's
    /// HardSigmoid gates into their Mul) the pair saved no time and its
    /// noise had the search keep 23 layers float, not 15. EfficientNet-B0's squeeze-excite
    /// blocks read the SiLU after the depthwise Conv with a
    /// GlobalAveragePool and a Mul; left float, both ran in float behind
    /// two Transposes each (ONNX Runtime lays QLinearConv out NHWC), and
    /// every layer in INT8 ran 1.07x float's speed; with the SiLU quantized,
    /// 1.20x.
    fn integer_sources(
        &self,
        order: &[NodeId],
        plan: &Plan,
        all_readers: &BTreeMap<ValueId, ActParams>,
    ) -> Vec<(ValueId, ActParams)> {
        let g = self.g;
        let mut out = Vec::new();
        for &id in order {
            if !self.may_source(id) {
                continue;
            }
            for v in g.node(id).outputs.iter().flatten().copied() {
                if is_quantized(plan, all_readers, v) || g.is_graph_output(v) {
                    continue;
                }
                let Some(a) = range_of(g, self.amax, v) else {
                    continue;
                };
                let readers: Vec<NodeId> = g.input_uses(v).map(|(r, _)| r).collect();
                let turns_integer = |r: NodeId| {
                    self.integer_op_inputs(r).is_some_and(|slots| {
                        slots
                            .iter()
                            .all(|&(_, x)| x == v || is_quantized(plan, all_readers, x))
                    }) && self
                        .quantized_output(r)
                        .is_some_and(|o| is_quantized(plan, all_readers, o))
                };
                if readers.iter().any(|&r| is_pooling(g, r))
                    && readers.iter().all(|&r| turns_integer(r))
                {
                    out.push((v, self.params_for(v, a)));
                }
            }
        }
        out
    }

    /// Whether node `id`'s output may get a pair of its own (see
    /// [`Ort::integer_sources`]): not a weighted layer's, nor a node the
    /// search or the user keeps float, nor an op that must stay float. A
    /// float layer between a DQ and a Q is one ONNX Runtime quantizes
    /// itself, weights included (`--precision conv2/Conv=fp32` ran as a
    /// QLinearConv), and a Softmax becomes QLinearSoftmax.
    fn may_source(&self, id: NodeId) -> bool {
        let g = self.g;
        let op = g.node(id).op_type.as_str();
        let kept =
            |n: NodeId| is_weighted_op(&g.node(n).op_type) || excluded_by(self.s, g, n).is_some();
        // A Relu or ReLU6 after a layer is the layer's output to ONNX
        // Runtime (it fuses Conv + Relu between a DQ and a Q).
        let after_layer = absorbed_by_q(g, id)
            && input(g, id, 0)
                .and_then(|x| g.value(x).producer)
                .is_some_and(|(p, _)| kept(p));
        !kept(id) && !FLOAT_OPS.contains(&op) && !after_layer
    }
}

/// Whether node `id` pools (reads a whole activation into a smaller one).
fn is_pooling(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    n.domain().is_empty()
        && (matches!(
            n.op_type.as_str(),
            "GlobalAveragePool" | "AveragePool" | "MaxPool" | "GlobalMaxPool"
        ) || is_spatial_mean(g, id))
}

/// Whether node `id` is a `ReduceMean` over every axis after the first two
/// of a float tensor of rank 4 or more, keeping them (`x.mean((2, 3),
/// keepdim=True)`, timm's squeeze-excite): a `GlobalAveragePool`, which
/// ONNX Runtime runs as a QLinearGlobalAveragePool between a DQ and a Q
/// and has no integer kernel for as a ReduceMean (see
/// [`as_global_average_pool`]). The axes are the attribute (opset < 18)
/// or a constant second input; the rank comes from the input's or the
/// output's type. Not rank 3: there `[batch, sequence, hidden]` with the
/// mean over the hidden axis is a LayerNorm's, which stays float.
fn is_spatial_mean(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    let keeps_dims = matches!(n.attr_int_or("keepdims", 1), Ok(1));
    if !(n.is("ReduceMean") && n.domain().is_empty() && keeps_dims) {
        return false;
    }
    let Some(x) = input(g, id, 0) else {
        return false;
    };
    let typed = |v: Option<ValueId>| v.and_then(|v| g.value_type(v));
    let Some(t) = typed(Some(x)).or_else(|| typed(n.outputs.first().copied().flatten())) else {
        return false;
    };
    let Some(rank) = t.shape.as_ref().map(Vec::len) else {
        return false;
    };
    if t.dtype != DataType::Float || rank < 4 {
        return false;
    }
    let axes: Vec<i64> = match input(g, id, 1) {
        Some(a) => match g.constant(a).and_then(|t| t.to_i64_vec().ok()) {
            Some(v) => v,
            None => return false,
        },
        None => match n.attr_ints("axes") {
            Ok(Some(v)) => v.to_vec(),
            _ => return false,
        },
    };
    let mut normalized: Vec<i64> = axes
        .iter()
        .map(|&a| if a < 0 { a + rank as i64 } else { a })
        .collect();
    normalized.sort_unstable();
    normalized == (2..rank as i64).collect::<Vec<_>>()
}

/// Rewrites the spatial-mean ReduceMeans that `plan` runs as integer ops
/// (their input read through a DQ, their output quantized) as the
/// `GlobalAveragePool`s they compute: ONNX Runtime then fuses
/// `DQ -> GlobalAveragePool -> Q` into a QLinearGlobalAveragePool, where a
/// ReduceMean stays float behind a DQ and (its QLinearConvs laid out NHWC)
/// a Transpose. timm-style EfficientNet-B0 on the portable target: INT8
/// 1.15x float with the ReduceMeans, 1.34x with GlobalAveragePools (ONNX
/// Runtime's own `quantize_static` 1.12x). Returns the rewritten nodes'
/// names.
pub fn as_global_average_pool(g: &mut Graph, plan: &Plan) -> Vec<String> {
    let ids: Vec<NodeId> =
        g.nodes()
            .filter(|&(id, _)| is_spatial_mean(g, id))
            .filter(|&(id, n)| {
                // Between a DQ and a Q: a float pool read through a DQ (its
                // input quantized for another reader) stays the ReduceMean,
                // which ONNX Runtime runs faster in float.
                let read_through_dq =
                    n.inputs.first().copied().flatten().is_some_and(|x| {
                        plan.acts.get(&x).is_some_and(|a| a.uses.contains(&(id, 0)))
                    });
                let quantized_out = n
                    .outputs
                    .first()
                    .copied()
                    .flatten()
                    .is_some_and(|y| plan.acts.contains_key(&y));
                read_through_dq && quantized_out
            })
            .map(|(id, _)| id)
            .collect();
    let mut names = Vec::new();
    for id in ids {
        let axes = input(g, id, 1);
        if axes.is_some() {
            g.set_input(id, 1, None);
            g.trim_inputs(id);
        }
        if let Some(a) = axes
            && g.value(a).uses.is_empty()
            && !g.is_graph_output(a)
            && g.value(a).initializer.is_some()
        {
            g.remove_value(a);
        }
        let n = g.node_mut(id);
        n.op_type = "GlobalAveragePool".to_string();
        n.attributes.clear();
        names.push(n.name_or_op().to_string());
    }
    names
}

/// Whether `v` is quantized: a layer reads it through a DQ, or every
/// reader does.
fn is_quantized(plan: &Plan, all_readers: &BTreeMap<ValueId, ActParams>, v: ValueId) -> bool {
    all_readers.contains_key(&v) || plan.acts.contains_key(&v)
}

/// The parameters `v` is quantized with, when it is.
fn quantized_params(
    plan: &Plan,
    all_readers: &BTreeMap<ValueId, ActParams>,
    v: ValueId,
) -> Option<ActParams> {
    all_readers
        .get(&v)
        .copied()
        .or_else(|| plan.acts.get(&v).map(|a| a.params))
}
