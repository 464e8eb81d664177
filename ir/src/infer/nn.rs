//! Convolutions, pools and normalizations.

use crate::dtype::DataType;
use crate::shape::Dim;

use super::facts::Fact;
use super::rule_cx::RuleCx;
use super::sym;

pub(crate) fn infer(cx: &RuleCx) -> Option<Vec<Fact>> {
    Some(match cx.node.op_type.as_str() {
        "Conv" | "ConvInteger" => vec![conv(cx, false)],
        "ConvTranspose" => vec![conv_transpose(cx)],
        "MaxPool" => {
            let y = conv(cx, true);
            let idx = Fact::new(DataType::Int64, y.ty.shape.clone());
            vec![y, idx]
        }
        "AveragePool" | "LpPool" => vec![conv(cx, true)],
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => {
            let shape = cx.shape(0).map(|s| {
                s.iter()
                    .enumerate()
                    .map(|(i, d)| if i < 2 { d.clone() } else { Dim::Known(1) })
                    .collect()
            });
            vec![cx.like(0, shape)]
        }
        "BatchNormalization" => {
            let c = cx
                .shape(1)
                .and_then(|s| s.first().cloned())
                .unwrap_or(Dim::Unknown);
            let mut out = vec![cx.like(0, cx.shape(0).map(|s| s.to_vec()))];
            for _ in 1..cx.node.outputs.len() {
                out.push(cx.like(3, Some(vec![c.clone()])));
            }
            out
        }
        "LayerNormalization" => layer_norm(cx, cx.attr_int("axis", -1)),
        "Attention" => attention(cx),
        "LSTM" | "GRU" | "RNN" => recurrent(cx),
        "GroupNormalization" | "RMSNormalization" => {
            vec![cx.like(0, cx.shape(0).map(|s| s.to_vec()))]
        }
        _ => return None,
    })
}

/// Attention (opset 23): Y is `[B, Hq, S, dv]` for 4-D inputs, `[B, S,
/// Hq * dv]` for 3-D ones (`dv` = V's width / `kv_num_heads`). The cache and
/// debug outputs are left unknown.
fn attention(cx: &RuleCx) -> Vec<Fact> {
    let y = match (cx.shape(0), cx.shape(2)) {
        (Some(q), Some(v)) if q.len() == 4 && v.len() == 4 => {
            Some(vec![q[0].clone(), q[1].clone(), q[2].clone(), v[3].clone()])
        }
        (Some(q), Some(v)) if q.len() == 3 && v.len() == 3 => {
            let (qh, kvh) = (
                cx.attr_int("q_num_heads", 0),
                cx.attr_int("kv_num_heads", 0),
            );
            let width = if qh > 0 && qh == kvh {
                v[2].clone()
            } else {
                match v[2] {
                    Dim::Known(w) if qh > 0 && kvh > 0 && w % kvh == 0 => Dim::Known(w / kvh * qh),
                    _ => Dim::Unknown,
                }
            };
            Some(vec![q[0].clone(), q[1].clone(), width])
        }
        _ => None,
    };
    let mut out = vec![cx.like(0, y)];
    for _ in 1..cx.node.outputs.len() {
        out.push(cx.like(0, None));
    }
    out
}

/// LayerNormalization: Y like X; Mean and InvStdDev keep the dims before
/// `axis` and have size 1 from `axis` on.
pub(crate) fn layer_norm(cx: &RuleCx, axis: i64) -> Vec<Fact> {
    let y = cx.like(0, cx.shape(0).map(|s| s.to_vec()));
    let stats_dtype = match cx.attr_int("stash_type", 1) {
        1 => DataType::Float,
        c => DataType::from_code(c as i32),
    };
    let stats = cx.shape(0).and_then(|s| {
        let a = super::facts::norm_axis(axis, s.len())?;
        Some(
            s.iter()
                .enumerate()
                .map(|(i, d)| if i < a { d.clone() } else { Dim::Known(1) })
                .collect(),
        )
    });
    let mut out = vec![y];
    for _ in 1..cx.node.outputs.len() {
        out.push(Fact::new(stats_dtype, stats.clone()));
    }
    out
}

struct Window {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    pads: Vec<i64>,
    auto_pad: String,
}

