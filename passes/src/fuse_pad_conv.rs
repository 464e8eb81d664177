//! Folds a zero `Pad` of the spatial axes into the `pads` of the Conv after it.
//!
//! ## What it does
//! `p = Pad(x, pads, 0)`, `y = Conv(p, W[, b])` becomes `y = Conv(x, W[, b])`
//! with the Pad's spatial begin/end amounts added to the conv's `pads`
//! (which default to zeros). Handles Pad-1 (`paddings` attribute), Pad-2
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
//! - the rank of the conv input cannot be determined (Pad-18 `axes`).
//!
//! ## Numerics
//! Exact: the conv pads with zeros, as the Pad did.
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
    require!(conv.is("Conv"));
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
    if value != 0.0 {
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
    fused.set_attr(Attribute::ints("pads", conv_pads));
    let x = input(g, pad, 0);
    let mut inputs: Vec<Option<PatchValue>> = conv
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    inputs[0] = x.map(PatchValue::Existing);
    let out = require_some!(output(g, id, 0));
    Outcome::Rewrite(replace_with_node(g, fused, inputs, out, &[pad, id]))
}

impl Pass for FusePadConv {
    fn name(&self) -> &'static str {
        "fuse-pad-conv"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
