//! Converts the float32 computation of the graph to float16, keeping
//! numerically sensitive ops in float32, with Casts only at the borders.
//!
//! ## What it does
//! Chooses the nodes that run in float16 (the "islands"): ops on an
//! allow-list whose ONNX type constraints admit float16 at the model's opset
//! (elementwise and activation ops, MatMul/Gemm/Conv, LSTM/GRU/RNN, pooling,
//! data movement, LayerNormalization, Pad/Clip/Resize/Where with their typed
//! inputs), minus
//! the ops kept in float32 for numerics, minus what the pipeline's
//! `precision:` map (or `--precision NAME_OR_OP=fp32`) keeps; an override
//! `to: fp16` converts an op even when it is numerically sensitive. Then:
//! float32 initializers read by converted ops become float16 in place (a
//! float16 copy when float32 readers remain), `Constant`/`ConstantOfShape`
//! values and `Cast(to=float)` of integers/bools feeding only converted ops
//! produce float16 directly, and one Cast per value is added where a value
//! crosses an island border (shared by all its readers on the other side).
//! A float32 value that is a Cast of a float16 value is not cast back: its
//! readers get the float16 source. Cast pairs that cancel exactly
//! (float16→float32→float16) and Casts to the type a value already has are
//! removed. Shape, index and integer tensors are never touched; inputs that
//! ONNX types separately (Resize roi/scales, Pad pads, Where's condition, an
//! integer exponent of Pow) keep their type; a float exponent follows the
//! base (TensorRT wants one type for both operands). With `keep_io_types: true` (the default)
//! graph inputs and outputs stay float32 with one Cast each; with `false`
//! they are declared float16. Kept in float32 automatically, each with its
//! reason in the report: Softmax/LogSoftmax, summing reductions
//! (ReduceSum/L1/L2/SumSquare/LogSum/LogSumExp/Prod), InstanceNormalization,
//! decomposed LayerNorm/RMSNorm/softmax statistics (the reduction, the
//! squaring/exp before it and the Add(eps)/Sqrt/Reciprocal/Div after it),
//! shape arithmetic (small float tensors computing Resize scales, Range
//! bounds or integer sizes), everything off the allow-list (Range,
//! comparisons, custom domains), and LayerNormalization/BatchNormalization
//! whose statistics outputs are used. Last, an island without MatMul, Gemm, Conv,
//! ConvTranspose, Einsum, LayerNormalization or a recurrent layer that would
//! need as many Casts
//! as it has ops stays float32 as well: its Casts would cost what float16
//! saves (an override to fp16 keeps such an island).
//!
//! `contrib_ops: true` (float16 only; configs/onnxruntime-cuda-fp16.yaml)
//! converts the `com.microsoft` ops the onnxruntime target's fusions emit as
//! well: Attention (not its int32 mask), SkipLayerNormalization (unless its
//! float32 mean / inv_std_var outputs are present), BiasGelu, FastGelu, Gelu
//! and QuickGelu (a fused SiLU). ONNX Runtime's CUDA provider has float16 kernels for them; its CPU
//! provider has float32 ones only, so such a model runs (and verifies) on the
//! GPU. Without the option they stay float32 islands: on an H200 that left
//! BERT-base's `--fp16` at 1.23x FP32 (batch 16) against 1.71x with it
//! (bench/results/gpu_bench.md).
//!
//! If/Loop/Scan subgraphs (nested ones too) are converted the same way, each
//! on its own, with their inputs and outputs kept float32: the node's
//! outputs keep their types, so both branches of an If agree, a Loop's
//! carried state has one type in and out, and readers outside are
//! unchanged. A value a subgraph reads from outside is read as the outer
//! graph now computes it: a float16 value directly by converted nodes and
//! through a Cast inside the subgraph by float32 ones; a float32 value read
//! in half gets a Cast inside the subgraph, except a weight that every
//! reader, in every subgraph, reads in half: it becomes float16 where it is
//! stored (silero-vad's opset-18 export keeps its LSTM and Conv weights in
//! the main graph and computes in an If). A precision override to fp32 on
//! the If/Loop/Scan node keeps its subgraphs float32 whole (as the
//! automatic float32 islands of `--fp16` do when a subgraph adds the error).
//!
//! ## When it declines
//! Per node, reason recorded: the precision map keeps it; the op is not on
//! the allow-list or has no float16 form at the model's opset; it is
//! numerically sensitive (see above); a weight it reads holds values beyond
//! the half type's range; an input or output type is unknown
//! (run `infer-shapes` first; the pass also infers); its island is too
//! small to pay for its Casts; an override to fp32 on its If/Loop/Scan node
//! (the whole subgraph). Nodes without float32 tensors are not considered
//! at all. Fails (does not decline) when a user's override (fp32/fp16/bf16)
//! selects no node of the graph it sees (the passes before it removed what
//! the override named), or when an override to the pass's type converts
//! none of the nodes it selects (the reason of the first is given): either
//! would otherwise change nothing.
//!
//! ## Numerics
//! float16 keeps 11 significant bits (relative error ~5e-4 per rounding) and
//! a range of ±65504. A node reading a weight with finite values beyond the
//! range stays float32 (clamping would change its result: a BatchNorm
//! variance of 1e8 in PaddleOCR's detector, say); when an override asks for
//! it, the values are clamped to ±65504 and listed by tensor name in the
//! notes. Magnitudes of 1e30 and more stand for infinity (the
//! `finfo(float32).min` of attention masks): they are clamped to ±65504
//! (noted) without keeping the node. Nonzero weight values below the smallest subnormal (6e-8) become
//! zero and are counted per tensor.
//! LayerNormalization keeps its float32 statistics (`stash_type` 1).
//! Expect cosine similarity ≥ 0.999 against float32. The pass sees no
//! data: `optimize`/`build-engine --fp16` judge its result by that target on
//! the verification inputs and keep in float32 what the model needs (nodes
//! whose activations overflow float16, then the ones adding the most error),
//! as precision overrides whose reason, the measurement, this pass reports.
//! ONNX Runtime's CPU provider has float16 kernels for few compute ops and
//! runs the others by inserting its own Casts: the model loads and runs, but
//! is not faster on CPU; the gain is on GPUs and TensorRT.
//!
//! ## Example
//! `x:f32 → MatMul(W) → Add(b) → Softmax → y:f32` becomes
//! `x → Cast(f16) → MatMul(W:f16) → Add(b:f16) → Cast(f32) → Softmax → y`:
//! two Casts, weights halved, Softmax kept in float32 (reason in the report).