fn window(cx: &RuleCx, spatial: usize, kernel_from_weight: Option<&[Dim]>) -> Option<Window> {
    let kernel = match cx.attr_ints("kernel_shape") {
        Some(k) => k,
        None => kernel_from_weight?
            .iter()
            .map(|d| match d {
                Dim::Known(v) => Some(*v),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?,
    };
    if kernel.len() != spatial {
        return None;
    }
    let strides = cx.attr_ints("strides").unwrap_or_else(|| vec![1; spatial]);
    let dilations = cx
        .attr_ints("dilations")
        .unwrap_or_else(|| vec![1; spatial]);
    let pads = cx.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * spatial]);
    if strides.len() != spatial || dilations.len() != spatial || pads.len() != 2 * spatial {
        return None;
    }
    // Attributes a file may set to anything: beyond these bounds no runtime
    // runs the op, and the window arithmetic below could overflow i64.
    const MAX: i64 = 1 << 31;
    let within = |v: &[i64], lo: i64| v.iter().all(|&x| (lo..=MAX).contains(&x));
    if !within(&strides, 1) || !within(&dilations, 1) || !within(&pads, 0) || !within(&kernel, 1) {
        return None;
    }
    Some(Window {
        kernel,
        strides,
        dilations,
        pads,
        auto_pad: cx
            .attr_string("auto_pad")
            .unwrap_or_else(|| "NOTSET".into()),
    })
}

/// Conv and pools: `[N, C_out, spatial...]`.
pub(crate) fn conv(cx: &RuleCx, pool: bool) -> Fact {
    let dtype = if cx.node.op_type == "ConvInteger" {
        DataType::Int32
    } else {
        cx.dtype(0)
    };
    let Some(x) = cx.shape(0) else {
        // Rank from the weight.
        return Fact::new(
            dtype,
            cx.shape(1)
                .filter(|_| !pool)
                .map(|w| vec![Dim::Unknown; w.len()]),
        );
    };
    if x.len() < 3 {
        return Fact::new(dtype, None);
    }
    let spatial = x.len() - 2;
    let channels = if pool {
        x[1].clone()
    } else {
        cx.shape(1)
            .and_then(|w| w.first().cloned())
            .unwrap_or(Dim::Unknown)
    };
    let weight_kernel = if pool {
        None
    } else {
        cx.shape(1).filter(|w| w.len() == x.len()).map(|w| &w[2..])
    };
    let mut out = vec![x[0].clone(), channels];
    let Some(w) = window(cx, spatial, weight_kernel) else {
        out.extend(vec![Dim::Unknown; spatial]);
        return Fact::new(dtype, Some(out));
    };
    let ceil_mode = pool && cx.attr_int("ceil_mode", 0) != 0;
    for i in 0..spatial {
        let d = &x[2 + i];
        let s = w.strides[i];
        let extent = (w.kernel[i] - 1) * w.dilations[i] + 1;
        out.push(match w.auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => sym::ceil_div(d, s),
            "VALID" => sliding(d, 0, extent, s, ceil_mode),
            _ => sliding(d, w.pads[i] + w.pads[i + spatial], extent, s, ceil_mode)
                .pipe_ceil_fix(d, w.pads[i], s, ceil_mode),
        });
    }
    Fact::new(dtype, Some(out))
}

/// `floor((d + pads - extent) / s) + 1` (or ceil in ceil mode).
fn sliding(d: &Dim, pads: i64, extent: i64, s: i64, ceil_mode: bool) -> Dim {
    let span = sym::add(d, &Dim::Known(pads - extent));
    if let Dim::Known(v) = span
        && v < 0
    {
        return Dim::Unknown;
    }
    if ceil_mode {
        if !matches!(d, Dim::Known(_)) {
            return Dim::Unknown;
        }
        sym::add(&sym::ceil_div(&span, s), &Dim::Known(1))
    } else {
        sym::add(&sym::floor_div(&span, s), &Dim::Known(1))
    }
}

trait CeilFix {
    fn pipe_ceil_fix(self, d: &Dim, pad_begin: i64, s: i64, ceil_mode: bool) -> Dim;
}

impl CeilFix for Dim {
    /// In ceil mode the last window must start inside the input or the
    /// leading padding; otherwise it is dropped.
    fn pipe_ceil_fix(self, d: &Dim, pad_begin: i64, s: i64, ceil_mode: bool) -> Dim {
        match (ceil_mode, &self, d) {
            (true, Dim::Known(o), Dim::Known(v))
                if (o - 1).checked_mul(s) >= v.checked_add(pad_begin) =>
            {
                Dim::Known(o - 1)
            }
            _ => self,
        }
    }
}

