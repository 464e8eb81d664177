//! Folds inference BatchNormalization and per-channel Mul/Add into conv / Gemm weights.
//!
//! Inference-mode BatchNormalization, and Mul/Add by per-channel constants,
//! after a Conv / ConvTranspose / Gemm / MatMul with constant weights.
//!
//! ## What it does
//! `y = BatchNormalization(Conv(x, W, b), scale, B, mean, var)` becomes
//! `y = Conv(x, W', b')` with, per output channel `o`,
//! `s[o] = scale[o] / sqrt(var[o] + epsilon)`, `W'[o] = W[o] * s[o]` and
//! `b'[o] = (b[o] - mean[o]) * s[o] + B[o]` (`b = 0` when the conv has no
//! bias). The same for `ConvTranspose`, whose weight `[C, M/group, k...]` is
//! scaled along axis 1: element `W[c, j, ...]` belongs to output channel
//! `(c / (C/group)) * (M/group) + j`.
//!
//! Also folds `Mul(conv, c)` and `Add(conv, c)` (either operand order) when
//! `c` is a constant that varies along the channel axis only (`[M,1,1]`,
//! `[1,M,1,1]`, `[1]`, a scalar, ...), and `Mul`/`Add` by a per-column
//! constant (`[N]`, `[1,N]`, a scalar) after a `Gemm` with a constant `B`
//! (`transB` handled; the shift goes into `C`, `beta` becomes 1) or a `Mul`
//! after a `MatMul` with a constant 2-D `B` (an `Add` after a MatMul is
//! `fuse-matmul-add`'s pattern).
//!
//! And a scale before the layer: `Conv(Mul(x, c), W)` (or `Div(x, c)`,
//! ConvTranspose, Gemm, MatMul with a constant 2-D `B`) becomes
//! `Conv(x, W')` with `W'` scaled per input channel, for a constant `c` that
//! varies along the input-channel axis only (a scalar, `[1,C,1,1]`; for
//! Gemm/MatMul `[K]`), when the scaled value has no other reader. A scale
//! commutes with zero padding, so conv pads are fine. The weight
//! initializer is named `{layer}.{mul}.weight`. Likewise a shift before the
//! layer, `Conv(Add(x, c), W, b)` (or `Sub`), goes into the bias
//! (`b'[o] = b[o] + Σ W[o,..]·c`) when the conv does not pad (its padding
//! would be shifted too), and into Gemm's `C` (`C' = beta·C + alpha·c·B`).
//! Before a conv that pads, `Conv(x * s + t)` becomes `Conv(x + t/s)` with
//! the scale in the weight: one node fewer, the shift stays.
//!
//! The conv keeps its name and the output keeps the name of the value it
//! replaces (the BN / Mul / Add output). New initializers are named
//! `{conv}.{bn}.weight` and `{conv}.{bn}.bias` after the two node names; the
//! old initializers are never modified (another node may share them) and are
//! left for `eliminate-dead`.
//!
//! ## When it declines
//! - BN in training mode (`training_mode=1`), with `spatial=0`, or with its
//!   running-mean / running-var outputs read;
//! - the conv output has other readers or is a graph output (but a conv
//!   read only by BatchNormalizations folds each into its own copy of the
//!   conv when its weight is a ConstantOfShape or at most 256 KiB);
//! - a BN parameter, the conv weight, its bias, or the Gemm `C` is not a
//!   constant initializer;
//! - the weight dtype is not float32, float16 or float64;
//! - the weight is a `ConstantOfShape` over 1 MiB and the scale differs
//!   between channels (a uniform scale gives a new fill value; a weight
//!   within 1 MiB is written out scaled);
//! - the BN size (or the constant's channel dim) does not match the
//!   channel count, or the constant broadcasts along another axis than the
//!   channel axis, or would raise the output rank;
//! - a `ConvTranspose` whose input channels do not divide by `group`;
//! - a scale before the layer that is a GELU's final halving
//!   (`x * (1 + erf(x / sqrt 2)) * 0.5`: runtimes fuse a GELU only whole),
//!   that varies along another axis than the
//!   input channels, whose value has other readers, that divides by zero,
//!   or whose dtype differs from the weight's; a shift before a conv that
//!   pads.
//!
//! ## Numerics
//! Computed in f64 and rounded once to the weight dtype. The result differs
//! from the unfused graph by rounding only (a few ULP of the weights; for
//! float16 weights, float16 rounding of the scaled weights).
//!
//! ## Example
//! `c = Conv(x, W, b)`, `y = BatchNormalization(c, scale, B, mean, var)`
//! becomes `y = Conv(x, W', b')` with initializers `conv1.bn1.weight` and
//! `conv1.bn1.bias`.

