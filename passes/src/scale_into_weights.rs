//! The `fuse-conv-bn` rules for a scale or shift *before* a layer (a shift
//! is described at [`fold_input_shift`]). `Conv(x * c, W)` is
//! `Conv(x, W')` with `W'` scaled per input channel, for `c` a constant that
//! varies along the input-channel axis only (or a scalar); `x / c` is
//! `x * (1/c)`. Zero padding commutes with the scale (0·c = 0), so Conv pads
//! need no care; an additive constant would not commute and is not handled.
//! Input channel of a weight element: Conv `W[M, C/group, k..]` element
//! `[o, j, ..]` reads channel `(o / (M/group))·(C/group) + j`; ConvTranspose
//! `W[C, M/group, k..]` element `[c, ..]` reads channel `c`; Gemm/MatMul `B`
//! row `k` (column `k` with `transB`) reads column `k` of `A`.

use infopt_ir::{DataType, Graph, NodeId, Patch, PatchValue, Tensor, ValueId};

use crate::rule::Outcome;
use crate::util::{
    carry_type, conv_group, dims_string, input, node_label, output, scale_f32_blocks,
    tensor_from_f64,
};
use crate::{decline, require, require_some};

fn rank(g: &Graph, v: ValueId) -> Option<usize> {
    g.value_type(v)?.shape.map(|s| s.len())
}

/// Per-input-channel factors of constant `c` (length `channels`) for a layer
/// whose data input has rank `r` and channels on axis `axis`; `Err` says why
/// `c` is not of that form.
fn channel_factors(c: &Tensor, r: usize, axis: usize, channels: usize) -> Result<Vec<f64>, String> {
    let dims = c.dims();
    if dims.len() > r {
        return Err(format!(
            "scale of shape {} would raise the rank",
            dims_string(dims)
        ));
    }
    let values = c.to_f64_vec().map_err(|e| e.to_string())?;
    let offset = r - dims.len();
    for (k, &d) in dims.iter().enumerate() {
        if d != 1 && (k + offset != axis || d as usize != channels) {
            return Err(format!(
                "scale of shape {} varies along an axis other than the {channels} input channels",
                dims_string(dims)
            ));
        }
    }
    Ok(match values.len() {
        1 => vec![values[0]; channels],
        n if n == channels => values,
        n => return Err(format!("scale holds {n} values for {channels} channels")),
    })
}

/// Rewrites `layer(Mul(x, c), W, ..)` (or `Div(x, c)`) at layer node `id`.
/// Whether `v` is `x * (1 + erf(...))`, a GELU before its halving: a
/// `Mul` one of whose operands is an `Add` of an `Erf`. Folding the 0.5
/// into the next layer's weight breaks the pattern runtimes fuse (the
/// README's transformer block in ONNX Runtime at one thread, [4, 64]:
/// 0.12 ms as exported, 0.16 ms with the halving folded, the GELU left as
/// Div, Erf, Add and Mul).
fn ends_erf_gelu(g: &Graph, v: infopt_ir::ValueId) -> bool {
    let producer = |v: infopt_ir::ValueId| g.value(v).producer.map(|(p, _)| g.node(p));
    let Some(mul) = producer(v).filter(|n| n.is("Mul") && n.domain().is_empty()) else {
        return false;
    };
    mul.inputs.iter().flatten().any(|&a| {
        producer(a).is_some_and(|add| {
            add.is("Add")
                && add
                    .inputs
                    .iter()
                    .flatten()
                    .any(|&e| producer(e).is_some_and(|n| n.is("Erf")))
        })
    })
}

