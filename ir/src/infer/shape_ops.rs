//! Shape-manipulating ops: Reshape, Transpose, Squeeze/Unsqueeze, Slice,
//! Gather*, Concat, Split, Expand, Tile, Pad, Resize/Upsample, Shape, Size,
//! ConstantOfShape, Range, Flatten, NonZero, Constant, and friends.

use crate::dtype::DataType;
use crate::graph::Node;
use crate::proto::TensorProto;
use crate::shape::Dim;
use crate::tensor::Tensor;

use super::elementwise::{broadcast, nonneg};
use super::facts::{Fact, MAX_VALUE_ELEMS, SymValue, is_int, norm_axis};
use super::rule_cx::RuleCx;
use super::sym;

/// A slice end at or beyond this means "to the end" (exporters use INT32/INT64 max).
const HUGE: i64 = i32::MAX as i64;

pub(crate) fn infer(cx: &RuleCx) -> Option<Vec<Fact>> {
    let out = match cx.node.op_type.as_str() {
        "Reshape" => reshape(cx),
        "Transpose" => transpose(cx),
        "Squeeze" => squeeze(cx),
        "Unsqueeze" => unsqueeze(cx),
        "Slice" => slice(cx),
        "Gather" => gather(cx),
        "GatherElements" => cx.like(0, cx.shape(1).map(|s| s.to_vec())),
        "GatherND" => gather_nd(cx),
        "ScatterND" | "ScatterElements" | "Scatter" => cx.like(0, cx.shape(0).map(|s| s.to_vec())),
        "Concat" => concat(cx),
        "Split" => return Some(split(cx)),
        "Expand" => expand(cx),
        "Tile" => tile(cx),
        "Pad" => pad(cx),
        "Resize" | "Upsample" => resize(cx),
        "Shape" => shape(cx),
        "Size" => {
            let n = cx.shape(0).map(sym::product);
            Fact::new(DataType::Int64, Some(vec![])).with_value(n.map(SymValue::scalar))
        }
        "ConstantOfShape" => constant_of_shape(cx),
        "Range" => range(cx),
        "Flatten" => flatten(cx),
        "NonZero" => Fact::new(
            DataType::Int64,
            cx.rank(0)
                .map(|r| vec![Dim::Known(r as i64), cx.fresh(0, "nonzero")]),
        ),
        "Compress" => compress(cx),
        "Unique" => return Some(unique(cx)),
        "Constant" => Fact::of_tensor(&constant_tensor(cx.node)?),
        "OneHot" => one_hot(cx),
        "DepthToSpace" | "SpaceToDepth" => depth_space(cx),
        "EyeLike" => {
            let dtype = cx
                .attr_int_opt("dtype")
                .map(|c| DataType::from_code(c as i32))
                .unwrap_or(cx.dtype(0));
            Fact::new(dtype, cx.shape(0).map(|s| s.to_vec()))
        }
        "NonMaxSuppression" => Fact::new(
            DataType::Int64,
            Some(vec![cx.fresh(0, "nms"), Dim::Known(3)]),
        ),
        // [num_rois, C, output_height, output_width] in X's element type:
        // the region count from `rois` [num_rois, 4], the channels from X
        // [N, C, H, W] (torchvision's box and keypoint poolers, whose Cast
        // and Shape → Gather chains after it stayed without this rule).
        "RoiAlign" => Fact::new(
            cx.dtype(0),
            cx.shape(0).filter(|x| x.len() == 4).map(|x| {
                let rois = cx
                    .shape(1)
                    .and_then(|r| r.first().cloned())
                    .unwrap_or(Dim::Unknown);
                vec![
                    rois,
                    x[1].clone(),
                    Dim::Known(cx.attr_int_opt("output_height").unwrap_or(1)),
                    Dim::Known(cx.attr_int_opt("output_width").unwrap_or(1)),
                ]
            }),
        ),
        _ => return None,
    };
    Some(vec![out])
}

/// The tensor of a Constant node.
pub(crate) fn constant_tensor(n: &Node) -> Option<Tensor> {
    if let Some(t) = n.attr_tensor("value").ok().flatten() {
        return Some(t);
    }
    if let Some(f) = n.attr_float("value_float").ok().flatten() {
        return Some(Tensor::from_f32(vec![], &[f]));
    }
    if let Some(fs) = n.attr_floats("value_floats").ok().flatten() {
        return Some(Tensor::from_f32(vec![fs.len() as i64], fs));
    }
    if let Some(i) = n.attr_int("value_int").ok().flatten() {
        return Some(Tensor::from_i64(vec![], &[i]));
    }
    if let Some(is) = n.attr_ints("value_ints").ok().flatten() {
        return Some(Tensor::from_i64(vec![is.len() as i64], is));
    }
    if let Some(a) = n.attr("value_string") {
        let proto = TensorProto {
            data_type: Some(DataType::String.code()),
            string_data: vec![a.proto.s.clone().unwrap_or_default()],
            ..Default::default()
        };
        return Some(Tensor::from_proto(proto));
    }
    if let Some(a) = n.attr("value_strings") {
        let proto = TensorProto {
            dims: vec![a.proto.strings.len() as i64],
            data_type: Some(DataType::String.code()),
            string_data: a.proto.strings.clone(),
            ..Default::default()
        };
        return Some(Tensor::from_proto(proto));
    }
    None
}

/// A shape-like input (Reshape/Expand/Tile target): its value, or a vector of
/// unknowns when only its length is known.
fn shape_arg(cx: &RuleCx, i: usize) -> Option<Vec<Dim>> {
    if let Some(v) = cx.ints(i) {
        return Some(v.into_iter().map(Dim::Known).collect());
    }
    if let Some(v) = cx.value(i) {
        return Some(v.elems.clone());
    }
    match cx.shape(i) {
        Some([Dim::Known(n)]) => usize::try_from(*n)
            .ok()
            .filter(|&n| n <= crate::shape::MAX_RANK)
            .map(|n| vec![Dim::Unknown; n]),
        _ => None,
    }
}