crate::register_pass! {
    name: "fuse-conv-bn",
    kind: Fuse,
    file: "fuse_conv_bn.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseConvBn,
}

use infopt_ir::{DataType, Graph, Model, Node, NodeId, Patch, PatchValue, Tensor, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::{
    carry_type, dims_string, input, node_label, output, scale_f32_blocks, tensor_from_f64,
};
use crate::{decline, require, require_some};

pub struct FuseConvBn;

/// The layer whose weights absorb the per-channel affine map.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layer {
    Conv,
    ConvTranspose,
    Gemm { trans_b: bool },
    MatMul,
}

impl Layer {
    fn of(node: &Node) -> Option<Layer> {
        if !node.domain().is_empty() {
            return None;
        }
        Some(match node.op_type.as_str() {
            "Conv" => Layer::Conv,
            "ConvTranspose" => Layer::ConvTranspose,
            "Gemm" => Layer::Gemm {
                trans_b: node.attr_int_or("transB", 0).ok()? != 0,
            },
            "MatMul" => Layer::MatMul,
            _ => return None,
        })
    }

    fn is_conv(self) -> bool {
        matches!(self, Layer::Conv | Layer::ConvTranspose)
    }

    /// Index of the weight input.
    fn weight_slot(self) -> usize {
        1
    }
}

/// The constant weight of a layer, with what is needed to find the output
/// channel of each element. The values are read when the fold is built, once.
struct Weight {
    dtype: DataType,
    dims: Vec<i64>,
    data: WeightData,
    numel: usize,
    /// Output channels (Conv: M; Gemm/MatMul: N).
    channels: usize,
    group: usize,
}

/// Where a weight's values are.
enum WeightData {
    /// An initializer.
    Stored(Tensor),
    /// `ConstantOfShape(shape)` filled with `value`: the placeholder weights
    /// of ONNX's `light` models, too large for the folding budget. Scaled by
    /// a scale that is the same on every channel it stays a ConstantOfShape.
    Uniform { shape: ValueId, value: f64 },
}

/// A layer's scaled weight: an initializer, or a new `ConstantOfShape` fill
/// value (a one-element tensor) for the same shape input.
enum ScaledWeight {
    Stored(Tensor),
    Uniform { shape: ValueId, value: Tensor },
}

impl Weight {
    /// Output channel of flat element `i`.
    fn channel_of(&self, layer: Layer, i: usize) -> usize {
        let d = |k: usize| self.dims[k] as usize;
        match layer {
            Layer::Conv => i / (self.numel / d(0).max(1)).max(1),
            Layer::ConvTranspose => {
                let kernel: usize = self.dims[2..].iter().map(|&x| x as usize).product();
                let per_out = d(1);
                let c = i / (per_out * kernel).max(1);
                let j = (i / kernel.max(1)) % per_out.max(1);
                let in_per_group = d(0) / self.group;
                (c / in_per_group.max(1)) * per_out + j
            }
            Layer::Gemm { trans_b: true } => i / d(1).max(1),
            Layer::Gemm { trans_b: false } | Layer::MatMul => i % d(1).max(1),
        }
    }
}