fn conv_transpose(cx: &RuleCx) -> Fact {
    let dtype = cx.dtype(0);
    let Some(x) = cx.shape(0) else {
        return Fact::new(dtype, None);
    };
    if x.len() < 3 {
        return Fact::new(dtype, None);
    }
    let spatial = x.len() - 2;
    let group = cx.attr_int("group", 1);
    let channels = cx
        .shape(1)
        .and_then(|w| w.get(1).cloned())
        .map(|c| sym::mul(&c, &Dim::Known(group)))
        .unwrap_or(Dim::Unknown);
    let mut out = vec![x[0].clone(), channels];
    if let Some(os) = cx.attr_ints("output_shape")
        && os.len() >= spatial
    {
        out.extend(os[os.len() - spatial..].iter().map(|&v| Dim::Known(v)));
        return Fact::new(dtype, Some(out));
    }
    let weight_kernel = cx.shape(1).filter(|w| w.len() == x.len()).map(|w| &w[2..]);
    let Some(w) = window(cx, spatial, weight_kernel) else {
        out.extend(vec![Dim::Unknown; spatial]);
        return Fact::new(dtype, Some(out));
    };
    let out_pad = cx
        .attr_ints("output_padding")
        .unwrap_or_else(|| vec![0; spatial]);
    for i in 0..spatial {
        let d = &x[2 + i];
        let s = w.strides[i];
        out.push(match w.auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => sym::mul(d, &Dim::Known(s)),
            auto => {
                let extent = (w.kernel[i] - 1) * w.dilations[i] + 1;
                let pads = if auto == "VALID" {
                    0
                } else {
                    w.pads[i] + w.pads[i + spatial]
                };
                let op = out_pad.get(i).copied().unwrap_or(0);
                let base = sym::mul(&sym::sub(d, &Dim::Known(1)), &Dim::Known(s));
                match op.checked_add(extent).and_then(|v| v.checked_sub(pads)) {
                    Some(k) => sym::add(&base, &Dim::Known(k)),
                    None => Dim::Unknown,
                }
            }
        });
    }
    Fact::new(dtype, Some(out))
}