crate::register_pass! {
    name: "convert-float16",
    kind: Shape,
    file: "convert_float16.rs",
    options: ConvertOptions,
    build: |o: &ConvertOptions| ConvertFloat { to: Half::F16, options: o.clone() },
    numerics: HalfPrecision,
}

mod ops;
mod scopes;
mod values;

use std::collections::{HashMap, HashSet};

use infopt_ir::infer::infer_shapes;
use infopt_ir::{Attribute, DataType, Graph, Model, Node, NodeId, Slot, TensorType, Use, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::precision::{Override, Precision, PrecisionMap};
use ops::Role;

/// The half type a conversion targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    F16,
    Bf16,
}

impl Half {
    pub fn dtype(self) -> DataType {
        match self {
            Half::F16 => DataType::Float16,
            Half::Bf16 => DataType::Bfloat16,
        }
    }

    pub fn precision(self) -> Precision {
        match self {
            Half::F16 => Precision::Fp16,
            Half::Bf16 => Precision::Bf16,
        }
    }

    fn pass_name(self) -> &'static str {
        match self {
            Half::F16 => "convert-float16",
            Half::Bf16 => "convert-bfloat16",
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Half::F16 => "float16",
            Half::Bf16 => "bfloat16",
        }
    }

    /// Suffix of derived value names (`w` → `w.fp16`).
    fn suffix(self) -> &'static str {
        self.precision().as_str()
    }
}

fn default_true() -> bool {
    true
}

/// Options of `convert-float16` / `convert-bfloat16`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvertOptions {
    /// Keep graph inputs and outputs float32 (one Cast each): users feed float32.
    #[serde(default = "default_true")]
    pub keep_io_types: bool,
    /// Also convert the `com.microsoft` ops the onnxruntime target's fusions
    /// emit (Attention, SkipLayerNormalization, BiasGelu, FastGelu, Gelu, QuickGelu) to
    /// float16: ONNX Runtime's CUDA provider has float16 kernels for them, its
    /// CPU provider float32 ones only (verify such a model with `--backend ort
    /// --ep cuda`). Off: they stay float32 islands with Casts around them.
    #[serde(default)]
    pub contrib_ops: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            keep_io_types: true,
            contrib_ops: false,
        }
    }
}

/// Makes every `convert-float16` step of `config` convert the `com.microsoft` ops
/// of the onnxruntime target too (`contrib_ops: true`): for a model that runs, and
/// is verified, on ONNX Runtime's CUDA provider, which has float16 kernels for
/// them. Without it each such op is a float32 island between two Casts (a SiLU
/// fused to QuickGelu in every block of a CNN: YOLOv5s 116 Casts, 0.97x FP32 on an
/// H200; converted, 2 Casts and 1.18x). Returns whether any step changed.
pub fn convert_contrib_ops(config: &mut crate::config::PipelineConfig) -> bool {
    let mut changed = false;
    for p in config.pass_configs_mut() {
        if p.name() != "convert-float16" {
            continue;
        }
        if let Some(o) = p.options_mut::<ConvertOptions>()
            && !o.contrib_ops
        {
            o.contrib_ops = true;
            changed = true;
        }
    }
    changed
}

/// Makes every `convert-float16` / `convert-bfloat16` step of `config` write its
/// graph's float inputs and outputs in the half type (`keep_io_types: false`, the
/// command line's `--fp16-io`): a caller that feeds and reads half on the device then
/// pays for no Cast at either end. Returns whether the pipeline has such a step.
pub fn use_half_io(config: &mut crate::config::PipelineConfig) -> bool {
    let mut found = false;
    for p in config.pass_configs_mut() {
        if let Some(o) = p.options_mut::<ConvertOptions>() {
            o.keep_io_types = false;
            found = true;
        }
    }
    found
}

/// Whether a half-precision step of `config` writes half graph inputs and outputs.
pub fn writes_half_io(config: &crate::config::PipelineConfig) -> bool {
    config
        .pass_configs()
        .any(|p| p.options::<ConvertOptions>().is_some_and(|o| !o.keep_io_types))
}

/// The pass, for either half type.
pub struct ConvertFloat {
    pub to: Half,
    pub options: ConvertOptions,
}