/// Reads and checks the layer's weight; `Err` is the decline reason.
fn read_weight(g: &Graph, layer_node: NodeId, layer: Layer) -> Result<Weight, String> {
    let node = g.node(layer_node);
    let label = node_label(g, layer_node);
    let Some(wv) = input(g, layer_node, layer.weight_slot()) else {
        return Err(format!("{label} has no weight input"));
    };
    let (dtype, dims, data) = match g.constant(wv) {
        Some(w) => (w.dtype(), w.dims().to_vec(), WeightData::Stored(w.clone())),
        None => match uniform_weight(g, wv) {
            Some(u) => u,
            None => {
                return Err(format!(
                    "weight '{}' of {label} is not a constant",
                    g.value(wv).name
                ));
            }
        },
    };
    if !matches!(
        dtype,
        DataType::Float | DataType::Float16 | DataType::Double
    ) {
        return Err(format!("weight dtype {dtype} not supported"));
    }
    if dims.iter().any(|&d| d <= 0) {
        return Err(format!(
            "weight of {label} has shape {}",
            dims_string(&dims)
        ));
    }
    let Some(group) = crate::util::conv_group(node, &dims) else {
        return Err(format!("group of {label} does not split its weight into whole groups"));
    };
    let channels = match layer {
        Layer::Conv | Layer::ConvTranspose if dims.len() < 3 => {
            return Err(format!(
                "weight of {label} has rank {}; a conv weight has rank >= 3",
                dims.len()
            ));
        }
        Layer::Gemm { .. } | Layer::MatMul if dims.len() != 2 => {
            return Err(format!(
                "weight of {label} has rank {}; expected a 2-D weight",
                dims.len()
            ));
        }
        Layer::Conv => dims[0] as usize,
        Layer::ConvTranspose => {
            if !(dims[0] as usize).is_multiple_of(group) {
                return Err(format!(
                    "input channels {} of {label} do not divide by group {group}",
                    dims[0]
                ));
            }
            group * dims[1] as usize
        }
        Layer::Gemm { trans_b: true } => dims[0] as usize,
        Layer::Gemm { trans_b: false } | Layer::MatMul => dims[1] as usize,
    };
    let numel = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
        .ok_or_else(|| format!("weight of {label} has too many elements"))?;
    if let WeightData::Stored(w) = &data {
        let width = match dtype {
            DataType::Float16 => 2,
            DataType::Double => 8,
            _ => 4,
        };
        let stored = w.raw_bytes().map(|b| b.len()).unwrap_or(0) / width;
        if stored != numel {
            return Err(format!(
                "weight of {label} holds {stored} values for shape {}",
                dims_string(&dims)
            ));
        }
    }
    Ok(Weight {
        dtype,
        dims,
        data,
        numel,
        channels,
        group,
    })
}

/// `v = ConstantOfShape(shape)` with a constant `shape`: its dtype, dims and
/// fill value (ONNX's default: float32 zero).
fn uniform_weight(g: &Graph, v: ValueId) -> Option<(DataType, Vec<i64>, WeightData)> {
    let (p, _) = g.value(v).producer?;
    let node = g.node(p);
    if !(node.domain().is_empty() && node.op_type == "ConstantOfShape") {
        return None;
    }
    let shape = input(g, p, 0)?;
    let dims = g.constant(shape)?.to_i64_vec().ok()?;
    let (dtype, value) = match node.attr_tensor("value").ok()? {
        None => (DataType::Float, 0.0),
        Some(t) => {
            let vals = t.to_f64_vec().ok()?;
            if vals.len() != 1 {
                return None;
            }
            (t.dtype(), vals[0])
        }
    };
    Some((dtype, dims, WeightData::Uniform { shape, value }))
}