/// Axes of Squeeze/Unsqueeze/reductions: attribute before `input_since`, input after.
pub(crate) fn axes_arg(cx: &RuleCx, input_since: i64, slot: usize) -> Option<Option<Vec<i64>>> {
    if cx.opset() < input_since {
        Some(cx.attr_ints("axes"))
    } else if cx.has_input(slot) {
        cx.ints(slot).map(Some)
    } else {
        Some(None)
    }
}

fn reshape(cx: &RuleCx) -> Fact {
    let target = if cx.opset() < 5 {
        cx.attr_ints("shape")
            .map(|v| v.into_iter().map(Dim::Known).collect())
    } else {
        shape_arg(cx, 1)
    };
    let value = cx
        .value(0)
        .filter(|_| target.as_ref().is_some_and(|t| t.len() <= 1))
        .map(|v| SymValue {
            scalar: target.as_ref().is_some_and(|t| t.is_empty()),
            elems: v.elems.clone(),
        });
    let Some(target) = target else {
        return cx.like(0, None);
    };
    let allowzero = cx.attr_int("allowzero", 0) != 0;
    let input = cx.shape(0);
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    let mut uncertain = false;
    for (i, e) in target.iter().enumerate() {
        out.push(match e {
            Dim::Known(0) if !allowzero => input
                .and_then(|s| s.get(i).cloned())
                .unwrap_or(Dim::Unknown),
            Dim::Known(-1) => {
                infer_at = Some(i);
                Dim::Unknown
            }
            Dim::Known(n) if *n >= 0 => Dim::Known(*n),
            Dim::Known(_) => Dim::Unknown,
            Dim::Sym(s) => Dim::Sym(s.clone()),
            Dim::Unknown => {
                uncertain = true;
                Dim::Unknown
            }
        });
    }
    if let (Some(k), false, Some(input)) = (infer_at, uncertain, input) {
        // An unknown dim copied by a 0 is the same factor on both sides of the
        // division, so it cancels (Paddle's `[0, -1]` on a `-1` batch).
        let copied_unknown = |i: usize| {
            !allowzero
                && matches!(target.get(i), Some(Dim::Known(0)))
                && matches!(input.get(i), Some(Dim::Unknown))
        };
        let total = sym::product(
            input
                .iter()
                .enumerate()
                .filter(|(i, _)| !copied_unknown(*i))
                .map(|(_, d)| d),
        );
        let rest = sym::product(
            out.iter()
                .enumerate()
                .filter(|(i, _)| *i != k && !copied_unknown(*i))
                .map(|(_, d)| d),
        );
        if !matches!(total, Dim::Unknown) && !matches!(rest, Dim::Unknown) {
            out[k] = sym::div_exact(&total, &rest);
        }
    }
    // A target holding another number of elements than the input is no
    // shape the output can have: the runtime refuses it, so its dims are
    // not taken literally (they would be sized as an activation).
    if let (Some(input_count), Some(output_count)) = (
        input.and_then(known_count),
        known_count(&out).filter(|_| infer_at.is_none()),
    ) && input_count != output_count
    {
        return cx.like(0, Some(vec![Dim::Unknown; out.len()]));
    }
    cx.like(0, Some(out)).with_value(value)
}

/// The number of elements of dims that are all known, saturating.
fn known_count(dims: &[Dim]) -> Option<u128> {
    dims.iter().try_fold(1u128, |acc, d| match d {
        Dim::Known(n) => u128::try_from(*n).ok().map(|n| acc.saturating_mul(n)),
        _ => None,
    })
}

fn transpose(cx: &RuleCx) -> Fact {
    let perm = cx
        .attr_ints("perm")
        .or_else(|| cx.rank(0).map(|r| (0..r as i64).rev().collect()));
    let Some(perm) = perm else {
        return cx.like(0, None);
    };
    let shape = match cx.shape(0) {
        Some(s) if s.len() == perm.len() => perm
            .iter()
            .map(|&p| s.get(p as usize).cloned())
            .collect::<Option<Vec<_>>>(),
        Some(_) => None,
        None => Some(vec![Dim::Unknown; perm.len()]),
    };
    cx.like(0, shape)
}

fn squeeze(cx: &RuleCx) -> Fact {
    let Some(axes) = axes_arg(cx, 13, 1) else {
        return cx.like(0, None);
    };
    let Some(input) = cx.shape(0) else {
        return cx.like(0, None);
    };
    let keep: Option<Vec<Dim>> = match axes {
        Some(axes) => {
            let norm: Option<Vec<usize>> =
                axes.iter().map(|&a| norm_axis(a, input.len())).collect();
            norm.map(|n| {
                input
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !n.contains(i))
                    .map(|(_, d)| d.clone())
                    .collect()
            })
        }
        None => {
            // Every dim of size 1 goes: only decidable when all dims are known.
            if input.iter().all(|d| matches!(d, Dim::Known(_))) {
                Some(
                    input
                        .iter()
                        .filter(|d| **d != Dim::Known(1))
                        .cloned()
                        .collect(),
                )
            } else {
                None
            }
        }
    };
    let value = match (&keep, cx.value(0)) {
        (Some(k), Some(v)) if k.is_empty() && v.elems.len() == 1 => {
            Some(SymValue::scalar(v.elems[0].clone()))
        }
        (Some(k), Some(v)) if k.len() == 1 => Some(v.clone()),
        _ => None,
    };
    cx.like(0, keep).with_value(value)
}

fn unsqueeze(cx: &RuleCx) -> Fact {
    let Some(Some(axes)) = axes_arg(cx, 13, 1) else {
        return cx.like(0, None);
    };
    let Some(input) = cx.shape(0) else {
        return cx.like(0, None);
    };
    let r = input.len() + axes.len();
    let Some(mut norm) = axes
        .iter()
        .map(|&a| norm_axis(a, r))
        .collect::<Option<Vec<usize>>>()
    else {
        return cx.like(0, None);
    };
    norm.sort_unstable();
    let mut out = Vec::with_capacity(r);
    let mut src = input.iter();
    for i in 0..r {
        if norm.contains(&i) {
            out.push(Dim::Known(1));
        } else {
            out.push(src.next().cloned().unwrap_or(Dim::Unknown));
        }
    }
    let value = cx
        .value(0)
        .filter(|v| v.scalar && r == 1)
        .map(|v| SymValue::vector(v.elems.clone()));
    cx.like(0, Some(out)).with_value(value)
}