pub fn fold_input_scale(g: &Graph, id: NodeId) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty());
    require!(matches!(
        node.op_type.as_str(),
        "Conv" | "ConvTranspose" | "Gemm" | "MatMul"
    ));
    let scaled = require_some!(input(g, id, 0));
    let (mul, _) = require_some!(g.value(scaled).producer);
    let mul_node = g.node(mul);
    require!(mul_node.domain().is_empty() && matches!(mul_node.op_type.as_str(), "Mul" | "Div"));
    let (a, b) = (
        require_some!(input(g, mul, 0)),
        require_some!(input(g, mul, 1)),
    );
    let (x, c) = match (g.constant(a), g.constant(b)) {
        (None, Some(c)) => (a, c),
        (Some(c), None) if mul_node.op_type == "Mul" => (b, c),
        _ => return Outcome::Skip,
    };
    let label = node_label(g, id);
    if g.is_graph_output(scaled) || g.reader_count(scaled) != 1 {
        decline!("the scaled input of {label} has other readers");
    }
    if ends_erf_gelu(g, x) {
        decline!(
            "the scale before {label} is the last step of a GELU (x * (1 + erf(x / sqrt 2)) * 0.5): ONNX Runtime and TensorRT fuse a GELU only when it is whole"
        );
    }
    let wv = require_some!(input(g, id, 1));
    let Some(w) = g.constant(wv) else {
        decline!("weight '{}' of {label} is not a constant", g.value(wv).name);
    };
    let dtype = w.dtype();
    if !matches!(
        dtype,
        DataType::Float | DataType::Float16 | DataType::Double
    ) || c.dtype() != dtype
    {
        decline!(
            "weight dtype {dtype} / scale dtype {} not supported",
            c.dtype()
        );
    }
    let wd = w.dims().to_vec();
    let group = require_some!(conv_group(node, &wd));
    let trans_a = node.attr_int_or("transA", 0).unwrap_or(0) != 0;
    let trans_b = node.attr_int_or("transB", 0).unwrap_or(0) != 0;
    // (input rank, channel axis of the input, channel count).
    let (r, axis, channels) = match node.op_type.as_str() {
        "Conv" | "ConvTranspose" if wd.len() >= 3 => {
            let cin = if node.op_type == "Conv" {
                wd[1] as usize * group
            } else {
                wd[0] as usize
            };
            (wd.len(), 1, cin)
        }
        "Gemm" if wd.len() == 2 => {
            let k = if trans_b { wd[1] } else { wd[0] } as usize;
            (2, if trans_a { 0 } else { 1 }, k)
        }
        "MatMul" if wd.len() == 2 => {
            let r = require_some!(rank(g, x));
            require!(r >= 2);
            (r, r - 1, wd[0] as usize)
        }
        _ => decline!("weight of {label} has shape {}", dims_string(&wd)),
    };
    let mut factors = match channel_factors(c, r, axis, channels) {
        Ok(f) => f,
        Err(why) => decline!("{why}"),
    };
    if mul_node.op_type == "Div" {
        if factors.contains(&0.0) {
            decline!("division by a zero constant");
        }
        factors.iter_mut().for_each(|f| *f = 1.0 / *f);
    }
    // B [K, N] of a MatMul or Gemm, float32: row k is one block, scaled
    // from the bytes without an f64 copy (BERT's GELU `* 0.5` moving into
    // the next dense layer).
    let rows = matches!(node.op_type.as_str(), "MatMul" | "Gemm") && !trans_b;
    if rows
        && dtype == DataType::Float
        && let Ok(raw) = w.raw_bytes()
        && let Some(out) = scale_f32_blocks(&raw, wd[1] as usize, |k| factors[k])
    {
        infopt_ir::external::release_if_mapped(&raw);
        let t = Tensor::from_raw(dtype, wd, bytes::Bytes::from(out));
        return rewrite(g, id, mul, x, label, t);
    }
    let values = match w.to_f64_vec() {
        Ok(v) => v,
        Err(e) => decline!("cannot read weight of {label}: {e}"),
    };
    let kernel: usize = wd
        .iter()
        .skip(2)
        .map(|&d| d as usize)
        .product::<usize>()
        .max(1);
    let channel_of = |i: usize| -> usize {
        match node.op_type.as_str() {
            "Conv" => {
                let per_group_in = wd[1] as usize;
                let o = i / (per_group_in * kernel);
                let j = (i / kernel) % per_group_in;
                let per_group_out = (wd[0] as usize / group).max(1);
                (o / per_group_out) * per_group_in + j
            }
            "ConvTranspose" => i / (wd[1] as usize * kernel),
            // B [K, N] (row k), or [N, K] with transB (column k).
            _ if trans_b => i % wd[1] as usize,
            _ => i / wd[1] as usize,
        }
    };
    let scaled_w: Vec<f64> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| v * factors[channel_of(i)])
        .collect();
    let t = require_some!(tensor_from_f64(dtype, wd, &scaled_w));
    rewrite(g, id, mul, x, label, t)
}