impl ConvertFloat {
    /// Every user override to this pass's type converts at least one of the
    /// nodes it selects (first match): one none of whose nodes can convert
    /// (an op off the allow-list, a type problem) would change nothing, and
    /// is refused with the reason the plan gave.
    fn overrides_take_effect(
        &self,
        g: &Graph,
        tree: &scopes::PlanTree,
        map: &PrecisionMap,
        cx: &PassCx,
    ) -> Result<(), String> {
        let target = self.to.precision();
        for o in map.overrides.iter().filter(|o| o.why.is_none() && o.to == target) {
            let pick = |n: &Node| map.override_for(n).is_some_and(|f| std::ptr::eq(f, o));
            let Some((_, first)) = g.nodes().find(|(_, n)| pick(n)) else {
                // Only inside subgraphs, or nowhere (checked before the pass).
                if !tree.converts_any(g, &pick) && any_node(g, &pick) {
                    return Err(format!(
                        "the precision override for {} ({target}) converts none of its nodes (inside If/Loop/Scan subgraphs; reasons in the declined list)",
                        o.selector
                    ));
                }
                continue;
            };
            if tree.converts_any(g, &pick) {
                continue;
            }
            let label = first.name_or_op();
            let reason = cx
                .declined
                .iter()
                .rev()
                .find(|d| d.pass == cx.current && d.at == label)
                .map(|d| d.reason.clone())
                .unwrap_or_else(|| format!("no float32 computation of {} to convert", first.op_type));
            return Err(format!(
                "the precision override for {} ({target}) converts none of its nodes: {label}: {reason}",
                o.selector
            ));
        }
        Ok(())
    }
}

/// Whether a node of `g` or of its subgraphs satisfies `pick`.
fn any_node(g: &Graph, pick: &dyn Fn(&Node) -> bool) -> bool {
    g.nodes()
        .any(|(_, n)| pick(n) || n.subgraphs().any(|sg| any_node(sg, pick)))
}

impl Pass for ConvertFloat {
    fn name(&self) -> &'static str {
        self.to.pass_name()
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        // Element types of every value, subgraphs included (the decisions
        // need them all).
        let _ = infer_shapes(model);
        let opset = model.opset("").unwrap_or(1);
        let map = cx.side.get::<PrecisionMap>().cloned().unwrap_or_default();
        crate::precision::check::check_at_pass(&map, model, self.to.pass_name())
            .map_err(PassError::Config)?;
        let g = &mut model.graph;
        let keep_io = self.options.keep_io_types;
        let scope = HashMap::new();
        let tree = self.plan_tree(g, opset, &map, cx, &scope, keep_io, None);
        self.overrides_take_effect(g, &tree, &map, cx)
            .map_err(PassError::Config)?;
        let mut totals = scopes::Totals::default();
        self.rewrite_tree(g, &tree, cx, &scope, keep_io, &mut totals)?;
        let remaining = float_weights_in_subgraphs(g);
        if totals.converted == 0 {
            // Saying nothing would read as success: say why the model stays
            // float32 where its weights are inside subgraphs.
            if remaining.bytes > 0 {
                cx.note(format!(
                    "{}: nothing converted, in the main graph or in its If/Loop/Scan subgraphs, which hold {}: every float32 node was declined (reasons in the report's declined list)",
                    self.to.pass_name(),
                    remaining.describe(),
                ));
            }
            return Ok(totals.removed);
        }
        if totals.stats.flushed_values > 0 {
            cx.note(format!(
                "{}: {} nonzero weight value{} below the smallest {} subnormal became 0, in {} tensor{} (each in the report's details)",
                self.to.pass_name(),
                totals.stats.flushed_values,
                if totals.stats.flushed_values == 1 { "" } else { "s" },
                self.to.type_name(),
                totals.stats.flushed_tensors,
                if totals.stats.flushed_tensors == 1 { "" } else { "s" },
            ));
        }
        if remaining.bytes > 0 {
            cx.note(format!(
                "{}: If/Loop/Scan subgraphs keep {} in float32 (their readers stay float32: see the declined nodes)",
                self.to.pass_name(),
                remaining.describe(),
            ));
        }
        let inside = if totals.sub_converted > 0 {
            format!(
                " ({} of them inside {} If/Loop/Scan subgraph{}, whose inputs and outputs stay float32)",
                totals.sub_converted,
                totals.subgraphs,
                if totals.subgraphs == 1 { "" } else { "s" },
            )
        } else {
            String::new()
        };
        let stats = &totals.stats;
        cx.note(format!(
            "{}: {} nodes in {}{inside}, {} kept in float32 ({} island{}), {} Cast{} added, {} removed, {} constant{} converted ({} -> {} bytes)",
            self.to.pass_name(),
            totals.converted,
            self.to.type_name(),
            totals.kept,
            totals.islands,
            if totals.islands == 1 { "" } else { "s" },
            stats.casts,
            if stats.casts == 1 { "" } else { "s" },
            totals.removed,
            stats.initializers,
            if stats.initializers == 1 { "" } else { "s" },
            stats.bytes_before,
            stats.bytes_after,
        ));
        Ok(totals.converted + stats.casts + totals.removed)
    }
}

/// Which nodes convert, and how their inputs are treated.
#[derive(Default)]
struct Plan {
    /// Original element type of every value.
    dtype: HashMap<ValueId, DataType>,
    /// Converted nodes and the roles of their inputs.
    roles: HashMap<NodeId, Vec<Role>>,
    convert: HashSet<NodeId>,
    /// Nodes with float32 tensors that stay float32.
    kept: usize,
}