/// Length of `x[s:e:step]` along a dim.
pub(crate) fn slice_dim(dim: &Dim, s: i64, e: i64, step: i64) -> Dim {
    if step == 0 {
        return Dim::Unknown;
    }
    match dim {
        Dim::Known(d) => {
            let d = *d;
            let (s, e) = if step > 0 {
                let s = if s < 0 { s.saturating_add(d) } else { s }.clamp(0, d);
                let e = if e < 0 { e.saturating_add(d) } else { e }.clamp(0, d);
                (s, e)
            } else {
                let s = if s < 0 { s.saturating_add(d) } else { s }
                    .clamp(0, d.saturating_sub(1).max(0));
                let e = if e < 0 { e.saturating_add(d) } else { e }
                    .clamp(-1, d.saturating_sub(1).max(-1));
                (s, e)
            };
            // In i128: a file may hold a step of i64::MAX or i64::MIN, which
            // overflows `e - s + step - 1` and `-step` in i64.
            let (s, e, step) = (i128::from(s), i128::from(e), i128::from(step));
            let len = if step > 0 {
                (e - s + step - 1).div_euclid(step)
            } else {
                (s - e + (-step) - 1).div_euclid(-step)
            };
            // At most d: the clamped bounds lie within the dim.
            Dim::Known(i64::try_from(len.max(0)).unwrap_or(d))
        }
        // Symbolic sizes are assumed ≥ 1; only slices whose length follows from that.
        Dim::Sym(_) if step == 1 => match (s, e) {
            (0, e) if e >= HUGE => dim.clone(),
            (1, e) if e >= HUGE => sym::sub(dim, &Dim::Known(1)),
            (0, -1) => sym::sub(dim, &Dim::Known(1)),
            (-1, e) if e >= HUGE => Dim::Known(1),
            _ => Dim::Unknown,
        },
        Dim::Sym(_) if step == -1 && s == -1 && e <= -HUGE => dim.clone(),
        _ => Dim::Unknown,
    }
}

fn slice(cx: &RuleCx) -> Fact {
    let (starts, ends, axes, steps) = if cx.opset() < 10 {
        (
            cx.attr_ints("starts"),
            cx.attr_ints("ends"),
            cx.attr_ints("axes"),
            None,
        )
    } else {
        let axes = if cx.has_input(3) { cx.ints(3) } else { None };
        let steps = if cx.has_input(4) { cx.ints(4) } else { None };
        // An axes/steps input that is present but unknown makes everything unknown.
        let axes_unknown = cx.has_input(3) && axes.is_none();
        let steps_unknown = cx.has_input(4) && steps.is_none();
        if axes_unknown || steps_unknown {
            return cx.like(0, cx.rank(0).map(|r| vec![Dim::Unknown; r]));
        }
        (cx.ints(1), cx.ints(2), axes, steps)
    };
    let Some(input) = cx.shape(0) else {
        return cx.like(0, None);
    };
    let r = input.len();
    let (Some(starts), Some(ends)) = (starts, ends) else {
        // Unknown bounds: the axes they touch are unknown.
        let mut out = input.to_vec();
        match axes.as_ref().and_then(|a| {
            a.iter()
                .map(|&x| norm_axis(x, r))
                .collect::<Option<Vec<_>>>()
        }) {
            Some(norm) => norm.into_iter().for_each(|a| out[a] = Dim::Unknown),
            None => out.iter_mut().for_each(|d| *d = Dim::Unknown),
        }
        return cx.like(0, Some(out));
    };
    if starts.len() != ends.len() {
        return cx.like(0, None);
    }
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let mut out = input.to_vec();
    let mut sliced: Vec<(usize, i64, i64, i64)> = Vec::new();
    for (k, &a) in axes.iter().enumerate() {
        let Some(a) = norm_axis(a, r) else {
            return cx.like(0, None);
        };
        let step = steps.as_ref().and_then(|s| s.get(k).copied()).unwrap_or(1);
        let (Some(&s), Some(&e)) = (starts.get(k), ends.get(k)) else {
            return cx.like(0, None);
        };
        out[a] = slice_dim(&input[a], s, e, step);
        sliced.push((a, s, e, step));
    }
    // Value of a sliced shape vector.
    let value = cx
        .value(0)
        .filter(|v| !v.scalar && sliced.len() == 1)
        .and_then(|v| {
            let (_, s, e, step) = sliced[0];
            let n = v.elems.len() as i64;
            let Dim::Known(len) = slice_dim(&Dim::Known(n), s, e, step) else {
                return None;
            };
            let s0 = if step > 0 {
                (if s < 0 { s + n } else { s }).clamp(0, n)
            } else {
                (if s < 0 { s + n } else { s }).clamp(0, n - 1)
            };
            Some(SymValue::vector(
                (0..len)
                    .map(|i| v.elems[(s0 + i * step) as usize].clone())
                    .collect(),
            ))
        });
    cx.like(0, Some(out)).with_value(value)
}

fn gather(cx: &RuleCx) -> Fact {
    let axis = cx.attr_int("axis", 0);
    let (Some(data), Some(idx)) = (cx.shape(0), cx.shape(1)) else {
        return cx.like(0, None);
    };
    let Some(a) = norm_axis(axis, data.len()) else {
        return cx.like(0, None);
    };
    let mut out: Vec<Dim> = data[..a].to_vec();
    out.extend(idx.iter().cloned());
    out.extend(data[a + 1..].iter().cloned());
    let value = match (cx.value(0), cx.ints(1)) {
        (Some(v), Some(ix)) if !v.scalar && a == 0 && idx.len() <= 1 => {
            let n = v.elems.len() as i64;
            let picked: Option<Vec<Dim>> = ix
                .iter()
                .map(|&i| {
                    let i = if i < 0 { i + n } else { i };
                    (0..n).contains(&i).then(|| v.elems[i as usize].clone())
                })
                .collect();
            picked.map(|elems| SymValue {
                scalar: idx.is_empty(),
                elems,
            })
        }
        _ => None,
    };
    cx.like(0, Some(out)).with_value(value)
}