/// The layer at `id` reading `x` with the weight `w` instead of its input
/// scaled by `mul`.
fn rewrite(g: &Graph, id: NodeId, mul: NodeId, x: ValueId, label: String, w: Tensor) -> Outcome {
    let node = g.node(id);
    let mut p = Patch::new();
    let name = format!("{}.{}.weight", label, node_label(g, mul));
    let w_new = p.add_initializer(&name, w);
    let mut fused = node.clone();
    fused.inputs.clear();
    fused.outputs.clear();
    let mut inputs: Vec<Option<PatchValue>> = node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    inputs[0] = Some(PatchValue::Existing(x));
    inputs[1] = Some(w_new);
    let n = p.add_node(fused, inputs, vec![String::new()]);
    let out = require_some!(output(g, id, 0));
    let new = PatchValue::NewNode { node: n, output: 0 };
    p.replace(out, new);
    carry_type(&mut p, g, out, new);
    p.remove_node(id);
    p.remove_node(mul);
    Outcome::Rewrite(p)
}

/// Rewrites `layer(Add(x, c), W, b)` (or `Sub(x, c)`) at layer node `id`:
/// the shift moves into the bias. Only for a Conv without padding (a padded
/// border would read shifted zeros the rewrite cannot reproduce) and for
/// Gemm, where `C' = beta·C + alpha·(c·B)` and beta becomes 1.
pub fn fold_input_shift(g: &Graph, id: NodeId, opset: i64) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty() && matches!(node.op_type.as_str(), "Conv" | "Gemm"));
    let shifted = require_some!(input(g, id, 0));
    let (add, _) = require_some!(g.value(shifted).producer);
    let add_node = g.node(add);
    require!(add_node.domain().is_empty() && matches!(add_node.op_type.as_str(), "Add" | "Sub"));
    let (a, b) = (
        require_some!(input(g, add, 0)),
        require_some!(input(g, add, 1)),
    );
    let (x, c) = match (g.constant(a), g.constant(b)) {
        (None, Some(c)) => (a, c),
        (Some(c), None) if add_node.op_type == "Add" => (b, c),
        _ => return Outcome::Skip,
    };
    let label = node_label(g, id);
    if g.is_graph_output(shifted) || g.reader_count(shifted) != 1 {
        decline!("the shifted input of {label} has other readers");
    }
    let wv = require_some!(input(g, id, 1));
    let Some(w) = g.constant(wv) else {
        decline!("weight '{}' of {label} is not a constant", g.value(wv).name);
    };
    let dtype = w.dtype();
    if !matches!(
        dtype,
        DataType::Float | DataType::Float16 | DataType::Double
    ) || c.dtype() != dtype
    {
        decline!(
            "weight dtype {dtype} / shift dtype {} not supported",
            c.dtype()
        );
    }
    let wd = w.dims().to_vec();
    let values = match w.to_f64_vec() {
        Ok(v) => v,
        Err(e) => decline!("cannot read weight of {label}: {e}"),
    };
    let sign = if add_node.op_type == "Sub" { -1.0 } else { 1.0 };
    let is_conv = node.op_type == "Conv";
    let trans_a = node.attr_int_or("transA", 0).unwrap_or(0) != 0;
    let trans_b = node.attr_int_or("transB", 0).unwrap_or(0) != 0;
    // (input rank, channel axis, input channels, output channels).
    let (r, axis, cin, cout) = if is_conv {
        require!(wd.len() >= 3);
        let padded = node
            .attr_ints("pads")
            .ok()
            .flatten()
            .is_some_and(|p| p.iter().any(|&v| v != 0));
        let auto = node.attr_string("auto_pad").ok().flatten();
        if padded || auto.is_some_and(|a| a != "NOTSET" && a != "VALID") {
            decline!("{label} pads its input; a shift before it would move the padding too");
        }
        let group = require_some!(conv_group(node, &wd));
        (wd.len(), 1, wd[1] as usize * group, wd[0] as usize)
    } else {
        require!(wd.len() == 2);
        let (k, n) = if trans_b {
            (wd[1], wd[0])
        } else {
            (wd[0], wd[1])
        };
        (2, if trans_a { 0 } else { 1 }, k as usize, n as usize)
    };
    let shift = match channel_factors(c, r, axis, cin) {
        Ok(v) => v,
        Err(why) => decline!("{}", why.replace("scale", "shift")),
    };
    // delta[o] = sum of W over everything output o reads, times the shift.
    let mut delta = vec![0.0; cout];
    if is_conv {
        let group = require_some!(conv_group(node, &wd));
        let per_in = wd[1] as usize;
        let kernel: usize = wd
            .iter()
            .skip(2)
            .map(|&d| d as usize)
            .product::<usize>()
            .max(1);
        let per_out = (cout / group).max(1);
        for (i, &v) in values.iter().enumerate() {
            let o = i / (per_in * kernel);
            let j = (i / kernel) % per_in;
            delta[o] += v * shift[(o / per_out) * per_in + j];
        }
    } else {
        let alpha = node.attr_float_or("alpha", 1.0).unwrap_or(1.0) as f64;
        for (i, &v) in values.iter().enumerate() {
            let (k, n) = if trans_b {
                (i % wd[1] as usize, i / wd[1] as usize)
            } else {
                (i / wd[1] as usize, i % wd[1] as usize)
            };
            delta[n] += alpha * v * shift[k];
        }
    }
    let delta: Vec<f64> = delta.iter().map(|d| d * sign).collect();
    let old = input(g, id, 2);
    let (bias, dims) = match old {
        None => {
            if !is_conv && opset < 7 {
                decline!("Gemm before opset 7 needs broadcast=1 for a [N] C");
            }
            (delta.clone(), vec![cout as i64])
        }
        Some(bv) => {
            let Some(t) = g.constant(bv) else {
                decline!("bias '{}' of {label} is not a constant", g.value(bv).name);
            };
            let Ok(b) = t.to_f64_vec() else {
                decline!("cannot read the bias of {label}");
            };
            let beta = if is_conv {
                1.0
            } else {
                node.attr_float_or("beta", 1.0).unwrap_or(1.0) as f64
            };
            let bd = t.dims().to_vec();
            let cols = bd.last().copied().unwrap_or(1) as usize;
            if bd.len() > 2 || (cols != 1 && cols != cout) || (is_conv && b.len() != cout) {
                decline!("bias of {label} has shape {}", dims_string(&bd));
            }
            let rows = b.len() / cols.max(1);
            let mut nb = Vec::with_capacity(rows * cout);
            for row in 0..rows {
                for o in 0..cout {
                    let bv = b[row * cols + if cols == 1 { 0 } else { o }];
                    nb.push(beta * bv + delta[o]);
                }
            }
            let dims = if bd.len() == 2 {
                vec![rows as i64, cout as i64]
            } else {
                vec![cout as i64]
            };
            (nb, dims)
        }
    };
    let mut p = Patch::new();
    let name = format!("{}.{}.bias", label, node_label(g, add));
    let b_new = p.add_initializer(&name, require_some!(tensor_from_f64(dtype, dims, &bias)));
    let mut fused = node.clone();
    fused.inputs.clear();
    fused.outputs.clear();
    if !is_conv {
        fused.set_attr(infopt_ir::Attribute::float("beta", 1.0));
    }
    let mut inputs: Vec<Option<PatchValue>> = node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    inputs[0] = Some(PatchValue::Existing(x));
    inputs.resize(3, None);
    inputs[2] = Some(b_new);
    let n = p.add_node(fused, inputs, vec![String::new()]);
    let out = require_some!(output(g, id, 0));
    let new = PatchValue::NewNode { node: n, output: 0 };
    p.replace(out, new);
    carry_type(&mut p, g, out, new);
    p.remove_node(id);
    p.remove_node(add);
    Outcome::Rewrite(p)
}

