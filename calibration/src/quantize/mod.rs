//! Quantizes a float model to INT8 with QuantizeLinear/DequantizeLinear pairs placed for the target runtime.
//!
//! ## What it does
//! Reads one clipping range (amax) per tensor, from the pipeline's side data
//! (`infopt calibrate` / `optimize --int8`) or from the `ranges` file (the
//! `ranges.json` a calibration run writes, a minimal
//! `{"tensors": {"name": {"amax": 1.5}}}`, or a TensorRT calibration cache /
//! ONNX Runtime calibration table), and inserts Q/DQ pairs:
//!
//! - `tensorrt`, `portable` (TensorRT's explicit-quantization placement):
//!   symmetric INT8 (zero point 0, `scale = amax / 127`) on the inputs of
//!   Conv, ConvTranspose, Gemm and MatMul; weights per output channel (Conv
//!   axis 0, ConvTranspose axis 1, Gemm axis 1 or 0 with `transB`, MatMul
//!   `[K, N]` axis 1); the residual input of an Add fed by a quantized layer
//!   (so TensorRT fuses the Add into the layer); pooling inputs; Concat
//!   inputs with one shared scale (the largest range). Layer outputs are not
//!   quantized. Biases stay float.
//! - `onnxruntime` (the groups ORT's CPU QDQ transformer turns into
//!   QLinearConv / QGemm / QLinearMatMul / QLinearAdd / QLinearConcat /
//!   QLinearGlobalAveragePool): layer inputs and outputs are quantized (an
//!   output followed by a Relu is quantized after the Relu with the lowest
//!   zero point and `scale = amax / 255`, so ORT drops the Relu), biases
//!   become INT32 (`scale = s_x * s_w[c]`) behind a DQ, and MaxPool / Reshape
//!   / Flatten keep their input's parameters so ORT runs them on INT8.
//!   Activations are UINT8 by default (a signed tensor gets zero point 128
//!   and `scale = amax / 127`: the same symmetric range). ORT's x86 kernels
//!   are U8S8 and ORT rewrites INT8 activation pairs to UINT8 itself, but not
//!   all of them (ORT 1.31: a Q read by several DQs kept INT8), and a Conv
//!   whose input and output types then differ is not fused.
//!   Sigmoid, Mul (SiLU, squeeze-excite) and LeakyRelu between quantized
//!   tensors become QLinearSigmoid / QLinearMul / QLinearLeakyRelu, so a
//!   MobileNet/EfficientNet block runs as one integer chain
//!   (`float_depthwise: true` keeps depthwise convolutions float,
//!   `float_elementwise: true` keeps Sigmoid / LeakyRelu / Mul float).
//!   The output of an op ORT runs in float (a fused SiLU, HardSwish) gets a
//!   pair too where no layer but a pool reads it and every reader would
//!   then run integer into a tensor already quantized (a squeeze-excite
//!   block's pool and Mul): left float, they ran in float behind two
//!   Transposes each, ORT laying QLinearConv out NHWC.
//!   A `ReduceMean` over the spatial axes of a 4-D (or higher) tensor,
//!   keeping them (timm's squeeze-excite, `x.mean((2, 3), keepdim=True)`),
//!   is placed as a pool and, where it runs integer, rewritten as the
//!   `GlobalAveragePool` it computes, keeping its name: ORT has an integer
//!   kernel for that one only (timm-style EfficientNet-B0 on `portable`:
//!   1.14x -> 1.33x float).
//!
//! Each activation gets one Q→DQ pair shared by all its quantized readers.
//! Names: `{tensor}_q`, `{tensor}_dq`, `{tensor}_scale`, `{tensor}_zero_point`,
//! `{weight}_quantized` (INT8 weights). A model below opset 13 is raised to
//! 13 (per-channel DequantizeLinear needs `axis`): from 11 or 12, rewriting
//! Split / Squeeze / Unsqueeze / ReduceSum / Softmax / Dropout to their
//! opset-13 form; from 7 to 10 (pytorch 1.2's opset 9), by the converter of
//! `upgrade-opset` (what `--upgrade-opset 13` runs).
//!
//! Options: `ranges: FILE`; `weights: int8` (default; INT8 initializers + DQ,
//! about 4× smaller) or `qdq` (FP32 weights + Q + DQ); `exclude:` a list of
//! `{name: N}`, `{op: T}` or `{regex: R}` (node names) kept float;
//! `keep_first_last: true` keeps the first and last weighted layers float;
//! the pipeline's precision map (`--precision NAME_OR_OP=fp32|fp16|bf16`,
//! matched as `convert-float16` matches it: an op type, or a node name
//! exactly or as a regex of the whole name) keeps its nodes float the same
//! way, reported as kept by the user;
//! `activations: uint8 | int8` (ONNX Runtime only; default uint8);
//! `float_depthwise: true`, `float_elementwise: true` (ONNX Runtime only).
//!
//! ## When it declines
//! - the model already holds QuantizeLinear/DequantizeLinear nodes (the
//!   whole pass declines);
//! - per layer (reported with the layer's name): no range for an input,
//!   excluded, kept float by the precision map, first/last layer with `keep_first_last`, a BatchNormalization
//!   reads the layer's output (run `fuse-conv-bn` first), weight not a float32
//!   constant, on ONNX Runtime a Conv whose output is a graph output or has no
//!   range, depthwise Conv on ONNX Runtime with `float_depthwise`. Softmax,
//!   LayerNormalization and other normalizations are never quantized.
//! - Nodes inside subgraphs (If/Loop/Scan bodies) are left float.
//! - Fails (does not decline) when the opset cannot be raised to 13 exactly,
//!   naming the node, when no ranges are given, when an override of the
//!   precision map selects no node of the graph it sees (the passes before
//!   it removed what the override named), or when an override to int8 puts
//!   none of its nodes in INT8 (a Softmax, a layer without a range), with
//!   the reason.
//!
//! ## Numerics
//! Approximate by design: activations are rounded to 255 levels within
//! `[-amax, amax]` (values beyond are clipped), weights to `[-127, 127]` per
//! channel with `scale = max|w| / 127`; INT8 weights are what QuantizeLinear
//! computes (round half to even), so `weights: int8` and `weights: qdq` give
//! the same results. Verify with a tolerance (cosine similarity), not ULPs.
//!
//! ## Example
//! `- quantize-int8: { ranges: ranges.json, weights: int8, exclude: [{op: Gemm}], keep_first_last: false }`

