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
//! (ReduceSum/L1/L2/SumSquare/LogSum/LogSumExp/Prod) and CumSum, InstanceNormalization,
//! decomposed LayerNorm/RMSNorm/softmax statistics (the reduction, the
//! squaring/exp before it and the Add(eps)/Sqrt/Reciprocal/Div after it),
//! shape arithmetic (small float tensors computing Resize scales, Range
//! bounds or integer sizes), in float16 a Log/Sqrt/Reciprocal/divisor
//! guarded by a constant below float16's smallest normal (`Log(x*x + 1e-10)`:
//! the guard, the guarded op and the elementwise chain computing the
//! argument, see `guards`), the front end of a log spectrum (from a graph
//! input through a filter bank and a square to the Log, see
//! `log_frontend`), Sin/Cos and the chain computing their argument (a
//! phase needs absolute precision, see `periodic`), in float16 a Transpose moving the leading axis read by
//! a MatMul with constant weights, and that MatMul (ONNX Runtime 1.31/1.32's
//! CPU session segfaults loading their float16 form, also with a Cast
//! between them: pyannote's segmentation reads its LSTM so; see
//! `runtime_faults`), everything off the allow-list (Range,
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

// half_type.rs (the types) < ops.rs, values.rs < plan.rs, rewrite.rs (one graph)
// < scopes.rs (the tree of subgraphs) < this file (the pass's run).
mod guards;
mod half_type;
mod log_frontend;
mod ops;
mod periodic;
mod plan;
mod rewrite;
mod runtime_faults;
mod scopes;
mod values;

pub use half_type::{ConvertFloat, ConvertOptions, Half};

use std::collections::HashMap;

use infopt_ir::infer::infer_shapes;
use infopt_ir::{DataType, Graph, Model, Node, Slot};

use crate::pass::{Pass, PassCx, PassError};
use crate::precision::PrecisionMap;

impl ConvertFloat {
    /// Every user override to this pass's type converts at least one of the
    /// nodes it selects (first match): one none of whose nodes can convert
    /// (an op off the allow-list, a type problem) would change nothing, and
    /// is refused with the reason the plan gave.
    fn overrides_take_effect(
        &self,
        g: &Graph,
        tree: &plan::PlanTree,
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
        // The half values before the outputs' Casts back were left without
        // a shape (`rewrite.rs::add_cast`): they take the one inference
        // proves, as a second conversion's first inference would give them
        // (converting again changes nothing).
        if stats.casts > 0 {
            let _ = infer_shapes(model);
        }
        Ok(totals.converted + stats.casts + totals.removed)
    }
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