fn gather_nd(cx: &RuleCx) -> Fact {
    let b = cx.attr_int("batch_dims", 0).max(0) as usize;
    let (Some(data), Some(idx)) = (cx.shape(0), cx.shape(1)) else {
        return cx.like(0, None);
    };
    let Some(Dim::Known(last)) = idx.last() else {
        return cx.like(0, None);
    };
    let last = *last as usize;
    if idx.is_empty() || b + last > data.len() {
        return cx.like(0, None);
    }
    let mut out: Vec<Dim> = idx[..idx.len() - 1].to_vec();
    out.extend(data[b + last..].iter().cloned());
    cx.like(0, Some(out))
}

fn concat(cx: &RuleCx) -> Fact {
    let axis = cx.attr_int("axis", 0);
    let shapes: Vec<Option<&[Dim]>> = (0..cx.n_inputs())
        .filter(|&i| cx.has_input(i))
        .map(|i| cx.shape(i))
        .collect();
    let dtype = (0..cx.n_inputs())
        .map(|i| cx.dtype(i))
        .find(|d| *d != DataType::Undefined)
        .unwrap_or(DataType::Undefined);
    let rank = shapes.iter().flatten().map(|s| s.len()).next();
    let Some(rank) = rank else {
        return Fact::new(dtype, None);
    };
    let Some(a) = norm_axis(axis, rank) else {
        return Fact::new(dtype, None);
    };
    let mut out = vec![Dim::Unknown; rank];
    let mut total = Dim::Known(0);
    for s in &shapes {
        match s {
            Some(s) if s.len() == rank => {
                for (i, d) in s.iter().enumerate() {
                    if i != a && (matches!(out[i], Dim::Unknown) || matches!(d, Dim::Known(_))) {
                        out[i] = d.clone();
                    }
                }
                total = sym::add(&total, &s[a]);
            }
            Some(_) => return Fact::new(dtype, None),
            None => total = Dim::Unknown,
        }
    }
    out[a] = total;
    let value = (rank == 1)
        .then(|| {
            let mut elems = Vec::new();
            for i in (0..cx.n_inputs()).filter(|&i| cx.has_input(i)) {
                let v = cx.value(i)?;
                if v.scalar {
                    return None;
                }
                elems.extend(v.elems.iter().cloned());
            }
            (elems.len() <= MAX_VALUE_ELEMS).then(|| SymValue::vector(elems))
        })
        .flatten();
    Fact::new(dtype, Some(out)).with_value(value)
}

fn split(cx: &RuleCx) -> Vec<Fact> {
    let n = cx.node.outputs.len();
    let axis = cx.attr_int("axis", 0);
    let Some(input) = cx.shape(0) else {
        return vec![cx.like(0, None); n];
    };
    let Some(a) = norm_axis(axis, input.len()) else {
        return vec![cx.like(0, None); n];
    };
    let sizes: Option<Vec<i64>> = if cx.opset() < 13 {
        cx.attr_ints("split")
            .or_else(|| if cx.has_input(1) { cx.ints(1) } else { None })
    } else if cx.has_input(1) {
        match cx.ints(1) {
            Some(v) => Some(v),
            None => return vec![cx.like(0, Some(with_dim(input, a, Dim::Unknown))); n],
        }
    } else {
        None
    };
    let dim = &input[a];
    let parts: Vec<Dim> = match sizes {
        Some(s) => s.into_iter().map(Dim::Known).collect(),
        None if cx.opset() >= 18 && cx.attr_int_opt("num_outputs").is_some() => {
            // ceil(dim / n) each, the last one takes the rest. Only the
            // node's own outputs are computed: `num_outputs` is an attribute
            // a file may set to anything.
            let k = cx.attr_int("num_outputs", n as i64).max(1);
            match dim {
                Dim::Known(d) if *d >= 0 => {
                    let each = d / k + i64::from(d % k != 0);
                    (0..n as i64)
                        .map(|i| {
                            each.checked_mul(i)
                                .map(|taken| Dim::Known(each.min(d - taken.min(*d))))
                                .unwrap_or(Dim::Unknown)
                        })
                        .collect()
                }
                _ => vec![Dim::Unknown; n],
            }
        }
        None => vec![sym::div_exact(dim, &Dim::Known(n as i64)); n],
    };
    (0..n)
        .map(|i| {
            cx.like(
                0,
                Some(with_dim(
                    input,
                    a,
                    parts.get(i).cloned().unwrap_or(Dim::Unknown),
                )),
            )
        })
        .collect()
}

fn with_dim(shape: &[Dim], axis: usize, d: Dim) -> Vec<Dim> {
    let mut out = shape.to_vec();
    out[axis] = d;
    out
}

fn expand(cx: &RuleCx) -> Fact {
    let Some(target) = shape_arg(cx, 1) else {
        return cx.like(0, None);
    };
    let shape = broadcast(&[cx.shape(0), Some(&target)]);
    cx.like(0, shape)
}

fn tile(cx: &RuleCx) -> Fact {
    let Some(input) = cx.shape(0) else {
        return cx.like(0, None);
    };
    let reps = shape_arg(cx, 1);
    let out = match reps {
        Some(r) if r.len() == input.len() => {
            input.iter().zip(&r).map(|(d, k)| sym::mul(d, k)).collect()
        }
        _ => vec![Dim::Unknown; input.len()],
    };
    cx.like(0, Some(out))
}