/// RNN/GRU/LSTM: `Y [seq, dirs, batch, hidden]`, `Y_h` (and LSTM's `Y_c`)
/// `[dirs, batch, hidden]`; with `layout=1` batch comes first.
fn recurrent(cx: &RuleCx) -> Vec<Fact> {
    let x = cx.shape(0);
    let layout = cx.attr_int("layout", 0);
    let at = |i: usize| x.and_then(|s| s.get(i).cloned()).unwrap_or(Dim::Unknown);
    let (seq, batch) = if layout == 0 {
        (at(0), at(1))
    } else {
        (at(1), at(0))
    };
    let dirs = match cx.attr_string("direction").as_deref() {
        Some("bidirectional") => Dim::Known(2),
        _ => Dim::Known(1),
    };
    let hidden = match cx.attr_int_opt("hidden_size") {
        Some(h) => Dim::Known(h),
        None => Dim::Unknown,
    };
    let known_rank = x.is_some_and(|s| s.len() == 3);
    let y = if !known_rank {
        None
    } else if layout == 0 {
        Some(vec![seq, dirs.clone(), batch.clone(), hidden.clone()])
    } else {
        Some(vec![batch.clone(), seq, dirs.clone(), hidden.clone()])
    };
    let state = if !known_rank {
        None
    } else if layout == 0 {
        Some(vec![dirs, batch, hidden])
    } else {
        Some(vec![batch, dirs, hidden])
    };
    let mut out = vec![cx.like(0, y)];
    for _ in 1..cx.node.outputs.len() {
        out.push(cx.like(0, state.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::attr::Attribute;

    #[test]
    fn conv_shapes() {
        let f = run(
            "Conv",
            17,
            &[f32s(&["n", "3", "32", "32"]), f32s(&["8", "3", "3", "3"])],
            vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,8,32,32]");
        let f = run(
            "Conv",
            17,
            &[f32s(&["n", "3", "32", "32"]), f32s(&["8", "3", "3", "3"])],
            vec![
                Attribute::ints("strides", vec![2, 2]),
                Attribute::ints("pads", vec![1, 1, 1, 1]),
            ],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,8,16,16]");
        let f = run(
            "Conv",
            17,
            &[f32s(&["n", "3", "h", "w"]), f32s(&["8", "3", "3", "3"])],
            vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,8,h,w]");
        let f = run(
            "Conv",
            17,
            &[f32s(&["n", "3", "h", "w"]), f32s(&["8", "3", "3", "3"])],
            vec![Attribute::ints("strides", vec![2, 2])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,8,(h+1)//2-1,(w+1)//2-1]");
        let f = run(
            "Conv",
            17,
            &[f32s(&["n", "3", "h", "7"]), f32s(&["8", "3", "3", "3"])],
            vec![
                Attribute::string("auto_pad", "SAME_UPPER"),
                Attribute::ints("strides", vec![2, 2]),
            ],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,8,(h+1)//2,4]");
        let f = run(
            "Conv",
            17,
            &[f32s(&["n", "3", "10"]), f32s(&["8", "3", "3"])],
            vec![Attribute::ints("dilations", vec![2])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,8,6]");
    }

    #[test]
    fn pools() {
        let f = run(
            "MaxPool",
            17,
            &[f32s(&["n", "8", "32", "32"])],
            vec![
                Attribute::ints("kernel_shape", vec![3, 3]),
                Attribute::ints("strides", vec![2, 2]),
                Attribute::ints("pads", vec![1, 1, 1, 1]),
            ],
            2,
        );
        assert_eq!(shape_of(&f[0]), "[n,8,16,16]");
        assert_eq!(f[1].ty.dtype, crate::dtype::DataType::Int64);
        let f = run(
            "MaxPool",
            17,
            &[f32s(&["1", "1", "6", "6"])],
            vec![
                Attribute::ints("kernel_shape", vec![3, 3]),
                Attribute::ints("strides", vec![2, 2]),
                Attribute::int("ceil_mode", 1),
            ],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[1,1,3,3]");
        let f = run(
            "AveragePool",
            17,
            &[f32s(&["1", "1", "5", "5"])],
            vec![
                Attribute::ints("kernel_shape", vec![2, 2]),
                Attribute::ints("strides", vec![2, 2]),
                Attribute::int("ceil_mode", 1),
            ],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[1,1,3,3]");
        let f = run(
            "GlobalAveragePool",
            17,
            &[f32s(&["n", "16", "h", "w"])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,16,1,1]");
    }

    #[test]
    fn conv_transpose_shapes() {
        let f = run(
            "ConvTranspose",
            17,
            &[f32s(&["n", "8", "5", "5"]), f32s(&["8", "4", "3", "3"])],
            vec![Attribute::ints("strides", vec![2, 2])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,4,11,11]");
        let f = run(
            "ConvTranspose",
            17,
            &[f32s(&["n", "8", "h", "5"]), f32s(&["8", "2", "4", "4"])],
            vec![
                Attribute::ints("strides", vec![2, 2]),
                Attribute::ints("pads", vec![1, 1, 1, 1]),
                Attribute::int("group", 2),
            ],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,4,2*h,10]");
        let f = run(
            "ConvTranspose",
            17,
            &[f32s(&["n", "8", "5", "5"]), f32s(&["8", "4", "3", "3"])],
            vec![Attribute::ints("output_shape", vec![12, 12])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,4,12,12]");
    }

    #[test]
    fn normalizations() {
        let f = run(
            "BatchNormalization",
            15,
            &[
                f32s(&["n", "8", "4", "4"]),
                f32s(&["8"]),
                f32s(&["8"]),
                f32s(&["8"]),
                f32s(&["8"]),
            ],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,8,4,4]");
        let f = run(
            "LayerNormalization",
            17,
            &[f32s(&["b", "s", "32"]), f32s(&["32"])],
            vec![],
            3,
        );
        assert_eq!(shape_of(&f[0]), "[b,s,32]");
        assert_eq!(shape_of(&f[1]), "[b,s,1]");
        let f = run(
            "LayerNormalization",
            17,
            &[f32s(&["b", "s", "32"]), f32s(&["s", "32"])],
            vec![Attribute::int("axis", 1)],
            2,
        );
        assert_eq!(shape_of(&f[1]), "[b,1,1]");
    }
}