pub mod opset;
pub mod placement;
pub mod qdq;

use std::path::{Path, PathBuf};

use infopt_ir::{DataType, Model, NodeId, ValueId};
use infopt_passes::{Pass, PassCx, PassError, Target};

use crate::Amax;
use placement::{Matcher, Settings};
use qdq::WeightStorage;

infopt_passes::register_pass! {
    name: "quantize-int8",
    kind: Shape,
    file: "mod.rs",
    options: QuantizeOptions,
    build: |o: &QuantizeOptions| QuantizeInt8 { options: o.clone() },
    numerics: Quantize,
}

/// Adds `quantize-int8` to the pass registry (it lives outside infopt-passes).
pub fn register() {
    infopt_passes::registry::register(&INFO);
}

#[derive(serde::Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WeightsOption {
    #[default]
    Int8,
    Qdq,
}

#[derive(serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ActivationOption {
    Int8,
    Uint8,
}

/// One exclusion: exactly one of the fields.
#[derive(serde::Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Exclude {
    pub name: Option<String>,
    pub op: Option<String>,
    pub regex: Option<String>,
}

#[derive(serde::Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuantizeOptions {
    #[serde(default)]
    pub ranges: Option<PathBuf>,
    #[serde(default)]
    pub weights: WeightsOption,
    #[serde(default)]
    pub exclude: Vec<Exclude>,
    #[serde(default)]
    pub keep_first_last: bool,
    /// Default: uint8 on ONNX Runtime (x86 MLAS runs U8S8 kernels; ORT
    /// rewrites INT8 activation pairs to UINT8 itself, but not all of them,
    /// which breaks fusions), int8 elsewhere.
    #[serde(default)]
    pub activations: Option<ActivationOption>,
    #[serde(default)]
    pub float_depthwise: bool,
    /// ONNX Runtime: Sigmoid, LeakyRelu and Mul between quantized tensors
    /// stay float (no QLinearSigmoid / QLinearLeakyRelu / QLinearMul).
    #[serde(default)]
    pub float_elementwise: bool,
    /// Calibrate inside the pipeline on this data (a folder of .npz/.npy
    /// samples, a stacked .npz, an image folder with `preprocess`, or
    /// `random:N`): the command runs the passes before this step, calibrates
    /// the model as it is at this step, and hands the ranges over. The pass
    /// itself never runs a model.
    #[serde(default)]
    pub data: Option<String>,
    /// Image preprocessing YAML for `data` (an image folder).
    #[serde(default)]
    pub preprocess: Option<PathBuf>,
    /// Range method for `data`: minmax | percentile | entropy (default) | mse.
    #[serde(default)]
    pub method: Option<String>,
    /// Percentile for `method: percentile` (default 99.99).
    #[serde(default)]
    pub percentile: Option<f64>,
    /// Calibration samples taken from `data` (default 256); the samples after
    /// them are held out to measure accuracy.
    #[serde(default)]
    pub samples: Option<usize>,
}