fn pad(cx: &RuleCx) -> Fact {
    let Some(input) = cx.shape(0) else {
        return cx.like(0, None);
    };
    let r = input.len();
    let pads = if cx.opset() < 11 {
        cx.attr_ints("pads").or_else(|| cx.attr_ints("paddings"))
    } else {
        cx.ints(1)
    };
    let Some(pads) = pads else {
        return cx.like(0, Some(vec![Dim::Unknown; r]));
    };
    let axes: Vec<usize> = if cx.opset() >= 18 && cx.has_input(3) {
        match cx.ints(3).and_then(|a| {
            a.iter()
                .map(|&x| norm_axis(x, r))
                .collect::<Option<Vec<_>>>()
        }) {
            Some(a) => a,
            None => return cx.like(0, Some(vec![Dim::Unknown; r])),
        }
    } else {
        (0..r).collect()
    };
    if pads.len() != 2 * axes.len() {
        return cx.like(0, None);
    }
    let mut out = input.to_vec();
    for (k, &a) in axes.iter().enumerate() {
        out[a] = sym::add(&input[a], &Dim::Known(pads[k] + pads[k + axes.len()]));
    }
    cx.like(0, Some(out))
}

fn resize(cx: &RuleCx) -> Fact {
    let Some(input) = cx.shape(0) else {
        return cx.like(0, None);
    };
    let r = input.len();
    let upsample = cx.node.op_type == "Upsample";
    // sizes (Resize ≥ 11, input 3) take precedence over scales.
    if !upsample && cx.opset() >= 11 && cx.has_input(3) {
        let axes: Vec<usize> = match cx.attr_ints("axes") {
            Some(a) => match a
                .iter()
                .map(|&x| norm_axis(x, r))
                .collect::<Option<Vec<_>>>()
            {
                Some(a) => a,
                None => return cx.like(0, None),
            },
            None => (0..r).collect(),
        };
        let mut out = input.to_vec();
        // Symbolic sizes too: DETR resizes its pixel mask to
        // `Concat(Shape(x)[0:2], [h, w])`, which keeps N and C.
        match shape_arg(cx, 3) {
            Some(sizes)
                if sizes.len() == axes.len()
                    && cx
                        .attr_string("keep_aspect_ratio_policy")
                        .unwrap_or_default()
                        != "not_smaller"
                    && cx
                        .attr_string("keep_aspect_ratio_policy")
                        .unwrap_or_default()
                        != "not_larger" =>
            {
                for (k, &a) in axes.iter().enumerate() {
                    out[a] = sizes[k].clone();
                }
            }
            _ => axes.iter().for_each(|&a| out[a] = Dim::Unknown),
        }
        return cx.like(0, Some(out));
    }
    let scales = if upsample && cx.opset() < 9 {
        cx.attr_floats("scales")
            .map(|v| v.into_iter().map(|x| x as f64).collect())
    } else {
        let slot = if upsample || cx.opset() < 11 { 1 } else { 2 };
        cx.floats(slot)
    };
    let axes: Vec<usize> = match cx.attr_ints("axes").filter(|_| !upsample) {
        Some(a) => match a
            .iter()
            .map(|&x| norm_axis(x, r))
            .collect::<Option<Vec<_>>>()
        {
            Some(a) => a,
            None => return cx.like(0, None),
        },
        None => (0..r).collect(),
    };
    let mut out = input.to_vec();
    match scales {
        Some(s) if s.len() == axes.len() => {
            for (k, &a) in axes.iter().enumerate() {
                out[a] = scale_dim(&input[a], s[k]);
            }
        }
        _ => axes.iter().for_each(|&a| out[a] = Dim::Unknown),
    }
    cx.like(0, Some(out))
}

fn scale_dim(d: &Dim, s: f64) -> Dim {
    match d {
        Dim::Known(v) => Dim::Known((*v as f64 * s).floor() as i64),
        Dim::Sym(_) if s.fract() == 0.0 && s >= 1.0 => sym::mul(d, &Dim::Known(s as i64)),
        _ => Dim::Unknown,
    }
}

fn shape(cx: &RuleCx) -> Fact {
    let Some(input) = cx.shape(0) else {
        return Fact::new(DataType::Int64, Some(vec![Dim::Unknown]));
    };
    let r = input.len() as i64;
    let clamp = |x: i64| if x < 0 { (x + r).max(0) } else { x.min(r) };
    let (start, end) = if cx.opset() >= 15 {
        (clamp(cx.attr_int("start", 0)), clamp(cx.attr_int("end", r)))
    } else {
        (0, r)
    };
    let elems: Vec<Dim> = if start < end {
        input[start as usize..end as usize].to_vec()
    } else {
        vec![]
    };
    Fact::new(DataType::Int64, Some(vec![Dim::Known(elems.len() as i64)]))
        .with_value(Some(SymValue::vector(elems)))
}

fn constant_of_shape(cx: &RuleCx) -> Fact {
    let value = cx.node.attr_tensor("value").ok().flatten();
    let dtype = value.as_ref().map(|t| t.dtype()).unwrap_or(DataType::Float);
    let Some(shape) = shape_arg(cx, 0) else {
        return Fact::new(dtype, None);
    };
    let mut known_value = None;
    if let (Some(t), true) = (&value, shape.len() <= 1 && is_int(dtype))
        && let (Some(k), Ok(v)) = (SymValue::vector(shape.clone()).known(), t.to_i64_vec())
    {
        let n: i64 = k.iter().product();
        if v.len() == 1 && (0..=MAX_VALUE_ELEMS as i64).contains(&n) {
            known_value = Some(SymValue {
                scalar: shape.is_empty(),
                elems: vec![Dim::Known(v[0]); n as usize],
            });
        }
    }
    Fact::new(dtype, Some(shape)).with_value(known_value)
}