impl Weight {
    /// `W * scale[channel]` in the weight's dtype, each product computed in
    /// f64 and rounded once. A float32 Conv weight (the BatchNorm fold of
    /// every CNN) is scaled block by block from its bytes: each output
    /// channel is one contiguous block, and no f64 copy of the weight is made.
    fn scaled(&self, layer: Layer, scale: &[f64]) -> Result<ScaledWeight, String> {
        let tensor = match &self.data {
            WeightData::Stored(t) => t,
            WeightData::Uniform { shape, value } => {
                return self.scaled_uniform(layer, *shape, *value, scale);
            }
        };
        let raw = tensor.raw_bytes().map_err(|e| e.to_string())?;
        if self.dtype == DataType::Float
            && layer == Layer::Conv
            && self.channels > 0
            && let Some(out) = scale_f32_blocks(&raw, self.numel / self.channels, |o| scale[o])
        {
            // The old weight is read: its mapped pages need not stay resident.
            infopt_ir::external::release_if_mapped(&raw);
            return Ok(ScaledWeight::Stored(Tensor::from_raw(
                self.dtype,
                self.dims.clone(),
                bytes::Bytes::from(out),
            )));
        }
        let values = tensor.to_f64_vec().map_err(|e| e.to_string())?;
        let new_w: Vec<f64> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| v * scale[self.channel_of(layer, i)])
            .collect();
        tensor_from_f64(self.dtype, self.dims.clone(), &new_w)
            .map(ScaledWeight::Stored)
            .ok_or_else(|| format!("cannot write a {} weight", self.dtype))
    }

    /// A ConstantOfShape weight stays one when every channel's product,
    /// rounded to the weight's dtype, is the same value; otherwise the
    /// scaled weight is written out when one tensor's folding budget allows.
    fn scaled_uniform(
        &self,
        layer: Layer,
        shape: ValueId,
        value: f64,
        scale: &[f64],
    ) -> Result<ScaledWeight, String> {
        let rounded = |x: f64| tensor_from_f64(self.dtype, vec![1], &[x]);
        let first = scale.first().map_or(value, |s| value * s);
        let Some(one) = rounded(first) else {
            return Err(format!("cannot write a {} weight", self.dtype));
        };
        let same = scale.iter().all(|s| {
            rounded(value * s).is_some_and(|t| t.raw_bytes().ok() == one.raw_bytes().ok())
        });
        if same {
            return Ok(ScaledWeight::Uniform { shape, value: one });
        }
        // Channels differ: written out, within fold-constants' budget for
        // one tensor (an Inception block's BN variances are real values).
        let limit = crate::fold_constants::DEFAULT_MAX_TENSOR_BYTES as usize;
        if self.dtype.storage_bytes(self.numel).is_none_or(|b| b > limit) {
            return Err(format!(
                "the weight is a ConstantOfShape of {} elements and the scale differs between channels: written out, the scaled weight would pass the folding budget of {limit} bytes for one tensor",
                self.numel
            ));
        }
        let new_w: Vec<f64> = (0..self.numel)
            .map(|i| value * scale[self.channel_of(layer, i)])
            .collect();
        tensor_from_f64(self.dtype, self.dims.clone(), &new_w)
            .map(ScaledWeight::Stored)
            .ok_or_else(|| format!("cannot write a {} weight", self.dtype))
    }
}

/// Reads a float constant (BN parameter, Mul/Add operand, conv bias).
fn read_floats(t: &Tensor, what: &str) -> Result<Vec<f64>, String> {
    if !t.dtype().is_float() {
        return Err(format!("{what} has dtype {}", t.dtype()));
    }
    t.to_f64_vec()
        .map_err(|e| format!("cannot read {what}: {e}"))
}

/// Why the layer's output cannot be folded into, if it has other readers.
fn sole_reader_problem(g: &Graph, layer_node: NodeId, what: &str) -> Option<String> {
    let out = output(g, layer_node, 0)?;
    if g.is_graph_output(out) {
        return Some(format!(
            "{what} output '{}' is a graph output",
            g.value(out).name
        ));
    }
    let readers = g.reader_count(out);
    (readers != 1).then(|| format!("{what} output has {readers} readers"))
}

/// The rewrite: `layer` with weight `W * scale[ch]` and bias `b * scale + shift`,
/// producing the value `replaced`.
struct Fold<'a> {
    layer_node: NodeId,
    layer: Layer,
    weight: &'a Weight,
    scale: &'a [f64],
    shift: &'a [f64],
    /// True when the shift is all zero (a Mul): no bias needs creating.
    shift_is_zero: bool,
    /// The node whose output the fused layer takes over.
    tail: NodeId,
    replaced: ValueId,
    /// The layer has other readers: the fused layer is a copy, the layer stays.
    keep_layer: bool,
}

