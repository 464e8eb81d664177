//! Folds a constant `Pad` of the spatial axes into the `pads` of the Conv or
//! pooling op after it.
//!
//! ## What it does
//! `p = Pad(x, pads, 0)`, `y = Conv(p, W[, b])` becomes `y = Conv(x, W[, b])`
//! with the Pad's spatial begin/end amounts added to the conv's `pads`
//! (which default to zeros). The same for `AveragePool` (a zero Pad; the pool
//! then counts padding in the average, `count_include_pad=1`, as it counted
//! the Pad's zeros) and `MaxPool` (a Pad of -inf, or of a value at most zero
//! when the input is known non-negative: it comes from Relu, Sigmoid,
//! Softplus, Exp, Abs or Softmax).
//! Handles Pad-1 (`paddings` attribute), Pad-2
//! (`pads` / `value` attributes), Pad-11 (`pads` / `constant_value` inputs)
//! and Pad-18 (`axes` input). The conv keeps its name, attributes and
//! output.
//!
//! ## When it declines
//! Where a Pad feeds a Conv:
//! - the Pad mode is not `constant`;
//! - the pad value is not a constant zero (absent counts as zero);
//! - the pads are not constant, are negative (a crop), or touch the batch or
//!   channel axis;
//! - the Pad output has other readers or is a graph output;
//! - the conv uses `auto_pad` other than `NOTSET`;
//! - an AveragePool with `count_include_pad=0` already pads (its own pads
//!   would leave the average, the Pad's would not), or either pool uses
//!   `ceil_mode=1` (the extra partial window is not padding);
//! - a MaxPool pad value is neither -inf nor at most zero over a
//!   non-negative input, or the Indices output is read;
//! - a pool's pad (its own plus the Pad's) reaches the kernel extent: a
//!   MaxPool window of padding only would give -inf where the Pad gave its
//!   value, and ONNX Runtime refuses such pads on either pool;
//! - the rank of the conv input cannot be determined (Pad-18 `axes`).
//!
//! ## Numerics
//! Exact: the conv and AveragePool pad with zeros, as the Pad did; a
//! MaxPool ignores its padding, which the Pad filled with values no larger
//! than any real element of the window.
//!
//! ## Example
//! `p = Pad(x, pads=[0,0,1,2,0,0,1,2])`, `y = Conv(p, W, pads=[1,1,1,1])`
//! becomes `y = Conv(x, W, pads=[2,3,2,3])`.

crate::register_pass! {
    name: "fuse-pad-conv",
    kind: Fuse,
    file: "fuse_pad_conv.rs",
    options: crate::registry::NoOptions,
    build: |_| FusePadConv,
}

use infopt_ir::{Attribute, Graph, Model, NodeId, PatchValue};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::replace_with_node;
use crate::util::{const_i64s, input, output};
use crate::{decline, require, require_some};

pub struct FusePadConv;

