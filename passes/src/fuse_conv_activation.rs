//! Merges Conv + activation into ONNX Runtime's `com.microsoft.FusedConv`, Gemm + activation into `FusedGemm` (target onnxruntime).
//!
//! For 1-D and 2-D float32 convs only, and only when the pipeline targets ONNX Runtime.
//!
//! ## What it does
//! `c = Conv(x, W[, b])`, `y = Act(c)` becomes
//! `y = com.microsoft.FusedConv(x, W[, b], activation="Act", activation_params=[...])`
//! with the conv's attributes, for the activations ONNX Runtime's CPU kernel
//! implements, with `activation_params` as it reads them:
//! `Relu`, `Sigmoid`, `Tanh` (no params); `LeakyRelu` → `[alpha]`;
//! `Clip` → `[min, max]` (attributes before opset 11, constant inputs from
//! opset 11; a missing bound is the float32 lowest / highest value);
//! `HardSigmoid` → `[alpha, beta]`. The fused node takes the conv's name; its
//! output keeps the activation output's name. Adds the `com.microsoft`
//! opset import (version 1) when the model has none.
//!
//!
//! `c = Gemm(a, b[, c])`, `y = Act(c)` becomes
//! `y = com.microsoft.FusedGemm(a, b[, c], activation="Act", activation_alpha=...)`
//! with the Gemm's attributes, as ONNX Runtime's `GemmActivationFusion`
//! does (a scikit-learn MLP, a classifier head): `Relu`, `Sigmoid`, `Tanh`,
//! `LeakyRelu` (`activation_alpha`), `HardSigmoid` (`activation_alpha`,
//! `activation_beta`), written explicitly even at their defaults.
//!
//! With another target the pass changes nothing (FusedConv is not standard
//! ONNX) and leaves one note saying so.
//!
//! In the built-in `onnxruntime` pipeline it fuses only for ONNX Runtime's
//! CPU provider: when `--ep cpu` says so, or, without `--ep`, when the
//! installed ONNX Runtime has no other provider (PyPI's `onnxruntime`; the
//! JSON report's details say which applied). ONNX Runtime fuses Conv +
//! activation itself at load where its provider has a kernel for the pair,
//! and a FusedConv in the file binds every provider to it. The CUDA
//! provider's FusedConv is float32 with Relu or Tanh only (any other
//! activation fails at session creation: "unsupported conv activation
//! mode"), and with Relu it ran ResNet-50 1.4-2.2x slower than the unfused
//! graph on an H200 (bench/results/gpu_bench.md). So without `--ep`, with a
//! GPU build of ONNX Runtime installed or none at all, a built-in pipeline
//! leaves the pairs unfused; a pipeline of your own that names the pass
//! fuses them. With `--ep` naming any other provider the pass changes
//! nothing, in any pipeline.
//!
//! ## When it declines
//! The whole pass does nothing when `--ep` names a provider other than
//! ONNX Runtime's CPU one, or, in a built-in pipeline, when no `--ep` names
//! the provider and the installed ONNX Runtime has another one or none is
//! installed (see above). Otherwise, only with target `onnxruntime`,
//! where a Conv → activation pair is present:
//! - the conv output has other readers or is a graph output;
//! - the conv is neither 1-D nor 2-D (ONNX Runtime's CPU optimizer fuses
//!   both, silero-vad's 1-D convs among them; 3-D is not tried here);
//! - the element type is not float32, or cannot be determined (ORT
//!   registers the CPU FusedConv kernel for float only);
//! - a Clip bound is not a constant scalar;
//! - the conv is quantized (reads DequantizeLinear outputs): ORT's QDQ
//!   fusion makes it a QLinearConv, which a FusedConv would prevent;
//! - the pipeline's precision map puts the conv in float16 or bfloat16
//!   (`--fp16`): FusedConv has float32 kernels only (CPU and CUDA), so
//!   `convert-float16` would keep it a float32 island with a Cast on each
//!   side; the plain Conv converts, and ONNX Runtime fuses the activation at
//!   load where its provider has a kernel for it.
//!
//! For a Gemm: its output has other readers or is a graph output, or it is
//! not float32; a Gemm followed by Clip is not matched (FusedGemm has no
//! inputs for the bounds).
//!
//! ## Numerics
//! The same arithmetic in ONNX Runtime (the activation is applied by the
//! conv kernel, in float32). Differences of a few ULP are possible for
//! Sigmoid/Tanh, whose MLAS implementations the fused kernel uses.
//!
//! ## Example
//! `c = Conv(x, W, b, pads=[1,1,1,1])`, `y = Relu(c)` becomes
//! `y = com.microsoft.FusedConv(x, W, b, pads=[1,1,1,1], activation="Relu")`.