fn build(g: &Graph, f: &Fold, cx: &PassCx) -> Outcome {
    let node = g.node(f.layer_node);
    let w = f.weight;
    let m = w.channels;
    let prefix = format!("{}.{}", node_label(g, f.layer_node), node_label(g, f.tail));
    let new_w = match w.scaled(f.layer, f.scale) {
        Ok(t) => t,
        Err(e) => decline!("cannot scale the weight of {}: {e}", node_label(g, f.layer_node)),
    };
    let mut p = Patch::new();
    let w_init = match new_w {
        ScaledWeight::Stored(t) => p.add_initializer(&format!("{prefix}.weight"), t),
        ScaledWeight::Uniform { shape, value } => {
            let mut fill = Node::new("ConstantOfShape");
            fill.name = Some(format!("{prefix}.weight"));
            fill.set_attr(infopt_ir::Attribute::tensor("value", &value));
            let n = p.add_node(
                fill,
                vec![Some(PatchValue::Existing(shape))],
                vec![format!("{prefix}.weight")],
            );
            PatchValue::NewNode { node: n, output: 0 }
        }
    };
    let x = input(g, f.layer_node, 0).map(PatchValue::Existing);
    let mut fused = node.clone();
    let bias_slot = 2;
    let old_bias = input(g, f.layer_node, bias_slot);
    let bias = if f.layer.is_conv() {
        let b: Vec<f64> = match old_bias {
            Some(bv) => {
                let Some(t) = g.constant(bv) else {
                    decline!(
                        "bias '{}' of {} is not a constant",
                        g.value(bv).name,
                        node_label(g, f.layer_node)
                    );
                };
                match read_floats(t, "conv bias") {
                    Ok(v) if v.len() == m => v,
                    Ok(v) => decline!("conv bias has {} values for {m} channels", v.len()),
                    Err(e) => decline!("{e}"),
                }
            }
            None => vec![0.0; m],
        };
        if old_bias.is_none() && f.shift_is_zero {
            None
        } else {
            let nb: Vec<f64> = (0..m).map(|o| b[o] * f.scale[o] + f.shift[o]).collect();
            let t = require_some!(tensor_from_f64(w.dtype, vec![m as i64], &nb));
            Some(p.add_initializer(&format!("{prefix}.bias"), t))
        }
    } else if let Layer::Gemm { .. } = f.layer {
        // C' = beta * C * scale + shift, broadcast to [.., N]; beta becomes 1.
        let beta = node.attr_float_or("beta", 1.0).unwrap_or(1.0) as f64;
        match old_bias {
            None if f.shift_is_zero => None,
            None => {
                if cx.opset < 7 {
                    decline!("Gemm before opset 7 needs broadcast=1 for a [N] C");
                }
                let t = require_some!(tensor_from_f64(w.dtype, vec![m as i64], f.shift));
                fused.set_attr(infopt_ir::Attribute::float("beta", 1.0));
                Some(p.add_initializer(&format!("{prefix}.bias"), t))
            }
            Some(cv) => {
                let Some(t) = g.constant(cv) else {
                    decline!(
                        "C '{}' of {} is not a constant",
                        g.value(cv).name,
                        node_label(g, f.layer_node)
                    );
                };
                let c = match read_floats(t, "Gemm C") {
                    Ok(c) => c,
                    Err(e) => decline!("{e}"),
                };
                let cd = t.dims().to_vec();
                let (rows, cols) = match cd.as_slice() {
                    [] => (None, 1),
                    [n] => (None, *n as usize),
                    [r, n] => (Some(*r as usize), *n as usize),
                    _ => decline!("Gemm C has shape {}", dims_string(&cd)),
                };
                if cols != 1 && cols != m {
                    decline!(
                        "Gemm C has shape {} for {m} output columns",
                        dims_string(&cd)
                    );
                }
                if cx.opset < 7 && cd.as_slice() != [rows.unwrap_or(0) as i64, m as i64] {
                    decline!("Gemm before opset 7 broadcasts C only with broadcast=1");
                }
                let r = rows.unwrap_or(1);
                let mut nc = Vec::with_capacity(r * m);
                for i in 0..r {
                    for o in 0..m {
                        let cval = c[i * cols + if cols == 1 { 0 } else { o }];
                        nc.push(beta * cval * f.scale[o] + f.shift[o]);
                    }
                }
                let dims = match rows {
                    Some(r) => vec![r as i64, m as i64],
                    None => vec![m as i64],
                };
                let t = require_some!(tensor_from_f64(w.dtype, dims, &nc));
                fused.set_attr(infopt_ir::Attribute::float("beta", 1.0));
                Some(p.add_initializer(&format!("{prefix}.bias"), t))
            }
        }
    } else {
        // MatMul: only a Mul gets here.
        require!(f.shift_is_zero);
        None
    };
    let mut inputs = vec![x, Some(w_init)];
    if let Some(b) = bias {
        inputs.push(Some(b));
    }
    let n = p.add_node(fused, inputs, vec![String::new()]);
    let out = PatchValue::NewNode { node: n, output: 0 };
    p.replace(f.replaced, out);
    carry_type(&mut p, g, f.replaced, out);
    if !f.keep_layer {
        p.remove_node(f.layer_node);
    }
    p.remove_node(f.tail);
    Outcome::Rewrite(p)
}