/// Rank of the conv's input (= rank of its weight).
fn conv_rank(g: &Graph, conv: NodeId) -> Option<usize> {
    if let Some(w) = input(g, conv, 1)
        && let Some(r) = g.value_type(w).and_then(|t| t.shape).map(|s| s.len())
    {
        return Some(r);
    }
    if let Ok(Some(k)) = g.node(conv).attr_ints("kernel_shape") {
        return Some(k.len() + 2);
    }
    None
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let conv = g.node(id);
    require!(conv.domain().is_empty());
    require!(matches!(
        conv.op_type.as_str(),
        "Conv" | "AveragePool" | "MaxPool"
    ));
    let px = require_some!(input(g, id, 0));
    let (pad, _) = require_some!(g.value(px).producer);
    let pad_node = g.node(pad);
    require!(pad_node.is("Pad"));
    if g.is_graph_output(px) {
        decline!("Pad output '{}' is a graph output", g.value(px).name);
    }
    let readers = g.reader_count(px);
    if readers != 1 {
        decline!("Pad output has {readers} readers");
    }
    let mode = match pad_node.attr_string("mode") {
        Ok(m) => m.unwrap_or_else(|| "constant".to_string()),
        Err(e) => decline!("{e}"),
    };
    if mode != "constant" {
        decline!("Pad mode is '{mode}'; only constant zero padding folds into a conv");
    }
    match conv.attr_string("auto_pad") {
        Ok(None) => {}
        Ok(Some(a)) if a == "NOTSET" => {}
        Ok(Some(a)) => decline!("conv has auto_pad={a}"),
        Err(e) => decline!("{e}"),
    }
    let Some(rank) = conv_rank(g, id) else {
        decline!("rank of the conv input is unknown");
    };
    // Full pads over all `rank` axes: [begin_0..begin_r, end_0..end_r].
    let (pads, value) = if cx.opset < 11 {
        let attr = if cx.opset < 2 { "paddings" } else { "pads" };
        let pads = match pad_node.attr_ints(attr) {
            Ok(Some(p)) => p.to_vec(),
            Ok(None) => decline!("Pad has no '{attr}' attribute"),
            Err(e) => decline!("{e}"),
        };
        (
            pads,
            pad_node.attr_float_or("value", 0.0).unwrap_or(f32::NAN) as f64,
        )
    } else {
        let Some(pads) = const_i64s(g, input(g, pad, 1)) else {
            decline!("pads of the Pad are not a constant");
        };
        let value = match input(g, pad, 2) {
            None => 0.0,
            Some(v) => match g.constant(v).map(|t| (t.numel(), t.to_f64_vec())) {
                Some((Some(1), Ok(vals))) => vals[0],
                Some(_) => decline!("pad value '{}' is not a scalar number", g.value(v).name),
                None => decline!("pad value '{}' is not a constant", g.value(v).name),
            },
        };
        let pads = match input(g, pad, 3) {
            None => pads,
            Some(av) => {
                let Some(axes) = const_i64s(g, Some(av)) else {
                    decline!("axes of the Pad are not a constant");
                };
                if pads.len() != 2 * axes.len() {
                    decline!("Pad has {} pads for {} axes", pads.len(), axes.len());
                }
                let mut full = vec![0i64; 2 * rank];
                for (i, &a) in axes.iter().enumerate() {
                    let a = if a < 0 { a + rank as i64 } else { a };
                    if a < 0 || a as usize >= rank {
                        decline!("Pad axis {} is out of range for rank {rank}", axes[i]);
                    }
                    full[a as usize] = pads[i];
                    full[rank + a as usize] = pads[axes.len() + i];
                }
                full
            }
        };
        (pads, value)
    };
    let x = input(g, pad, 0);
    let ok_value = match conv.op_type.as_str() {
        "MaxPool" => {
            // A pad at most 0 never beats a real element of a non-negative
            // input (every window holds one: the pads stay below the kernel).
            value == f64::NEG_INFINITY
                || (value <= 0.0 && x.is_some_and(|x| crate::redundant_ops::non_negative(g, x)))
        }
        _ => value == 0.0,
    };
    if !ok_value && conv.op_type == "MaxPool" {
        decline!("pad value {value} is neither -inf nor at most zero over a non-negative input");
    }
    if !ok_value {
        decline!("pad value {value} is not zero");
    }
    if pads.len() != 2 * rank {
        decline!("Pad has {} pads for a rank-{rank} conv input", pads.len());
    }
    if pads.iter().any(|&p| p < 0) {
        decline!("negative pads {pads:?} crop the input");
    }
    if pads[0] != 0 || pads[rank] != 0 {
        decline!("pads {pads:?} touch the batch axis");
    }
    if pads[1] != 0 || pads[rank + 1] != 0 {
        decline!("pads {pads:?} touch the channel axis");
    }
    let k = rank - 2;
    let mut conv_pads = match conv.attr_ints("pads") {
        Ok(Some(p)) => p.to_vec(),
        Ok(None) => vec![0; 2 * k],
        Err(e) => decline!("{e}"),
    };
    if conv_pads.len() != 2 * k {
        decline!("conv has {} pads for {k} spatial axes", conv_pads.len());
    }
    for i in 0..k {
        conv_pads[i] += pads[2 + i];
        conv_pads[k + i] += pads[rank + 2 + i];
    }
    let mut fused = conv.clone();
    if conv.op_type != "Conv" {
        if let Err(why) = pool_accepts(g, id, &conv_pads) {
            decline!("{why}");
        }
        if conv.op_type == "AveragePool" {
            fused.set_attr(Attribute::int("count_include_pad", 1));
        }
    }
    fused.set_attr(Attribute::ints("pads", conv_pads));
    let mut inputs: Vec<Option<PatchValue>> = conv
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    inputs[0] = x.map(PatchValue::Existing);
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(g, fused, inputs, out, &[pad, id]))
}

/// Whether the pool `id` computes the same with `pads` as with the Pad.
fn pool_accepts(g: &Graph, id: NodeId, pads: &[i64]) -> Result<(), String> {
    let pool = g.node(id);
    if pool
        .attr_int_or("ceil_mode", 0)
        .map_err(|e| e.to_string())?
        != 0
    {
        return Err(format!("{} uses ceil_mode=1", pool.op_type));
    }
    if pool.op_type == "AveragePool" {
        let include = pool
            .attr_int_or("count_include_pad", 0)
            .map_err(|e| e.to_string())?;
        let own = pool.attr_ints("pads").map_err(|e| e.to_string())?;
        if include == 0 && own.is_some_and(|p| p.iter().any(|&v| v != 0)) {
            return Err("AveragePool pads with count_include_pad=0".into());
        }
    } else if output(g, id, 1).is_some_and(|v| g.reader_count(v) > 0 || g.is_graph_output(v)) {
        return Err("MaxPool Indices output is read".into());
    }
    // Both pools: ONNX Runtime rejects a pad that reaches the kernel extent
    // (for AveragePool too, though averaging zeros would be exact), and for
    // MaxPool a window of padding only would give -inf where the Pad gave
    // its value.
    let kernel = pool
        .attr_ints("kernel_shape")
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} has no kernel_shape", pool.op_type))?;
    let k = kernel.len();
    if pads.len() != 2 * k {
        return Err(format!(
            "{} has {} pads for {k} spatial axes",
            pool.op_type,
            pads.len()
        ));
    }
    let dilations = pool.attr_ints("dilations").map_err(|e| e.to_string())?;
    for (i, &kk) in kernel.iter().enumerate() {
        let d = dilations.and_then(|d| d.get(i).copied()).unwrap_or(1);
        let extent = (kk - 1) * d + 1;
        if pads[i] >= extent || pads[k + i] >= extent {
            return Err(format!(
                "pads {pads:?} reach the kernel extent {extent} on axis {i}"
            ));
        }
    }
    Ok(())
}

impl Pass for FusePadConv {
    fn name(&self) -> &'static str {
        "fuse-pad-conv"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