pub struct QuantizeInt8 {
    pub options: QuantizeOptions,
}

/// Reads a range file: `ranges.json` from `infopt calibrate` (checked by
/// [`crate::RangeTable`]: schema version, values), a minimal
/// `{"tensors": {"name": {"amax": 1.5}}}` table, or a TensorRT calibration
/// cache / ONNX Runtime calibration table (read by [`crate::cache`]).
pub fn read_ranges(path: &Path) -> Result<Amax, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read ranges file {}: {e}", path.display()))?;
    let json = std::str::from_utf8(&bytes).ok().and_then(|t| {
        serde_json::from_str::<serde_json::Value>(t)
            .ok()
            .map(|v| (t, v))
    });
    match json {
        Some((text, v)) if v.get("schema_version").is_some() => {
            crate::RangeTable::from_json(text, path)
                .map(|t| t.to_amax())
                .map_err(|e| e.to_string())
        }
        Some((text, v)) if v.get("tensors").is_some() => {
            parse_ranges(text).map_err(|e| format!("ranges file {}: {e}", path.display()))
        }
        _ => crate::cache::parse_ranges(&bytes, path)
            .map(|r| r.to_amax())
            .map_err(|e| e.to_string()),
    }
}

pub fn parse_ranges(text: &str) -> Result<Amax, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let Some(tensors) = v.get("tensors").and_then(|t| t.as_object()) else {
        return Err(
            "no \"tensors\" object (expected {\"tensors\": {\"name\": {\"amax\": 1.5}}})".into(),
        );
    };
    let mut amax = Amax::default();
    for (name, entry) in tensors {
        let a = entry
            .get("amax")
            .and_then(|a| a.as_f64())
            .ok_or_else(|| format!("tensor '{name}' has no numeric \"amax\""))?;
        if !(a.is_finite() && a >= 0.0) {
            return Err(format!(
                "tensor '{name}': amax must be finite and >= 0, got {a}"
            ));
        }
        amax.insert(name.clone(), a as f32);
    }
    Ok(amax)
}

impl QuantizeOptions {
    fn matchers(&self) -> Result<Vec<Matcher>, String> {
        self.exclude
            .iter()
            .map(|e| match (&e.name, &e.op, &e.regex) {
                (Some(n), None, None) => Ok(Matcher::Name(n.clone())),
                (None, Some(o), None) => Ok(Matcher::Op(o.clone())),
                (None, None, Some(r)) => regex_lite::Regex::new(r)
                    .map(Matcher::Regex)
                    .map_err(|err| format!("quantize-int8: exclude regex '{r}': {err}")),
                _ => Err(
                    "quantize-int8: each exclude entry takes exactly one of name, op, regex".into(),
                ),
            })
            .collect()
    }
}

fn name_of(model: &Model, id: NodeId) -> String {
    model.graph.node(id).name_or_op().to_string()
}