fn fuse_bn(g: &Graph, bn: NodeId, cx: &PassCx) -> Outcome {
    let node = g.node(bn);
    let x = require_some!(input(g, bn, 0));
    let (conv, _) = require_some!(g.value(x).producer);
    let layer = require_some!(Layer::of(g.node(conv)));
    require!(layer.is_conv());
    let bn_label = node_label(g, bn);
    match node.attr_int("training_mode") {
        Ok(None) | Ok(Some(0)) => {}
        Ok(Some(v)) => decline!("training_mode={v}"),
        Err(e) => decline!("{e}"),
    }
    if node.attr_int_or("spatial", 1).unwrap_or(1) == 0 {
        decline!("spatial=0 (per-element statistics)");
    }
    for slot in 1..node.outputs.len() {
        if let Some(v) = output(g, bn, slot)
            && g.reader_count(v) > 0
        {
            decline!(
                "output {slot} ('{}') of {bn_label} is read (training statistics)",
                g.value(v).name
            );
        }
    }
    let keep_layer = match sole_reader_problem(g, conv, "conv") {
        None => false,
        Some(reason) if !all_readers_are_bns(g, conv) => decline!("{reason}"),
        Some(_) => true,
    };
    let mut params: Vec<Vec<f64>> = Vec::with_capacity(4);
    for (slot, what) in [(1, "scale"), (2, "bias"), (3, "mean"), (4, "var")] {
        let Some(v) = input(g, bn, slot) else {
            decline!("{what} of {bn_label} is missing");
        };
        let Some(t) = g.constant(v) else {
            decline!("{what} of {bn_label} is not a constant");
        };
        match read_floats(t, &format!("{what} of {bn_label}")) {
            Ok(vals) => params.push(vals),
            Err(e) => decline!("{e}"),
        }
    }
    let weight = match read_weight(g, conv, layer) {
        Ok(w) => w,
        Err(e) => decline!("{e}"),
    };
    let m = weight.channels;
    if keep_layer && !weight.cheap_to_copy() {
        decline!(
            "conv output has {} readers, all BatchNormalization, but a copy of the conv per reader would repeat its {}-element weight",
            g.reader_count(x),
            weight.numel
        );
    }
    for (vals, what) in params.iter().zip(["scale", "bias", "mean", "var"]) {
        if vals.len() != m {
            decline!(
                "channel count {m} does not match BN size {} ({what} of {bn_label})",
                vals.len()
            );
        }
    }
    let eps = node.attr_float_or("epsilon", 1e-5).unwrap_or(1e-5) as f64;
    let (scale_p, bias_p, mean, var) = (&params[0], &params[1], &params[2], &params[3]);
    let mut scale = Vec::with_capacity(m);
    for o in 0..m {
        let denom = (var[o] + eps).sqrt();
        if !(denom.is_finite() && denom > 0.0) {
            decline!(
                "var + epsilon of channel {o} of {bn_label} is {}",
                var[o] + eps
            );
        }
        scale.push(scale_p[o] / denom);
    }
    let shift: Vec<f64> = (0..m).map(|o| bias_p[o] - mean[o] * scale[o]).collect();
    let replaced = require_some!(output(g, bn, 0));
    build(
        g,
        &Fold {
            layer_node: conv,
            layer,
            weight: &weight,
            scale: &scale,
            shift: &shift,
            shift_is_zero: false,
            tail: bn,
            replaced,
            keep_layer,
        },
        cx,
    )
}