fn range(cx: &RuleCx) -> Fact {
    let dtype = cx.dtype(0);
    let scalar = |i: usize| -> Option<Dim> {
        if let Some(v) = cx.ints(i) {
            return v.first().map(|&x| Dim::Known(x));
        }
        cx.value(i).and_then(|v| v.elems.first().cloned())
    };
    let len = if dtype.is_float() {
        match (cx.floats(0), cx.floats(1), cx.floats(2)) {
            (Some(s), Some(l), Some(d))
                if s.len() == 1 && l.len() == 1 && d.len() == 1 && d[0] != 0.0 =>
            {
                Dim::Known(((l[0] - s[0]) / d[0]).ceil().max(0.0) as i64)
            }
            _ => cx.fresh(0, "range"),
        }
    } else {
        match (scalar(0), scalar(1), scalar(2)) {
            (Some(Dim::Known(s)), Some(Dim::Known(l)), Some(Dim::Known(d))) if d != 0 => {
                Dim::Known(((l - s) as f64 / d as f64).ceil().max(0.0) as i64)
            }
            (Some(Dim::Known(0)), Some(l), Some(Dim::Known(d))) if d > 0 && nonneg(&l) => {
                sym::ceil_div(&l, d)
            }
            // `Range(past, past + seq)`: the positions of the new tokens.
            (Some(s), Some(l), Some(Dim::Known(d))) if d > 0 && nonneg(&sym::sub(&l, &s)) => {
                sym::ceil_div(&sym::sub(&l, &s), d)
            }
            _ => cx.fresh(0, "range"),
        }
    };
    let value = match (scalar(0), scalar(2), &len) {
        (Some(Dim::Known(s)), Some(Dim::Known(d)), Dim::Known(n))
            if is_int(dtype) && (*n as usize) <= MAX_VALUE_ELEMS =>
        {
            Some(SymValue::vector(
                (0..*n).map(|i| Dim::Known(s + i * d)).collect(),
            ))
        }
        _ => None,
    };
    Fact::new(dtype, Some(vec![len])).with_value(value)
}

fn flatten(cx: &RuleCx) -> Fact {
    let Some(input) = cx.shape(0) else {
        return cx.like(0, Some(vec![Dim::Unknown, Dim::Unknown]));
    };
    let r = input.len() as i64;
    let axis = cx.attr_int("axis", 1);
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..=r).contains(&a) {
        return cx.like(0, None);
    }
    let a = a as usize;
    cx.like(
        0,
        Some(vec![sym::product(&input[..a]), sym::product(&input[a..])]),
    )
}

fn compress(cx: &RuleCx) -> Fact {
    let Some(input) = cx.shape(0) else {
        return cx.like(0, None);
    };
    match cx.attr_int_opt("axis") {
        None => cx.like(0, Some(vec![cx.fresh(0, "compress")])),
        Some(axis) => match norm_axis(axis, input.len()) {
            Some(a) => cx.like(0, Some(with_dim(input, a, cx.fresh(0, "compress")))),
            None => cx.like(0, None),
        },
    }
}

fn unique(cx: &RuleCx) -> Vec<Fact> {
    let n = cx.fresh(0, "unique");
    let y = match (cx.attr_int_opt("axis"), cx.shape(0)) {
        (None, _) => cx.like(0, Some(vec![n.clone()])),
        (Some(axis), Some(s)) => match norm_axis(axis, s.len()) {
            Some(a) => cx.like(0, Some(with_dim(s, a, n.clone()))),
            None => cx.like(0, None),
        },
        (Some(_), None) => cx.like(0, None),
    };
    let input_len = match (cx.attr_int_opt("axis"), cx.shape(0)) {
        (None, Some(s)) => sym::product(s),
        (Some(axis), Some(s)) => norm_axis(axis, s.len())
            .map(|a| s[a].clone())
            .unwrap_or(Dim::Unknown),
        _ => Dim::Unknown,
    };
    vec![
        y,
        Fact::new(DataType::Int64, Some(vec![n.clone()])),
        Fact::new(DataType::Int64, Some(vec![input_len])),
        Fact::new(DataType::Int64, Some(vec![n])),
    ]
}

fn one_hot(cx: &RuleCx) -> Fact {
    let dtype = cx.dtype(2);
    let Some(idx) = cx.shape(0) else {
        return Fact::new(dtype, None);
    };
    let depth = cx
        .ints(1)
        .or_else(|| cx.floats(1).map(|f| f.iter().map(|x| *x as i64).collect()));
    let depth = depth
        .and_then(|d| d.first().copied())
        .map(Dim::Known)
        .unwrap_or(Dim::Unknown);
    let r = idx.len() + 1;
    let axis = cx.attr_int("axis", -1);
    let Some(a) = norm_axis(axis, r) else {
        return Fact::new(dtype, None);
    };
    let mut out = idx.to_vec();
    out.insert(a, depth);
    Fact::new(dtype, Some(out))
}