impl Plan {
    /// A plan converting nothing, with the element types of `g`'s values
    /// (those read from enclosing graphs from `scope`).
    fn typed(g: &Graph, scope: &HashMap<String, DataType>) -> Plan {
        let mut plan = Plan::default();
        for v in g.value_ids() {
            let value = g.value(v);
            let dtype = match value.outer {
                true => scope
                    .get(&value.name)
                    .copied()
                    .or_else(|| g.value_type(v).map(|t| t.dtype)),
                false => g.value_type(v).map(|t| t.dtype),
            };
            if let Some(d) = dtype {
                plan.dtype.insert(v, d);
            }
        }
        plan
    }

    fn dt(&self, v: ValueId) -> DataType {
        self.dtype.get(&v).copied().unwrap_or(DataType::Undefined)
    }

    /// True when the reader `u` wants the half type.
    fn wants_half(&self, u: &Use) -> bool {
        match u.slot {
            Slot::Input(i) => self
                .roles
                .get(&u.node)
                .and_then(|r| r.get(i as usize))
                .is_some_and(|r| *r == Role::Half),
            Slot::Capture => false,
        }
    }

    /// Converted nodes connected through converted values, as components.
    fn islands(&self, g: &Graph) -> Vec<Vec<NodeId>> {
        let mut seen: HashSet<NodeId> = HashSet::new();
        let mut out = Vec::new();
        let mut starts: Vec<NodeId> = self.convert.iter().copied().collect();
        starts.sort();
        for start in starts {
            if !seen.insert(start) {
                continue;
            }
            let mut island = vec![start];
            let mut stack = vec![start];
            while let Some(n) = stack.pop() {
                let node = g.node(n);
                let mut next: Vec<NodeId> = Vec::new();
                for v in node.outputs.iter().flatten() {
                    next.extend(g.value(*v).uses.iter().map(|u| u.node));
                }
                for v in node.inputs.iter().flatten() {
                    next.extend(g.value(*v).producer.map(|(p, _)| p));
                }
                for m in next {
                    if self.convert.contains(&m) && seen.insert(m) {
                        stack.push(m);
                        island.push(m);
                    }
                }
            }
            out.push(island);
        }
        out
    }

    /// Casts an island needs: float32 values it reads in half (constants are
    /// converted, not cast) and half values read in float32 outside it.
    fn border_casts(&self, g: &Graph, island: &HashSet<NodeId>, keep_io: bool) -> usize {
        let mut inputs: HashSet<ValueId> = HashSet::new();
        let mut outputs = 0;
        for &n in island {
            let node = g.node(n);
            for (slot, v) in node.inputs.iter().enumerate() {
                let Some(v) = *v else { continue };
                let half = self
                    .roles
                    .get(&n)
                    .and_then(|r| r.get(slot))
                    .is_some_and(|r| *r == Role::Half);
                let constant = g.constant(v).is_some() || g.producer(v).is_some_and(|p| p.is("Constant"));
                let outside = g.value(v).producer.is_none_or(|(p, _)| !island.contains(&p));
                // Without keep_io_types a graph input is declared half instead.
                let free_input = g.is_graph_input(v) && !keep_io;
                if half && !constant && outside && !free_input {
                    inputs.insert(v);
                }
            }
            for v in node.outputs.iter().flatten() {
                if self.dt(*v) != DataType::Float {
                    continue;
                }
                let outside = g.value(*v).uses.iter().any(|u| {
                    !island.contains(&u.node)
                        && !matches!(u.slot, Slot::Input(i) if ops::reads_any_float(g.node(u.node), i))
                });
                if outside || (g.is_graph_output(*v) && keep_io) {
                    outputs += 1;
                }
            }
        }
        inputs.len() + outputs
    }
}

/// What the rewrite did.
#[derive(Default)]
struct RewriteStats {
    casts: usize,
    initializers: usize,
    bytes_before: usize,
    bytes_after: usize,
    /// Nonzero weight values below the half type's smallest subnormal that
    /// became 0, and in how many tensors.
    flushed_values: usize,
    flushed_tensors: usize,
}

impl RewriteStats {
    fn add(&mut self, o: &RewriteStats) {
        self.casts += o.casts;
        self.initializers += o.initializers;
        self.bytes_before += o.bytes_before;
        self.bytes_after += o.bytes_after;
        self.flushed_values += o.flushed_values;
        self.flushed_tensors += o.flushed_tensors;
    }

    fn flush(&mut self, values: usize) {
        if values > 0 {
            self.flushed_values += values;
            self.flushed_tensors += 1;
        }
    }
}