/// A conv whose output several BatchNormalizations read (an Inception
/// block's 1x1 convs, made identical by placeholder weights and merged by
/// `eliminate-duplicates`): each BN folds into its own copy of the conv, and
/// the conv goes with the last one. Not for a graph output.
fn all_readers_are_bns(g: &Graph, conv: NodeId) -> bool {
    let Some(out) = output(g, conv, 0) else {
        return false;
    };
    !g.is_graph_output(out)
        && g.input_uses(out).all(|(n, _)| {
            let r = g.node(n);
            r.domain().is_empty() && r.op_type == "BatchNormalization"
        })
}

/// Largest weight copied for a conv shared by BatchNormalizations.
const MAX_COPIED_WEIGHT_BYTES: usize = 256 << 10;

impl Weight {
    /// A copy per reader stays small: a ConstantOfShape, or a weight of at
    /// most [`MAX_COPIED_WEIGHT_BYTES`].
    fn cheap_to_copy(&self) -> bool {
        match self.data {
            WeightData::Uniform { .. } => true,
            WeightData::Stored(_) => {
                self.dtype.storage_bytes(self.numel).unwrap_or(usize::MAX)
                    <= MAX_COPIED_WEIGHT_BYTES
            }
        }
    }
}

/// Rank of the layer's output when it can be known.
fn output_rank(g: &Graph, layer_node: NodeId, layer: Layer, weight: &Weight) -> Option<usize> {
    match layer {
        Layer::Conv | Layer::ConvTranspose => Some(weight.dims.len()),
        Layer::Gemm { .. } => Some(2),
        Layer::MatMul => {
            let a = input(g, layer_node, 0)?;
            let r = g.value_type(a)?.shape?.len();
            Some(if r == 1 { 1 } else { r })
        }
    }
}