impl Pass for QuantizeInt8 {
    fn name(&self) -> &'static str {
        "quantize-int8"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let o = &self.options;
        // Ranges the caller gives (`optimize --int8` reads the step's
        // `ranges:` file itself and adds the derived ones, see
        // `crate::derived`) win over reading the file again.
        let amax = match (&o.ranges, cx.side.get::<Amax>()) {
            (_, Some(a)) => a.clone(),
            (Some(path), None) => read_ranges(path).map_err(PassError::Config)?,
            (None, None) => {
                return Err(PassError::Config(
                    "quantize-int8 needs ranges: give `ranges: FILE` (a ranges.json from `infopt calibrate`) or run `optimize --int8`".into(),
                ));
            }
        };
        if o.activations == Some(ActivationOption::Uint8) && cx.target != Target::Onnxruntime {
            return Err(PassError::Config(format!(
                "quantize-int8: activations: uint8 is for target onnxruntime; {} takes symmetric int8",
                cx.target
            )));
        }
        // Whether a ReduceMean is a spatial mean ONNX Runtime can run in
        // INT8 depends on its rank (`placement::is_spatial_mean`), and a
        // pipeline may reach this step with no pass before it that typed it.
        if cx.target == Target::Onnxruntime && model.graph.nodes().any(|(_, n)| n.is("ReduceMean"))
        {
            infopt_ir::infer::infer_shapes(model);
        }
        let g = &model.graph;
        if let Some((id, n)) = g
            .nodes()
            .find(|(_, n)| matches!(n.op_type.as_str(), "QuantizeLinear" | "DequantizeLinear"))
        {
            cx.decline(
                n.name_or_op(),
                "the model is already quantized (it has QuantizeLinear/DequantizeLinear nodes)",
            );
            let _ = id;
            return Ok(0);
        }
        let mut exclude = o.matchers().map_err(PassError::Config)?;
        // The precision map's float overrides keep their nodes out of INT8,
        // as `convert-float16` keeps them out of float16.
        let user_kept = match cx.side.get::<infopt_passes::PrecisionMap>() {
            Some(map) => {
                infopt_passes::precision::check::check_at_pass(map, model, "quantize-int8")
                    .map_err(PassError::Config)?;
                let kept = map.kept_float_nodes(g);
                if !kept.is_empty() {
                    exclude.push(placement::Matcher::Precision(map.clone()));
                }
                kept
            }
            None => Vec::new(),
        };
        let settings = Settings {
            target: cx.target,
            exclude,
            keep_first_last: o.keep_first_last,
            ort_activation: match o.activations {
                Some(ActivationOption::Int8) => DataType::Int8,
                Some(ActivationOption::Uint8) | None => DataType::Uint8,
            },
            ort_float_depthwise: o.float_depthwise,
            ort_float_elementwise: o.float_elementwise,
        };
        let plan = placement::plan(g, &amax, &settings).map_err(PassError::Model)?;
        if let Some(map) = cx.side.get::<infopt_passes::PrecisionMap>() {
            int8_overrides_take_effect(g, map, &plan).map_err(PassError::Config)?;
        }
        if !user_kept.is_empty() {
            cx.note(format!(
                "quantize-int8: {} node(s) {}, their weights float: {}",
                user_kept.len(),
                placement::KEPT_BY_USER,
                preview(&user_kept)
            ));
        }
        for (at, reason) in &plan.skipped {
            cx.decline(at, reason);
        }
        if plan.acts.is_empty() && plan.weights.is_empty() {
            cx.note(format!(
                "quantize-int8: nothing quantized ({} ranges, {} layers skipped)",
                amax.len(),
                plan.skipped.len()
            ));
            return Ok(0);
        }
        if settings.target == Target::Onnxruntime {
            let pooled = placement::as_global_average_pool(&mut model.graph, &plan);
            if !pooled.is_empty() {
                cx.note(format!(
                    "quantize-int8: {} ReduceMean(s) over the spatial axes run as GlobalAveragePool, which ONNX Runtime runs in INT8 between a DQ and a Q ({})",
                    pooled.len(),
                    preview(&pooled)
                ));
            }
        }
        // Q/DQ exist from opset 10; per-channel scales (and INT8 models that
        // load everywhere) need 13. From 11 and 12 the few ops that changed
        // are rewritten here; older models (pytorch 1.2's opset 9, an SSD
        // face detector's) go through the whole converter of `upgrade-opset`,
        // which `--upgrade-opset 13` runs, instead of being refused.
        let from = model.opset("").unwrap_or(1);
        if from < 11 {
            infopt_passes::upgrade_opset::upgrade(model, 13).map_err(|e| {
                PassError::Model(format!(
                    "quantize-int8: per-channel INT8 needs opset 13: {e}"
                ))
            })?;
            cx.note(format!(
                "quantize-int8: default-domain opset raised from {from} to 13 for per-channel DequantizeLinear (the conversion --upgrade-opset 13 makes)"
            ));
            cx.opset = 13;
        } else if from < 13 {
            let changes = opset::upgrade_to_13(model)
                .map_err(|e| PassError::Model(format!("quantize-int8: {e}")))?;
            cx.note(format!(
                "quantize-int8: default-domain opset raised to 13 for per-channel DequantizeLinear{}",
                if changes.is_empty() { String::new() } else { format!(" ({})", changes.join("; ")) }
            ));
            cx.opset = 13;
        }
        let g = &model.graph;
        let storage = match o.weights {
            WeightsOption::Int8 => WeightStorage::Int8,
            WeightsOption::Qdq => WeightStorage::Qdq,
        };
        let mut p = infopt_ir::Patch::new();
        let mut weight_scales = std::collections::BTreeMap::new();
        for (&w, wq) in &plan.weights {
            if let Some(s) =
                qdq::add_weight_qdq(&mut p, g, w, wq.axis, storage, placement::uses_of(&wq.uses))
            {
                weight_scales.insert(w, s);
            }
        }
        let mut biases = 0;
        for b in &plan.biases {
            let (Some(act), Some(ws)) = (plan.acts.get(&b.act), weight_scales.get(&b.weight))
            else {
                continue;
            };
            let user = infopt_ir::Use {
                node: b.layer,
                slot: infopt_ir::Slot::Input(b.slot),
            };
            if qdq::add_bias_dq(&mut p, g, b.bias, act.params.scale, ws, user).is_some() {
                biases += 1;
            }
        }
        for (&t, a) in &plan.acts {
            qdq::add_activation_qdq(&mut p, g, t, a.params, placement::uses_of(&a.uses));
        }
        let acts: Vec<String> = plan.acts.keys().map(|&t| g.value(t).name.clone()).collect();
        let replaced: Vec<ValueId> = plan
            .weights
            .keys()
            .chain(plan.biases.iter().map(|b| &b.bias))
            .copied()
            .collect();
        let layers: Vec<String> = plan.layers.iter().map(|&l| name_of(model, l)).collect();
        model.graph.apply(p)?;
        // Float weights no node reads any more (INT8 storage) go now: they
        // are most of the file.
        for v in replaced {
            let g = &mut model.graph;
            if g.try_value(v).is_some_and(|x| x.uses.is_empty()) && !g.is_graph_output(v) {
                g.remove_value(v);
            }
        }
        cx.note(format!(
            "quantize-int8 ({}): {} layers in INT8 ({}); {} activations with Q/DQ ({}); {} weights per channel ({}){}; {} skipped",
            cx.target,
            layers.len(),
            preview(&layers),
            acts.len(),
            preview(&acts),
            plan.weights.len(),
            match storage {
                WeightStorage::Int8 => "INT8 initializers",
                WeightStorage::Qdq => "FP32 + Q/DQ",
            },
            if biases > 0 { format!("; {biases} INT32 biases") } else { String::new() },
            plan.skipped.len(),
        ));
        Ok(plan.acts.len() + plan.weights.len())
    }
}