impl ConvertFloat {
    /// Which nodes of `g` convert. `scope`: the element types of the
    /// enclosing graphs' values by name (what a subgraph reads from them);
    /// `keep_io`: `g`'s inputs and outputs stay float32 (always so in a
    /// subgraph: the If/Loop/Scan node's interface keeps its types).
    fn plan(
        &self,
        g: &Graph,
        opset: i64,
        map: &PrecisionMap,
        cx: &mut PassCx,
        scope: &HashMap<String, DataType>,
        keep_io: bool,
    ) -> Plan {
        let mut plan = Plan::typed(g, scope);
        let sensitive = ops::sensitive(g, &plan.dtype);
        let target = self.to.precision();
        let ty = self.to.type_name();
        // Phase 1: compute nodes.
        let mut decided: Vec<(NodeId, Vec<Role>)> = Vec::new();
        let mut considered = 0;
        let mut range_cache: HashMap<ValueId, f32> = HashMap::new();
        for (id, node) in g.nodes() {
            let is_f32 = |v: &ValueId| plan.dt(*v) == DataType::Float;
            let float_io = node.inputs.iter().flatten().any(is_f32)
                || node.outputs.iter().flatten().any(is_f32);
            // A node with subgraphs is not converted itself: its subgraphs
            // are planned on their own (see `plan_tree`).
            if !float_io || is_retypable(node) || ops::reads_any_float(node, 0) || node.has_subgraphs() {
                continue;
            }
            considered += 1;
            let name = node.name_or_op().to_string();
            let ov = map.override_for(node);
            let want = ov.map(|o| o.to).or(map.default).unwrap_or(target);
            if want != target {
                let why = match ov {
                    Some(Override { why: Some(w), .. }) => w.clone(),
                    Some(o) => format!("the override for {} says {want}", o.selector),
                    None => format!("the precision map's default says {want}"),
                };
                cx.decline(&name, format!("kept in fp32: {why}"));
                continue;
            }
            let forced = ov.is_some();
            let contrib = self.options.contrib_ops && self.to == Half::F16;
            let Some(mut roles) = ops::signature(node, opset, self.to, contrib) else {
                cx.decline(
                    &name,
                    format!(
                        "kept in fp32: {} is not on the {ty} allow-list (or has no {ty} form at opset {opset})",
                        node.op_type
                    ),
                );
                continue;
            };
            // From opset 12 Pow's exponent may be an integer: it keeps its type.
            if node.is("Pow")
                && opset >= 12
                && let Some(Some(e)) = node.inputs.get(1)
                && plan.dt(*e) != DataType::Float
            {
                roles[1] = Role::Keep;
            }
            if !forced && let Some(r) = sensitive.get(&id) {
                cx.decline(&name, format!("kept in fp32: {r}"));
                continue;
            }
            if let Some(reason) = self.type_problem(g, &plan, node, &roles) {
                if let Some(r) = reason {
                    cx.decline(&name, format!("kept in fp32: {r}"));
                }
                continue;
            }
            // Weights beyond the range would be clamped, which changes the
            // result (a BatchNorm variance of 1e8, say): keep the node,
            // unless an override asks for it (then clamp and report).
            if !forced && let Some(r) = self.out_of_range_weight(g, node, &roles, &mut range_cache) {
                cx.decline(&name, format!("kept in fp32: {r}"));
                continue;
            }
            decided.push((id, roles));
        }
        plan.kept = considered - decided.len();
        for (id, roles) in decided {
            plan.convert.insert(id);
            plan.roles.insert(id, roles);
        }

        // Phase 2: Cast(to=float) of non-float32 values, Constant and
        // ConstantOfShape produce the half type directly when every reader
        // wants it (no Cast back for anyone).
        let mut retyped: Vec<NodeId> = Vec::new();
        for (id, node) in g.nodes() {
            if !is_retypable(node) {
                continue;
            }
            let Some(out) = node.outputs.first().copied().flatten() else {
                continue;
            };
            if plan.dt(out) != DataType::Float || g.is_graph_output(out) {
                continue;
            }
            let uses = &g.value(out).uses;
            if uses.is_empty() || !uses.iter().all(|u| plan.wants_half(u)) {
                continue;
            }
            if map.override_for(node).is_some_and(|o| o.to != target) {
                continue;
            }
            let ok = match node.op_type.as_str() {
                "Cast" => node
                    .inputs
                    .first()
                    .copied()
                    .flatten()
                    .is_some_and(|x| !matches!(plan.dt(x), DataType::Float | DataType::Undefined)),
                "ConstantOfShape" => opset >= if self.to == Half::F16 { 9 } else { 20 },
                _ => infopt_ir::infer::constant_value(node).is_some_and(|t| t.dtype() == DataType::Float),
            };
            if ok {
                retyped.push(id);
            }
        }
        for id in retyped {
            plan.convert.insert(id);
            plan.roles.insert(id, vec![Role::Keep; g.node(id).inputs.len()]);
        }

        // Phase 3: an island without a heavy op that needs as many Casts as
        // it has ops gains nothing (the Casts cost what float16 saves) and
        // only loses precision: it stays float32. Islands holding a node an
        // override asked for are kept.
        for island in plan.islands(g) {
            let set: HashSet<NodeId> = island.iter().copied().collect();
            let heavy = island.iter().any(|&n| {
                let node = g.node(n);
                HEAVY.iter().any(|op| node.is(op)) || map.override_for(node).is_some()
            });
            let ops = island.iter().filter(|&&n| !is_retypable(g.node(n))).count();
            let casts = plan.border_casts(g, &set, keep_io);
            if heavy || casts < ops {
                continue;
            }
            for &n in &island {
                plan.convert.remove(&n);
                plan.roles.remove(&n);
                let node = g.node(n);
                if !is_retypable(node) {
                    plan.kept += 1;
                    cx.decline(
                        node.name_or_op(),
                        format!(
                            "kept in fp32: a {ty} island of {ops} op{} without MatMul/Conv/Gemm would need {casts} Casts",
                            if ops == 1 { "" } else { "s" }
                        ),
                    );
                }
            }
        }
        plan
    }