crate::register_pass! {
    name: "fuse-conv-activation",
    kind: Fuse,
    file: "fuse_conv_activation.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseConvActivation,
}

use infopt_ir::proto::OperatorSetIdProto;
use infopt_ir::{Attribute, DataType, Graph, Model, NodeId, PatchValue, ValueId};

use crate::pass::{ExecutionProviders, InstalledProviders, Pass, PassCx, PassError};
use crate::precision::{Precision, PrecisionMap};
use crate::rule::{Outcome, apply_rule};
use crate::util::replace_with_node;
use crate::util::{clip_bounds, input, output};
use crate::{decline, require, require_some};

pub struct FuseConvActivation;

pub const MS_DOMAIN: &str = "com.microsoft";

/// The element type of the conv, from its weight, input or output.
fn conv_dtype(g: &Graph, conv: NodeId) -> Option<DataType> {
    let from_value = |v: Option<ValueId>| v.and_then(|v| g.value_type(v)).map(|t| t.dtype);
    [input(g, conv, 1), input(g, conv, 0), output(g, conv, 0)]
        .into_iter()
        .find_map(|v| from_value(v).filter(|d| *d != DataType::Undefined))
}

/// Spatial rank of the conv, from its kernel_shape or weight rank.
fn spatial_rank(g: &Graph, conv: NodeId) -> Option<usize> {
    if let Ok(Some(k)) = g.node(conv).attr_ints("kernel_shape") {
        return Some(k.len());
    }
    let w = input(g, conv, 1)?;
    g.value_type(w)?.shape.map(|s| s.len().saturating_sub(2))
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let act = g.node(id);
    require!(act.domain().is_empty());
    require!(matches!(
        act.op_type.as_str(),
        "Relu" | "Sigmoid" | "Tanh" | "LeakyRelu" | "Clip" | "HardSigmoid"
    ));
    let x = require_some!(input(g, id, 0));
    let (conv, _) = require_some!(g.value(x).producer);
    if g.node(conv).is("Gemm") && g.node(conv).domain().is_empty() {
        return gemm_rule(g, id, conv, x);
    }
    require!(g.node(conv).is("Conv"));
    if g.is_graph_output(x) {
        decline!("conv output '{}' is a graph output", g.value(x).name);
    }
    let readers = g.reader_count(x);
    if readers != 1 {
        decline!("conv output has {readers} readers");
    }
    // A quantized conv (DequantizeLinear inputs): ORT turns `DQ → Conv →
    // (Relu) → Q` into QLinearConv itself; a FusedConv would hide the pattern
    // and leave the conv in float.
    let dequantized = g.node(conv).inputs.iter().flatten().any(|&v| {
        g.producer(v)
            .is_some_and(|p| p.op_type == "DequantizeLinear" && p.domain().is_empty())
    });
    if dequantized {
        decline!("the conv reads DequantizeLinear outputs: ONNX Runtime fuses the Q/DQ pattern into QLinearConv");
    }
    if let Some(map) = cx.side.get::<PrecisionMap>() {
        let p = map.precision_of(g.node(conv));
        if matches!(p, Precision::Fp16 | Precision::Bf16) {
            decline!(
                "the conv is to run in {p}: FusedConv has float32 kernels only, so it would stay a float32 island; ONNX Runtime fuses the activation at load where it can"
            );
        }
    }
    match spatial_rank(g, conv) {
        Some(1 | 2) => {}
        Some(r) => decline!("conv is {r}-D; FusedConv is fused for 1-D and 2-D convs only"),
        None => decline!("spatial rank of the conv is unknown"),
    }
    match conv_dtype(g, conv) {
        Some(DataType::Float) => {}
        Some(d) => {
            decline!("dtype {d} not supported: ONNX Runtime's FusedConv CPU kernel is float32 only")
        }
        None => decline!("element type of the conv is unknown"),
    }
    let params: Vec<f32> = match act.op_type.as_str() {
        "LeakyRelu" => vec![act.attr_float_or("alpha", 0.01).unwrap_or(0.01)],
        "HardSigmoid" => {
            vec![
                act.attr_float_or("alpha", 0.2).unwrap_or(0.2),
                act.attr_float_or("beta", 0.5).unwrap_or(0.5),
            ]
        }
        "Clip" => match clip_bounds(g, id) {
            Ok((lo, hi)) => vec![lo, hi],
            Err(e) => decline!("{e}"),
        },
        _ => Vec::new(),
    };
    let conv_node = g.node(conv);
    let mut fused = conv_node.clone();
    fused.op_type = "FusedConv".to_string();
    fused.domain = Some(MS_DOMAIN.to_string());
    fused.set_attr(Attribute::string("activation", &act.op_type));
    if !params.is_empty() {
        fused.set_attr(Attribute::floats("activation_params", params));
    }
    let inputs: Vec<Option<PatchValue>> = conv_node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(g, fused, inputs, out, &[conv, id]))
}