/// Every user override to int8 puts at least one of the nodes it selects
/// (first match) in INT8: a weighted layer quantized, or an op reading a
/// quantized input. An override none of whose nodes can be (a Softmax, a
/// layer without a range) would change nothing: refused with the reason.
fn int8_overrides_take_effect(
    g: &infopt_ir::Graph,
    map: &infopt_passes::PrecisionMap,
    plan: &placement::Plan,
) -> Result<(), String> {
    use infopt_passes::Precision;
    let in_int8 = |id: NodeId| {
        plan.layers.contains(&id)
            || plan
                .acts
                .values()
                .any(|a| a.uses.iter().any(|&(u, _)| u == id))
    };
    for o in map
        .overrides
        .iter()
        .filter(|o| o.why.is_none() && o.to == Precision::Int8)
    {
        let selected: Vec<(NodeId, &infopt_ir::Node)> = g
            .nodes()
            .filter(|(_, n)| map.override_for(n).is_some_and(|f| std::ptr::eq(f, o)))
            .collect();
        let Some(&(_, first)) = selected.first() else {
            continue;
        };
        if selected.iter().any(|&(id, _)| in_int8(id)) {
            continue;
        }
        let label = first.name_or_op();
        let reason = plan
            .skipped
            .iter()
            .find(|(at, _)| at.ends_with(&format!("'{label}'")) || at == label)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| {
                format!(
                    "quantize-int8 quantizes Conv, ConvTranspose, Gemm and MatMul layers and the inputs that lead into them; the {} stays float",
                    first.op_type
                )
            });
        return Err(format!(
            "the precision override for {} (int8) puts none of its nodes in INT8: {label}: {reason}",
            o.selector
        ));
    }
    Ok(())
}

fn preview(names: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut s = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(", … {} more", names.len() - SHOWN));
    }
    s
}