fn depth_space(cx: &RuleCx) -> Fact {
    let b = cx.attr_int("blocksize", 0);
    let Some(s) = cx.shape(0) else {
        return cx.like(0, None);
    };
    if s.len() != 4 || b <= 0 {
        return cx.like(0, None);
    }
    let bb = Dim::Known(b);
    let out = if cx.node.op_type == "DepthToSpace" {
        vec![
            s[0].clone(),
            sym::div_exact(&s[1], &Dim::Known(b * b)),
            sym::mul(&s[2], &bb),
            sym::mul(&s[3], &bb),
        ]
    } else {
        vec![
            s[0].clone(),
            sym::mul(&s[1], &Dim::Known(b * b)),
            sym::div_exact(&s[2], &bb),
            sym::div_exact(&s[3], &bb),
        ]
    };
    cx.like(0, Some(out))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::slice_dim;
    use crate::attr::Attribute;
    use crate::dtype::DataType;
    use crate::shape::Dim;
    use crate::tensor::Tensor;

    #[test]
    fn roi_align_has_a_region_per_roi_of_the_channels_and_output_size() {
        let f = run(
            "RoiAlign",
            16,
            &[
                f32s(&["1", "256", "h", "w"]),
                f32s(&["rois", "4"]),
                Input::T(DataType::Int64, d(&["rois"])),
            ],
            vec![
                Attribute::int("output_height", 7),
                Attribute::int("output_width", 5),
            ],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[rois,256,7,5]");
        assert_eq!(f[0].ty.dtype, DataType::Float);
    }

    #[test]
    fn reshape_to_another_element_count_has_unknown_dims() {
        let f = run(
            "Reshape",
            14,
            &[f32s(&["2", "3", "64"]), i64c(&[2, 3, 100000, 100000])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[?,?,?,?]");
        let f = run(
            "Reshape",
            14,
            &[f32s(&["2", "3", "64"]), i64c(&[6, 64])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[6,64]");
    }

    #[test]
    fn reshape_zero_and_minus_one() {
        let f = run(
            "Reshape",
            14,
            &[f32s(&["batch", "seq", "32"]), i64c(&[0, 0, 2, -1])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[batch,seq,2,16]");
        let f = run(
            "Reshape",
            14,
            &[f32s(&["batch", "seq", "32"]), i64c(&[-1, 32])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[batch*seq,32]");
        let f = run(
            "Reshape",
            14,
            &[f32s(&["batch", "4", "8"]), i64c(&[0, -1])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[batch,32]");
        // An unknown dim copied by 0 cancels out of the -1.
        let f = run(
            "Reshape",
            14,
            &[f32s(&["?", "4", "8"]), i64c(&[0, -1])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[?,32]");
        // allowzero: 0 is a real zero.
        let f = run(
            "Reshape",
            14,
            &[f32s(&["0", "4"]), i64c(&[0, 4])],
            vec![Attribute::int("allowzero", 1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[0,4]");
        // Unknown target with known length: rank only.
        let f = run(
            "Reshape",
            14,
            &[f32s(&["2", "4"]), Input::T(DataType::Int64, d(&["3"]))],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[?,?,?]");
        // Opset 1-4: shape attribute.
        let f = run(
            "Reshape",
            4,
            &[f32s(&["2", "6"])],
            vec![Attribute::ints("shape", vec![3, -1])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[3,4]");
    }

    #[test]
    fn transpose_squeeze_unsqueeze() {
        let f = run(
            "Transpose",
            17,
            &[f32s(&["a", "b", "c"])],
            vec![Attribute::ints("perm", vec![2, 0, 1])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[c,a,b]");
        let f = run("Transpose", 17, &[f32s(&["a", "b", "c"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[c,b,a]");
        // Unknown rank: perm gives the rank.
        let f = run(
            "Transpose",
            17,
            &[Input::Unranked(DataType::Float)],
            vec![Attribute::ints("perm", vec![1, 0])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[?,?]");
        let f = run(
            "Transpose",
            17,
            &[Input::Unranked(DataType::Float)],
            vec![],
            1,
        );
        assert_eq!(f[0].shape(), None);
        // Squeeze: attribute before 13, input from 13; negative axes.
        let f = run(
            "Squeeze",
            11,
            &[f32s(&["1", "n", "1"])],
            vec![Attribute::ints("axes", vec![-1])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[1,n]");
        let f = run(
            "Squeeze",
            13,
            &[f32s(&["1", "n", "1"]), i64c(&[0])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,1]");
        // No axes: all ones go, only when every dim is known.
        let f = run("Squeeze", 13, &[f32s(&["1", "3", "1"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[3]");
        let f = run("Squeeze", 13, &[f32s(&["1", "n"])], vec![], 1);
        assert_eq!(f[0].shape(), None);
        let f = run(
            "Unsqueeze",
            11,
            &[f32s(&["a", "b"])],
            vec![Attribute::ints("axes", vec![0, -1])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[1,a,b,1]");
        let f = run(
            "Unsqueeze",
            13,
            &[f32s(&["a", "b"]), i64c(&[1, 2])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[a,1,1,b]");
        // Opset 13 with axes as an attribute is not how opset 13 works: unknown.
        let f = run(
            "Unsqueeze",
            13,
            &[f32s(&["a"])],
            vec![Attribute::ints("axes", vec![0])],
            1,
        );
        assert_eq!(f[0].shape(), None);
    }

    #[test]
    fn slice_rules() {
        assert_eq!(slice_dim(&Dim::Known(10), 2, 8, 3), Dim::Known(2));
        assert_eq!(slice_dim(&Dim::Known(10), -3, i64::MAX, 1), Dim::Known(3));
        assert_eq!(slice_dim(&Dim::Known(10), -1, i64::MIN, -1), Dim::Known(10));
        assert_eq!(slice_dim(&Dim::Known(10), 8, 2, -2), Dim::Known(3));
        assert_eq!(slice_dim(&Dim::Known(4), 5, 10, 1), Dim::Known(0));
        // Steps at the ends of i64 (a fuzzed Slice): one element, no overflow.
        assert_eq!(slice_dim(&Dim::Known(32), 0, 32, i64::MAX), Dim::Known(1));
        assert_eq!(slice_dim(&Dim::Known(32), 31, -64, i64::MIN), Dim::Known(1));
        assert_eq!(
            slice_dim(&Dim::Known(32), i64::MIN, i64::MAX, 1),
            Dim::Known(32)
        );
        let seq = Dim::Sym("seq".into());
        assert_eq!(slice_dim(&seq, 0, i64::MAX, 1), seq);
        assert_eq!(slice_dim(&seq, 1, i64::MAX, 1), Dim::Sym("seq-1".into()));
        assert_eq!(slice_dim(&seq, 0, 5, 1), Dim::Unknown);
        let f = run(
            "Slice",
            13,
            &[f32s(&["n", "10"]), i64c(&[2]), i64c(&[-2]), i64c(&[-1])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,6]");
        let f = run(
            "Slice",
            9,
            &[f32s(&["n", "10"])],
            vec![
                Attribute::ints("starts", vec![1]),
                Attribute::ints("ends", vec![3]),
                Attribute::ints("axes", vec![1]),
            ],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,2]");
        // Unknown bounds on a known axis: only that axis is unknown.
        let f = run(
            "Slice",
            13,
            &[
                f32s(&["n", "10"]),
                Input::T(DataType::Int64, d(&["1"])),
                i64c(&[4]),
                i64c(&[1]),
            ],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,?]");
    }

    #[test]
    fn gather_concat_split() {
        let f = run(
            "Gather",
            17,
            &[
                f32s(&["100", "32"]),
                Input::T(DataType::Int64, d(&["batch", "seq"])),
            ],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[batch,seq,32]");
        let f = run(
            "Gather",
            17,
            &[f32s(&["a", "b", "c"]), i64s(0)],
            vec![Attribute::int("axis", -2)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[a,c]");
        let f = run(
            "GatherElements",
            17,
            &[f32s(&["a", "b"]), Input::T(DataType::Int64, d(&["a", "3"]))],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[a,3]");
        let f = run(
            "GatherND",
            17,
            &[
                f32s(&["2", "3", "4"]),
                Input::T(DataType::Int64, d(&["5", "2"])),
            ],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[5,4]");
        let f = run(
            "Concat",
            17,
            &[f32s(&["b", "3"]), f32s(&["b", "seq"]), f32s(&["b", "1"])],
            vec![Attribute::int("axis", -1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,seq+4]");
        let f = run(
            "Split",
            13,
            &[f32s(&["b", "10"]), i64c(&[3, 7])],
            vec![Attribute::int("axis", 1)],
            2,
        );
        assert_eq!(shape_of(&f[0]), "[b,3]");
        assert_eq!(shape_of(&f[1]), "[b,7]");
        let f = run("Split", 11, &[f32s(&["6"])], vec![], 3);
        assert_eq!(shape_of(&f[2]), "[2]");
        let f = run(
            "Split",
            11,
            &[f32s(&["4"])],
            vec![Attribute::ints("split", vec![1, 3])],
            2,
        );
        assert_eq!(shape_of(&f[1]), "[3]");
        let f = run(
            "Split",
            18,
            &[f32s(&["7"])],
            vec![Attribute::int("num_outputs", 3)],
            3,
        );
        assert_eq!(
            (shape_of(&f[0]), shape_of(&f[2])),
            ("[3]".into(), "[1]".into())
        );
        let f = run("Split", 13, &[f32s(&["2*h"])], vec![], 2);
        assert_eq!(shape_of(&f[0]), "[h]");
    }

    #[test]
    fn expand_tile_pad_resize() {
        let f = run(
            "Expand",
            13,
            &[f32s(&["3", "1"]), i64c(&[2, 1, 4])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[2,3,4]");
        let f = run("Tile", 13, &[f32s(&["n", "3"]), i64c(&[2, 2])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[2*n,6]");
        let f = run(
            "Pad",
            11,
            &[f32s(&["n", "3", "8", "8"]), i64c(&[0, 0, 1, 2, 0, 0, 1, 2])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,3,10,12]");
        let f = run(
            "Pad",
            2,
            &[f32s(&["n", "3"])],
            vec![Attribute::ints("pads", vec![0, 1, 0, 1])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,5]");
        let scales = Input::C(Box::new(Tensor::from_f32(vec![4], &[1.0, 1.0, 2.0, 2.0])));
        let f = run(
            "Resize",
            11,
            &[f32s(&["n", "3", "h", "5"]), Input::None, scales],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,3,2*h,10]");
        let scales = Input::C(Box::new(Tensor::from_f32(vec![4], &[1.0, 1.0, 2.0, 2.0])));
        let f = run(
            "Resize",
            10,
            &[f32s(&["n", "3", "4", "5"]), scales],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,3,8,10]");
        let f = run(
            "Resize",
            13,
            &[
                f32s(&["n", "3", "4", "5"]),
                Input::None,
                Input::None,
                i64c(&[1, 3, 7, 9]),
            ],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[1,3,7,9]");
        let f = run(
            "Upsample",
            7,
            &[f32s(&["n", "3", "4", "5"])],
            vec![Attribute::floats("scales", vec![1.0, 1.0, 2.0, 3.0])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,3,8,15]");
    }

    #[test]
    fn shape_size_constant_of_shape_range_flatten() {
        let f = run(
            "Shape",
            15,
            &[f32s(&["b", "s", "4"])],
            vec![Attribute::int("start", 1), Attribute::int("end", -1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[1]");
        assert_eq!(f[0].value.as_ref().unwrap().elems, d(&["s"]));
        // start/end are ignored before opset 15.
        let f = run(
            "Shape",
            13,
            &[f32s(&["b", "s", "4"])],
            vec![Attribute::int("start", 1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[3]");
        let f = run("Size", 13, &[f32s(&["b", "4"])], vec![], 1);
        assert_eq!(f[0].value.as_ref().unwrap().elems, d(&["4*b"]));
        let f = run(
            "ConstantOfShape",
            13,
            &[i64c(&[2, 3])],
            vec![Attribute::tensor("value", &Tensor::from_i64(vec![1], &[7]))],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[2,3]");
        assert_eq!(f[0].ty.dtype, DataType::Int64);
        assert!(f[0].value.is_none(), "rank 2 values are not tracked");
        let f = run(
            "ConstantOfShape",
            13,
            &[i64c(&[3])],
            vec![Attribute::tensor("value", &Tensor::from_i64(vec![1], &[7]))],
            1,
        );
        assert_eq!(f[0].value.as_ref().unwrap().known(), Some(vec![7, 7, 7]));
        let f = run("ConstantOfShape", 13, &[i64c(&[3])], vec![], 1);
        assert_eq!(f[0].ty.dtype, DataType::Float);
        let f = run("Range", 13, &[i64s(0), i64s(10), i64s(3)], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[4]");
        assert_eq!(f[0].value.as_ref().unwrap().known(), Some(vec![0, 3, 6, 9]));
        let f = run(
            "Range",
            13,
            &[i64s(0), Input::T(DataType::Int64, d(&[])), i64s(1)],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[range_out0]");
        let f = run("Flatten", 13, &[f32s(&["b", "3", "4", "5"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[b,60]");
        let f = run(
            "Flatten",
            13,
            &[f32s(&["b", "3", "4"])],
            vec![Attribute::int("axis", -1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[3*b,4]");
        let f = run("NonZero", 13, &[f32s(&["b", "3"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[2,nonzero_out0]");
        let f = run(
            "OneHot",
            13,
            &[
                Input::T(DataType::Int64, d(&["b", "s"])),
                i64s(10),
                Input::C(Box::new(Tensor::from_f32(vec![2], &[0.0, 1.0]))),
            ],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[b,s,10]");
    }
}