fn fuse_affine(g: &Graph, id: NodeId, cx: &PassCx) -> Outcome {
    let node = g.node(id);
    let is_mul = node.op_type == "Mul";
    require!(node.inputs.len() == 2);
    let (layer_node, layer, c_value) = {
        let mut found = None;
        for (a, b) in [(0, 1), (1, 0)] {
            let (Some(x), Some(c)) = (input(g, id, a), input(g, id, b)) else {
                continue;
            };
            if g.constant(c).is_none() {
                continue;
            }
            let Some((p, _)) = g.value(x).producer else {
                continue;
            };
            if let Some(layer) = Layer::of(g.node(p)) {
                found = Some((p, layer, c));
                break;
            }
        }
        require_some!(found)
    };
    // Add after MatMul becomes a Gemm in fuse-matmul-add.
    require!(is_mul || layer != Layer::MatMul);
    let what = match layer {
        Layer::Conv => "conv",
        Layer::ConvTranspose => "conv-transpose",
        Layer::Gemm { .. } => "Gemm",
        Layer::MatMul => "MatMul",
    };
    if !layer.is_conv() {
        // The pattern is a Gemm / MatMul with a constant weight (not, e.g.,
        // an attention score MatMul of two activations).
        require!(
            input(g, layer_node, layer.weight_slot())
                .and_then(|w| g.constant(w))
                .is_some()
        );
    }
    if let Some(reason) = sole_reader_problem(g, layer_node, what) {
        decline!("{reason}");
    }
    let weight = match read_weight(g, layer_node, layer) {
        Ok(w) => w,
        Err(e) => decline!("{e}"),
    };
    let c = require_some!(g.constant(c_value));
    let c_name = &g.value(c_value).name;
    if c.dtype() != weight.dtype {
        decline!(
            "constant '{c_name}' has dtype {} but the weight has {}",
            c.dtype(),
            weight.dtype
        );
    }
    let vals = match read_floats(c, &format!("constant '{c_name}'")) {
        Ok(v) => v,
        Err(e) => decline!("{e}"),
    };
    let cd = c.dims().to_vec();
    let m = weight.channels;
    let Some(rank) = output_rank(g, layer_node, layer, &weight) else {
        if cd.len() > 1 {
            decline!(
                "rank of the {what} output is unknown; constant '{c_name}' of shape {} could raise it",
                dims_string(&cd)
            );
        }
        // Rank >= 1: a [1] or [N] constant lines up with the last axis.
        return affine_rewrite(g, id, layer_node, layer, &weight, &cd, &vals, is_mul, cx);
    };
    if cd.len() > rank {
        decline!(
            "constant '{c_name}' of shape {} would raise the rank-{rank} {what} output",
            dims_string(&cd)
        );
    }
    let channel_axis = if layer.is_conv() { 1 } else { rank - 1 };
    for (j, &d) in cd.iter().enumerate() {
        let axis = rank - cd.len() + j;
        if d == 1 || (axis == channel_axis && d as usize == m) {
            continue;
        }
        decline!(
            "constant '{c_name}' of shape {} broadcasts along axis {axis} of the {what} output, not only the channel axis {channel_axis} (size {m})",
            dims_string(&cd)
        );
    }
    affine_rewrite(g, id, layer_node, layer, &weight, &cd, &vals, is_mul, cx)
}

#[allow(clippy::too_many_arguments)]
fn affine_rewrite(
    g: &Graph,
    id: NodeId,
    layer_node: NodeId,
    layer: Layer,
    weight: &Weight,
    cd: &[i64],
    vals: &[f64],
    is_mul: bool,
    cx: &PassCx,
) -> Outcome {
    let m = weight.channels;
    let per_channel: Vec<f64> = if vals.len() == 1 {
        vec![vals[0]; m]
    } else if vals.len() == m {
        vals.to_vec()
    } else {
        decline!(
            "constant of shape {} does not have 1 or {m} values",
            dims_string(cd)
        );
    };
    let (scale, shift) = if is_mul {
        (per_channel, vec![0.0; m])
    } else {
        (vec![1.0; m], per_channel)
    };
    let replaced = require_some!(output(g, id, 0));
    build(
        g,
        &Fold {
            layer_node,
            layer,
            weight,
            scale: &scale,
            shift: &shift,
            shift_is_zero: is_mul,
            tail: id,
            replaced,
            keep_layer: false,
        },
        cx,
    )
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty());
    match node.op_type.as_str() {
        "BatchNormalization" => fuse_bn(g, id, cx),
        "Mul" | "Add" => fuse_affine(g, id, cx),
        "Conv" | "ConvTranspose" | "Gemm" | "MatMul" => {
            match crate::scale_into_weights::fold_input_shift(g, id, cx.opset) {
                Outcome::Rewrite(p) => Outcome::Rewrite(p),
                // A padded conv: the scale can still move under the shift.
                Outcome::Decline(why) => match crate::scale_into_weights::fold_scale_under_shift(g, id) {
                    Outcome::Rewrite(p) => Outcome::Rewrite(p),
                    _ => Outcome::Decline(why),
                },
                Outcome::Skip => crate::scale_into_weights::fold_input_scale(g, id),
            }
        }
        _ => Outcome::Skip,
    }
}

impl Pass for FuseConvBn {
    fn name(&self) -> &'static str {
        "fuse-conv-bn"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