    /// A reason when a constant `Half` input of `node` holds finite values
    /// beyond the half type's range.
    fn out_of_range_weight(
        &self,
        g: &Graph,
        node: &Node,
        roles: &[Role],
        cache: &mut HashMap<ValueId, f32>,
    ) -> Option<String> {
        let max = match self.to {
            Half::F16 => half::f16::MAX.to_f32(),
            Half::Bf16 => half::bf16::MAX.to_f32(),
        };
        for (slot, v) in node.inputs.iter().enumerate() {
            let Some(v) = *v else { continue };
            if roles.get(slot) != Some(&Role::Half) {
                continue;
            }
            let largest = match cache.get(&v) {
                Some(m) => *m,
                None => {
                    let t = match g.constant(v) {
                        Some(t) => Some(t.clone()),
                        None => g
                            .producer(v)
                            .filter(|p| p.is("Constant"))
                            .and_then(infopt_ir::infer::constant_value),
                    };
                    let m = t.map_or(0.0, |t| values::largest_finite(&t));
                    cache.insert(v, m);
                    m
                }
            };
            if largest > max {
                return Some(format!(
                    "weight '{}' holds values up to {largest:e}, beyond {}'s ±{max:e}",
                    g.value(v).name,
                    self.to.type_name()
                ));
            }
        }
        None
    }

    /// `Some(reason)` when `node` cannot convert (`Some(None)`: silently, its
    /// types are not float32).
    fn type_problem(
        &self,
        g: &Graph,
        plan: &Plan,
        node: &Node,
        roles: &[Role],
    ) -> Option<Option<String>> {
        for (slot, v) in node.inputs.iter().enumerate() {
            let Some(v) = v else { continue };
            if roles.get(slot) != Some(&Role::Half) {
                continue;
            }
            match plan.dt(*v) {
                DataType::Float => {}
                DataType::Undefined => {
                    return Some(Some(format!(
                        "the element type of input '{}' is unknown",
                        g.value(*v).name
                    )));
                }
                _ => return Some(None),
            }
        }
        let mut float_out = false;
        for v in node.outputs.iter().flatten() {
            match plan.dt(*v) {
                DataType::Float => float_out = true,
                DataType::Undefined => {
                    return Some(Some(format!(
                        "the element type of output '{}' is unknown",
                        g.value(*v).name
                    )));
                }
                _ => {}
            }
        }
        if !float_out {
            return Some(None);
        }
        // Statistics outputs (Mean/InvStdDev, running mean/var) keep float32.
        if (node.is("LayerNormalization") || node.is("BatchNormalization"))
            && node.outputs.iter().skip(1).flatten().any(|&v| g.reader_count(v) > 0)
        {
            return Some(Some("its statistics outputs are used".into()));
        }
        // SkipLayerNormalization's mean / inv_std_var outputs are float32 (U)
        // whatever T is: converted, they would be declared half.
        if node.domain() == "com.microsoft"
            && node.op_type == "SkipLayerNormalization"
            && node.outputs.iter().skip(1).take(2).any(|v| v.is_some())
        {
            return Some(Some("its float32 statistics outputs are present".into()));
        }
        None
    }