/// `Gemm → act` as `com.microsoft.FusedGemm`: the activation's attributes
/// go in with the `activation_` prefix, explicit even at their defaults.
fn gemm_rule(g: &Graph, id: NodeId, gemm: NodeId, x: ValueId) -> Outcome {
    let act = g.node(id);
    let attrs: Vec<(&str, f32)> = match act.op_type.as_str() {
        "Relu" | "Sigmoid" | "Tanh" => Vec::new(),
        "LeakyRelu" => vec![("alpha", act.attr_float_or("alpha", 0.01).unwrap_or(0.01))],
        "HardSigmoid" => vec![
            ("alpha", act.attr_float_or("alpha", 0.2).unwrap_or(0.2)),
            ("beta", act.attr_float_or("beta", 0.5).unwrap_or(0.5)),
        ],
        // Clip's bounds are inputs, which FusedGemm has no slot for.
        _ => return Outcome::Skip,
    };
    if g.is_graph_output(x) {
        decline!("Gemm output '{}' is a graph output", g.value(x).name);
    }
    let readers = g.reader_count(x);
    if readers != 1 {
        decline!("Gemm output has {readers} readers");
    }
    match conv_dtype(g, gemm) {
        Some(DataType::Float) => {}
        Some(d) => {
            decline!("dtype {d} not supported: ONNX Runtime's FusedGemm CPU kernel is float32 only")
        }
        None => decline!("element type of the Gemm is unknown"),
    }
    let gemm_node = g.node(gemm);
    let mut fused = gemm_node.clone();
    fused.op_type = "FusedGemm".to_string();
    fused.domain = Some(MS_DOMAIN.to_string());
    fused.set_attr(Attribute::string("activation", &act.op_type));
    for (name, v) in attrs {
        fused.set_attr(Attribute::float(&format!("activation_{name}"), v));
    }
    let inputs: Vec<Option<PatchValue>> = gemm_node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(g, fused, inputs, out, &[gemm, id]))
}

impl Pass for FuseConvActivation {
    fn name(&self) -> &'static str {
        "fuse-conv-activation"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        if !crate::util::targets_onnxruntime("fuse-conv-activation", "FusedConv", cx) {
            return Ok(0);
        }
        // A FusedConv in the file binds every provider to it. In a built-in
        // pipeline the pass fuses only when the user said the output runs
        // on the CPU provider (`--ep cpu`); any pipeline declines when a
        // named provider is not the CPU one.
        let providers = cx
            .side
            .get::<ExecutionProviders>()
            .cloned()
            .unwrap_or_default();
        if let Some(other) = providers.first_not_cpu() {
            let text = format!(
                "fuse-conv-activation left Conv + activation unfused: the output is for provider '{other}', and FusedConv loads in ONNX Runtime's CPU provider only (CUDA: Relu/Tanh, slower); ONNX Runtime fuses the pairs at load where it can"
            );
            cx.not_applied(text);
            return Ok(0);
        }
        if providers.0.is_empty() && cx.builtin_pipeline {
            // Without --ep the output is for the providers of the ONNX
            // Runtime installed here (--ep's documented default is CPU):
            // PyPI's `onnxruntime` has only the CPU one, so fuse as its
            // extended level does; with a GPU build, a FusedConv in the file
            // would bind every provider to it, so leave the pairs.
            match cx.side.get::<InstalledProviders>() {
                Some(installed) => {
                    if let Some(gpu) = installed.first_not_cpu() {
                        cx.detail(format!(
                            "fuse-conv-activation left Conv + activation unfused: no execution provider is named and the installed ONNX Runtime has {gpu}, where FusedConv fails or runs slower; naming the CPU provider fuses them"
                        ));
                        return Ok(0);
                    }
                    cx.detail(
                        "fuse-conv-activation fused for ONNX Runtime's CPU provider: no execution provider is named and the installed ONNX Runtime has no other; naming CUDA (or another provider) leaves the pairs unfused",
                    );
                }
                None => {
                    cx.detail(
                        "fuse-conv-activation left Conv + activation unfused: no execution provider is named and no ONNX Runtime is installed to say which it has, and a FusedConv in the file loads in ONNX Runtime's CPU provider only; naming the CPU provider fuses them",
                    );
                    return Ok(0);
                }
            }
        }
        let count = apply_rule(model, cx, &rule)?;
        if count > 0 && model.opset(MS_DOMAIN).is_none() {
            model.meta.opset_import.push(OperatorSetIdProto {
                domain: Some(MS_DOMAIN.to_string()),
                version: Some(1),
            });
        }
        Ok(count)
    }
}