/// `Conv(x * s + t, W)` for a conv that pads (where the shift cannot go into
/// the bias): `x * s + t = (x + t/s) * s`, so the scale goes into `W` and one
/// Add by `t/s` stays: `Conv(x + t/s, W·s)`, one node fewer. Zero padding of
/// `x + t/s` scaled by `s` is still zero.
pub fn fold_scale_under_shift(g: &Graph, id: NodeId) -> Outcome {
    let node = g.node(id);
    require!(node.domain().is_empty() && node.is("Conv"));
    let shifted = require_some!(input(g, id, 0));
    let (add, add_node) = require_some!(g.value(shifted).producer.map(|(p, _)| (p, g.node(p))));
    require!(add_node.domain().is_empty() && add_node.is("Add"));
    let (a, b) = (
        require_some!(input(g, add, 0)),
        require_some!(input(g, add, 1)),
    );
    let (m, t) = match (g.constant(a), g.constant(b)) {
        (None, Some(t)) => (a, t),
        (Some(t), None) => (b, t),
        _ => return Outcome::Skip,
    };
    let (mul, mul_node) = require_some!(g.value(m).producer.map(|(p, _)| (p, g.node(p))));
    require!(mul_node.domain().is_empty() && mul_node.is("Mul"));
    let (ma, mb) = (
        require_some!(input(g, mul, 0)),
        require_some!(input(g, mul, 1)),
    );
    let (x, s) = match (g.constant(ma), g.constant(mb)) {
        (None, Some(s)) => (ma, s),
        (Some(s), None) => (mb, s),
        _ => return Outcome::Skip,
    };
    let private = |v: ValueId| !g.is_graph_output(v) && g.reader_count(v) == 1;
    require!(private(shifted) && private(m));
    let wv = require_some!(input(g, id, 1));
    let w = require_some!(g.constant(wv));
    let dtype = w.dtype();
    require!(matches!(
        dtype,
        DataType::Float | DataType::Float16 | DataType::Double
    ));
    require!(s.dtype() == dtype && t.dtype() == dtype);
    let wd = w.dims().to_vec();
    require!(wd.len() >= 3);
    let group = require_some!(conv_group(node, &wd));
    let (r, cin) = (wd.len(), wd[1] as usize * group);
    let scale = require_some!(channel_factors(s, r, 1, cin).ok());
    let shift = require_some!(channel_factors(t, r, 1, cin).ok());
    require!(!scale.contains(&0.0));
    let values = require_some!(w.to_f64_vec().ok());
    let kernel: usize = wd
        .iter()
        .skip(2)
        .map(|&d| d as usize)
        .product::<usize>()
        .max(1);
    let per_in = wd[1] as usize;
    let per_out = (wd[0] as usize / group).max(1);
    let scaled_w: Vec<f64> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let o = i / (per_in * kernel);
            let j = (i / kernel) % per_in;
            v * scale[(o / per_out) * per_in + j]
        })
        .collect();
    let moved: Vec<f64> = shift.iter().zip(&scale).map(|(t, s)| t / s).collect();
    let uniform = moved.iter().all(|&v| v == moved[0]);
    let (t_dims, t_vals) = if uniform {
        (vec![], vec![moved[0]])
    } else {
        let mut d = vec![1i64; r];
        d[1] = cin as i64;
        (d, moved)
    };
    let label = node_label(g, id);
    let mut p = Patch::new();
    let w_new = p.add_initializer(
        &format!("{label}.{}.weight", node_label(g, mul)),
        require_some!(tensor_from_f64(dtype, wd, &scaled_w)),
    );
    let t_new = p.add_initializer(
        &format!("{label}.{}.shift", node_label(g, add)),
        require_some!(tensor_from_f64(dtype, t_dims, &t_vals)),
    );
    let mut new_add = add_node.clone();
    new_add.inputs.clear();
    new_add.outputs.clear();
    let na = p.add_node(
        new_add,
        vec![Some(PatchValue::Existing(x)), Some(t_new)],
        vec![String::new()],
    );
    let mut fused = node.clone();
    fused.inputs.clear();
    fused.outputs.clear();
    let mut inputs: Vec<Option<PatchValue>> = node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    inputs[0] = Some(PatchValue::NewNode {
        node: na,
        output: 0,
    });
    inputs[1] = Some(w_new);
    let n = p.add_node(fused, inputs, vec![String::new()]);
    let out = require_some!(output(g, id, 0));
    let new = PatchValue::NewNode { node: n, output: 0 };
    p.replace(out, new);
    carry_type(&mut p, g, out, new);
    p.remove_node(id);
    p.remove_node(add);
    p.remove_node(mul);
    Outcome::Rewrite(p)
}