    /// Rewrites `g` by `plan`. `outer_half`: values `g` reads from an
    /// enclosing graph that the enclosing graph now computes in the half
    /// type (their float32 readers here get a Cast). `captures`: the plans
    /// of `g`'s subgraphs, which say whether they read a float32 weight of
    /// `g` only in half (then it is converted here, in place).
    fn rewrite(
        &self,
        g: &mut Graph,
        plan: &Plan,
        cx: &mut PassCx,
        keep_io: bool,
        outer_half: &HashSet<ValueId>,
        captures: &scopes::PlanTree,
    ) -> Result<RewriteStats, PassError> {
        let half = self.to.dtype();
        let mut stats = RewriteStats::default();
        let mut half_values: HashSet<ValueId> = outer_half.clone();
        for &id in &plan.convert {
            for v in g.node(id).outputs.iter().flatten() {
                if plan.dt(*v) == DataType::Float {
                    half_values.insert(*v);
                }
            }
        }
        // Without keep_io_types, float32 inputs read in half become half.
        if !keep_io {
            for io in &g.inputs {
                let v = io.value;
                let value = g.value(v);
                if plan.dt(v) == DataType::Float
                    && value.initializer.is_none()
                    && value.uses.iter().any(|u| plan.wants_half(u))
                    && !value.uses.iter().any(|u| u.slot == Slot::Capture)
                {
                    half_values.insert(v);
                }
            }
        }

        // Node-level changes: Cast targets, constant values, output types.
        for &id in &plan.convert {
            let node = g.node(id);
            let mut replace_attrs: Option<Vec<Attribute>> = None;
            match node.op_type.as_str() {
                "Cast" => {
                    replace_attrs = Some(vec![Attribute::int("to", half.code() as i64)]);
                }
                "Constant" | "ConstantOfShape" => {
                    let t = if node.is("Constant") {
                        infopt_ir::infer::constant_value(node)
                    } else {
                        Some(
                            node.attr_tensor("value")?
                                .unwrap_or_else(|| infopt_ir::Tensor::from_f32(vec![1], &[0.0])),
                        )
                    };
                    if let Some(t) = t {
                        let name = node.name_or_op().to_string();
                        let conv = values::convert_tensor(&t, self.to)?;
                        stats.flush(values::note_rounding(cx, self.to, &name, &conv));
                        stats.initializers += 1;
                        stats.bytes_before += t.payload_bytes();
                        stats.bytes_after += conv.tensor.payload_bytes();
                        replace_attrs = Some(vec![Attribute::tensor("value", &conv.tensor)]);
                    }
                }
                _ => {}
            }
            if let Some(attrs) = replace_attrs {
                let node = g.node_mut(id);
                if node.is("Cast") {
                    node.remove_attr("to");
                } else {
                    node.attributes.retain(|a| !a.name().starts_with("value"));
                }
                for a in attrs {
                    node.set_attr(a);
                }
            }
            // LayerNormalization computes its statistics in float32.
            if g.node(id).is("LayerNormalization") {
                g.node_mut(id).set_attr(Attribute::int("stash_type", 1));
            }
        }

        // Values crossing a border, in a fixed order.
        let mut order: Vec<ValueId> = g.value_ids().collect();
        order.sort();
        for v in order {
            if g.try_value(v).is_none() || plan.dt(v) != DataType::Float {
                continue;
            }
            let value = g.value(v);
            let half_uses: Vec<Use> = value.uses.iter().filter(|u| plan.wants_half(u)).copied().collect();
            let f32_uses: Vec<Use> = value
                .uses
                .iter()
                .filter(|u| {
                    !plan.wants_half(u)
                        && match u.slot {
                            Slot::Input(i) => !ops::reads_any_float(g.node(u.node), i),
                            Slot::Capture => true,
                        }
                })
                .copied()
                .collect();
            if half_values.contains(&v) {
                self.retype_value(g, v);
                if g.is_graph_input(v) {
                    for io in g.inputs.iter_mut().filter(|io| io.value == v) {
                        let ty = retype(io.info.r#type.as_ref().and_then(TensorType::from_proto), half);
                        io.info.r#type = Some(ty.to_proto(io.info.r#type.as_ref()));
                    }
                }
                let is_output = g.is_graph_output(v);
                if is_output && !keep_io {
                    for io in g.outputs.iter_mut().filter(|io| io.value == v) {
                        let ty = retype(io.info.r#type.as_ref().and_then(TensorType::from_proto), half);
                        io.info.r#type = Some(ty.to_proto(io.info.r#type.as_ref()));
                    }
                }
                let f32_reads = f32_uses.iter().any(|u| matches!(u.slot, Slot::Input(_)));
                if f32_reads || (is_output && keep_io) {
                    let back = self.add_cast(g, v, DataType::Float, is_output && keep_io);
                    stats.casts += 1;
                    for u in f32_uses {
                        if let Slot::Input(i) = u.slot {
                            g.set_input(u.node, i as usize, Some(back));
                        }
                    }
                }
                continue;
            }
            // A weight that subgraphs read only in half converts in place
            // (they then read it without a Cast).
            let captured_half = g.constant(v).is_some()
                && value.uses.iter().any(|u| u.slot == Slot::Capture)
                && captures.captures_want_half(g, v);
            if half_uses.is_empty() && !captured_half {
                continue;
            }
            // A float32 value read in half: convert constants, skip a Cast
            // of a half value, or add one Cast.
            let source = self.half_source(g, plan, &half_values, v, captured_half)?;
            let new = match source {
                HalfSource::Constant(_, false) if half_uses.is_empty() => continue,
                HalfSource::Constant(t, in_place) => {
                    let name = g.value(v).name.clone();
                    let conv = values::convert_tensor(&t, self.to)?;
                    stats.flush(values::note_rounding(cx, self.to, &name, &conv));
                    stats.initializers += 1;
                    stats.bytes_before += t.payload_bytes();
                    stats.bytes_after += conv.tensor.payload_bytes();
                    if in_place {
                        g.value_mut(v).initializer = Some(conv.tensor);
                        if g.value(v).info.is_some() {
                            self.retype_value(g, v);
                        }
                        continue;
                    }
                    g.add_initializer(&format!("{name}.{}", self.to.suffix()), conv.tensor)
                }
                HalfSource::Existing(w) => w,
                HalfSource::Cast => {
                    stats.casts += 1;
                    self.add_cast(g, v, half, false)
                }
            };
            for u in half_uses {
                if let Slot::Input(i) = u.slot {
                    g.set_input(u.node, i as usize, Some(new));
                }
            }
        }
        Ok(stats)
    }

    /// Sets the recorded element type of `v` to the half type.
    fn retype_value(&self, g: &mut Graph, v: ValueId) {
        let ty = retype(g.value_type(v), self.to.dtype());
        if g.value(v).info.is_some() || g.value(v).producer.is_some() {
            g.set_value_type(v, &ty);
        }
    }

    /// Where the half readers of float32 value `v` read from.
    fn half_source(
        &self,
        g: &Graph,
        plan: &Plan,
        half_values: &HashSet<ValueId>,
        v: ValueId,
        captured_half: bool,
    ) -> Result<HalfSource, PassError> {
        let value = g.value(v);
        let only_half = !g.is_graph_output(v)
            && value.uses.iter().all(|u| match u.slot {
                Slot::Input(i) => plan.wants_half(u) || ops::reads_any_float(g.node(u.node), i),
                Slot::Capture => captured_half,
            });
        if let Some(t) = g.constant(v) {
            return Ok(HalfSource::Constant(Box::new(t.clone()), only_half));
        }
        if let Some((p, _)) = value.producer {
            let pn = g.node(p);
            if pn.is("Constant")
                && let Some(t) = infopt_ir::infer::constant_value(pn)
                && t.dtype() == DataType::Float
            {
                return Ok(HalfSource::Constant(Box::new(t), false));
            }
            // Cast(to=float) of a half value: read the half value itself.
            if pn.is("Cast")
                && let Some(x) = pn.inputs.first().copied().flatten()
                && (half_values.contains(&x) || plan.dt(x) == self.to.dtype())
            {
                return Ok(HalfSource::Existing(x));
            }
        }
        Ok(HalfSource::Cast)
    }

    /// Adds `Cast(v, to)`. With `take_name` the Cast's output takes `v`'s name
    /// and place as graph output, and `v` gets a derived name.
    fn add_cast(&self, g: &mut Graph, v: ValueId, to: DataType, take_name: bool) -> ValueId {
        // A value a rewrite left unnamed gets its name only when the model is
        // saved; derive the Cast's names as the saver will, so that two such
        // values do not give two Casts one name.
        let name = g.name_for_saving(v);
        let suffix = if to == DataType::Float {
            "fp32"
        } else {
            self.to.suffix()
        };
        // A value read from an enclosing graph keeps its name (it is how
        // the subgraph finds it); the subgraph's output slot, matched by
        // position, takes the Cast's.
        let rename = take_name && !g.value(v).outer;
        let out_name = if rename {
            let inner = format!("{name}.{}", self.to.suffix());
            g.value_mut(v).name = inner;
            name.clone()
        } else {
            format!("{name}.{suffix}")
        };
        let node = Node {
            name: Some(format!("{name}.cast_{suffix}")),
            op_type: "Cast".into(),
            inputs: vec![Some(v)],
            attributes: vec![Attribute::int("to", to.code() as i64)],
            ..Default::default()
        };
        let at = g
            .value(v)
            .producer
            .and_then(|(p, _)| g.position(p))
            .map(|p| p + 1)
            .unwrap_or(0);
        let id = g.insert_node(at, node, &[&out_name]);
        let out = g.node(id).outputs[0].expect("a Cast has one output");
        let shape = g.value_type(v).and_then(|t| t.shape);
        g.set_value_type(out, &TensorType { dtype: to, shape });
        if take_name {
            for io in g.outputs.iter_mut().filter(|io| io.value == v) {
                io.value = out;
            }
        }
        out
    }
}

enum HalfSource {
    /// Constant data; `true`: convert the initializer in place.
    Constant(Box<infopt_ir::Tensor>, bool),
    /// An existing half value computing the same tensor.
    Existing(ValueId),
    Cast,
}

/// float32 weights that only subgraphs compute with: they keep the file
/// from shrinking, and the user should know why.
#[derive(Default)]
struct SubgraphWeights {
    tensors: usize,
    bytes: usize,
}

impl SubgraphWeights {
    fn add(&mut self, t: &infopt_ir::Tensor) {
        self.tensors += 1;
        self.bytes += t.payload_bytes();
    }

    fn describe(&self) -> String {
        format!(
            "{} float32 weight{} of {:.1} MB read only there",
            self.tensors,
            if self.tensors == 1 { "" } else { "s" },
            self.bytes as f64 / 1e6
        )
    }
}

/// float32 initializers of `g` read only by subgraphs (captures), plus the
/// float32 initializers and Constant values held inside the subgraphs.
fn float_weights_in_subgraphs(g: &Graph) -> SubgraphWeights {
    let mut out = SubgraphWeights::default();
    for (v, t) in g.initializers() {
        let uses = &g.value(v).uses;
        if t.dtype() == DataType::Float
            && !uses.is_empty()
            && uses.iter().all(|u| u.slot == Slot::Capture)
            && !g.is_graph_output(v)
        {
            out.add(t);
        }
    }
    for (_, node) in g.nodes() {
        for sg in node.subgraphs() {
            float_weights_of(sg, &mut out);
        }
    }
    out
}

/// Every float32 initializer and Constant of `g` and of its subgraphs.
fn float_weights_of(g: &Graph, out: &mut SubgraphWeights) {
    for (_, t) in g.initializers() {
        if t.dtype() == DataType::Float {
            out.add(t);
        }
    }
    for (_, n) in g.nodes() {
        if n.is("Constant")
            && let Some(t) = infopt_ir::infer::constant_value(n)
            && t.dtype() == DataType::Float
        {
            out.add(&t);
        }
        for sg in n.subgraphs() {
            float_weights_of(sg, out);
        }
    }
}

/// Ops whose float16 form pays for Casts around them.
const HEAVY: &[&str] = &[
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "Einsum",
    "LayerNormalization",
    "Attention",
    "SkipLayerNormalization",
    "LSTM",
    "GRU",
    "RNN",
];

/// Nodes whose output type is set by an attribute (phase 2 of the plan).
fn is_retypable(node: &Node) -> bool {
    node.domain().is_empty() && matches!(node.op_type.as_str(), "Cast" | "Constant" | "ConstantOfShape")
        && (!node.is("Cast")
            || node
                .attr_int("to")
                .ok()
                .flatten()
                .is_some_and(|t| t == DataType::Float.code() as i64))
}

fn retype(ty: Option<TensorType>, dtype: DataType) -> TensorType {
    TensorType {
        dtype,
        shape: ty.and_then(|t| t.shape),
    }
}
