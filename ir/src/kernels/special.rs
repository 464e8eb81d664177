//! Ops the fallback runtime (tract 0.23.9) gets wrong on some of their forms,
//! so infopt computes them itself: BitShift (tract takes the shift count
//! modulo the bit width), DepthToSpace/SpaceToDepth (tract gives the DCR
//! layout for CRD), Celu (tract drops alpha from the negative branch) and Swish (tract
//! ignores alpha). Each was found by ONNX's backend node tests.

use super::array::{Array, Buf, Num};
use super::cx::{Cx, broadcast_dims, broadcast_index};
use super::error::KernelError;
use crate::dtype::DataType;

pub(crate) fn run(cx: &Cx, op: &str) -> Result<Option<Vec<Array>>, KernelError> {
    Ok(Some(vec![match op {
        "BitShift" => bit_shift(cx)?,
        "DepthToSpace" | "SpaceToDepth" => depth_space(cx, op)?,
        "Celu" => {
            let alpha = f64::from(cx.attr_float("alpha", 1.0)?);
            float_map(cx, op, |x| {
                x.max(0.0) + (alpha * (x / alpha).exp_m1()).min(0.0)
            })?
        }
        "Swish" => {
            let alpha = f64::from(cx.attr_float("alpha", 1.0)?);
            float_map(cx, op, |x| x / (1.0 + (-alpha * x).exp()))?
        }
        "Softmax" => softmax(cx)?,
        _ => return Ok(None),
    }]))
}

/// Softmax as its function body computes it (ReduceMax, Sub, Exp,
/// ReduceSum, Div), each step's result rounded to the input's type: for
/// float16 that is what ONNX's definition (and its tests) compute; tract
/// rounds differently. Opset < 13: over the input flattened to 2-D at `axis`
/// (default 1); since 13: over `axis` alone (default -1).
fn softmax(cx: &Cx) -> Result<Array, KernelError> {
    let x = cx.input(0)?;
    let dtype = x.dtype();
    let Some(Num::F(v)) = x.buf.to_num() else {
        return Err(KernelError::Unsupported(format!("Softmax on {dtype}")));
    };
    let rank = x.rank();
    let a = super::cx::axis(
        cx.attr_int("axis", if cx.opset < 13 { 1 } else { -1 })?,
        rank.max(1),
    )?;
    let (outer, n, inner) = if cx.opset < 13 {
        (
            x.dims[..a].iter().product::<usize>(),
            x.dims[a..].iter().product::<usize>(),
            1,
        )
    } else {
        (
            x.dims[..a].iter().product::<usize>(),
            x.dims.get(a).copied().unwrap_or(1),
            x.dims[(a + 1).min(rank)..].iter().product::<usize>(),
        )
    };
    let round = |t: f64| -> f64 {
        match dtype {
            DataType::Float => t as f32 as f64,
            DataType::Float16 => half::f16::from_f64(t).to_f64(),
            DataType::Bfloat16 => half::bf16::from_f64(t).to_f64(),
            _ => t,
        }
    };
    let mut out = vec![0f64; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let max = (0..n).map(|k| v[at(k)]).fold(f64::NEG_INFINITY, |m, t| {
                if m.is_nan() || t.is_nan() {
                    f64::NAN
                } else {
                    m.max(t)
                }
            });
            let mut sum = 0f64;
            for k in 0..n {
                let e = round(round(v[at(k)] - max).exp());
                out[at(k)] = e;
                sum += e;
            }
            let sum = round(sum);
            for k in 0..n {
                out[at(k)] = out[at(k)] / sum;
            }
        }
    }
    let buf = Buf::from_f64(dtype, out)
        .ok_or_else(|| KernelError::Unsupported(format!("Softmax on {dtype}")))?;
    Ok(Array::new(x.dims, buf))
}

/// A float unary op computed in f64 and rounded once to the input's type
/// (for float16 this is what the op's definition asks: one rounding of the
/// exact result, not the rounding of each step).
fn float_map(cx: &Cx, op: &str, f: impl Fn(f64) -> f64) -> Result<Array, KernelError> {
    let x = cx.input(0)?;
    let dtype = x.dtype();
    let Some(Num::F(v)) = x.buf.to_num() else {
        return Err(KernelError::Unsupported(format!("{op} on {dtype}")));
    };
    let out = v
        .into_iter()
        .map(|x| if x.is_nan() { x } else { f(x) })
        .collect();
    let buf = Buf::from_f64(dtype, out)
        .ok_or_else(|| KernelError::Unsupported(format!("{op} on {dtype}")))?;
    Ok(Array::new(x.dims, buf))
}

/// Bit width of an integer buffer, and whether it is signed.
fn int_width(buf: &Buf) -> Option<(u32, bool)> {
    Some(match buf {
        Buf::I8(_) => (8, true),
        Buf::I16(_) => (16, true),
        Buf::I32(_) => (32, true),
        Buf::I64(_) => (64, true),
        Buf::U8(_) => (8, false),
        Buf::U16(_) => (16, false),
        Buf::U32(_) => (32, false),
        Buf::U64(_) => (64, false),
        _ => return None,
    })
}

/// BitShift as ONNX defines it: a shift count outside `[0, width)` (negative,
/// or at least the bit width) shifts every bit out, giving 0, or -1 for a
/// right shift of a negative signed value (the sign fills the result). A left
/// shift wraps within the type; a right shift of a signed value is arithmetic.
fn bit_shift(cx: &Cx) -> Result<Array, KernelError> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let dtype = a.dtype();
    if b.dtype() != dtype {
        return Err(KernelError::invalid(format!(
            "BitShift of {dtype} and {}",
            b.dtype()
        )));
    }
    let (width, signed) = int_width(&a.buf)
        .ok_or_else(|| KernelError::Unsupported(format!("BitShift on {dtype}")))?;
    let left = match cx.node.attr_string("direction") {
        Ok(Some(d)) if d == "LEFT" => true,
        Ok(Some(d)) if d == "RIGHT" => false,
        Ok(other) => {
            return Err(KernelError::invalid(format!(
                "BitShift direction must be LEFT or RIGHT, not {other:?}"
            )));
        }
        Err(e) => return Err(KernelError::invalid(e.to_string())),
    };
    let (Some(Num::I(x)), Some(Num::I(s))) = (a.buf.to_num(), b.buf.to_num()) else {
        return Err(KernelError::Unsupported(format!("BitShift on {dtype}")));
    };
    let dims = broadcast_dims(&[&a.dims, &b.dims])?;
    cx.check_dims(dtype, &dims)?;
    let (ia, ib) = (
        broadcast_index(&a.dims, &dims),
        broadcast_index(&b.dims, &dims),
    );
    // Values as the type's bits in a u64, and back (sign-extended when signed).
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let from_bits = |bits: u64| -> i128 {
        let bits = bits & mask;
        if signed && bits >> (width - 1) == 1 {
            bits as i128 - (1i128 << width)
        } else {
            bits as i128
        }
    };
    let out: Vec<i128> = ia
        .iter()
        .zip(&ib)
        .map(|(&i, &j)| {
            let (v, n) = (x[i], s[j]);
            let in_range = (0..i128::from(width)).contains(&n);
            match (left, in_range) {
                (true, true) => from_bits((v as u64) << n),
                (true, false) => 0,
                // i128's >> is arithmetic: right for signed, and an unsigned
                // value is non-negative.
                (false, true) => v >> n,
                (false, false) => {
                    if v < 0 {
                        -1
                    } else {
                        0
                    }
                }
            }
        })
        .collect();
    let buf = Buf::from_i128(dtype, out)
        .ok_or_else(|| KernelError::Unsupported(format!("BitShift on {dtype}")))?;
    Ok(Array::new(dims, buf))
}

/// DepthToSpace / SpaceToDepth on an NCHW tensor, in either channel order:
/// DCR (depth-column-row: the block index is the outer part of the channel)
/// or CRD (column-row-depth: the block index is the inner part).
fn depth_space(cx: &Cx, op: &str) -> Result<Array, KernelError> {
    let x = cx.input(0)?;
    let &[n, c, h, w] = x.dims.as_slice() else {
        return Err(KernelError::invalid(format!(
            "{op} needs a rank-4 input, not rank {}",
            x.rank()
        )));
    };
    let bs = cx.attr_int("blocksize", 0)?;
    let b = usize::try_from(bs).ok().filter(|&b| b > 0).ok_or_else(|| {
        KernelError::invalid(format!("{op} blocksize must be positive, not {bs}"))
    })?;
    let mode = cx
        .node
        .attr_string("mode")
        .map_err(|e| KernelError::invalid(e.to_string()))?
        .unwrap_or_else(|| "DCR".into());
    let crd = match mode.as_str() {
        "DCR" => false,
        "CRD" => true,
        m => {
            return Err(KernelError::invalid(format!(
                "{op} mode must be DCR or CRD, not {m}"
            )));
        }
    };
    // Both ops are a permutation between the "deep" layout [n, C', H', W']
    // and the "spatial" one [n, C'', H'', W''] with C'' * b * b = C' and
    // H'' = H' * b. `deep_index` maps an element of the spatial tensor to
    // the flat index of the same element in the deep one.
    let (deep_c, sc, sh, sw) = if op == "DepthToSpace" {
        if c % (b * b) != 0 {
            return Err(KernelError::invalid(format!(
                "DepthToSpace: {c} channels are not a multiple of blocksize^2 = {}",
                b * b
            )));
        }
        (c, c / (b * b), h * b, w * b)
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(KernelError::invalid(format!(
                "SpaceToDepth: height {h} and width {w} must be multiples of blocksize {b}"
            )));
        }
        (c * b * b, c, h, w)
    };
    let (dh, dw) = (sh / b, sw / b);
    let deep_index = |ni: usize, ci: usize, y: usize, xx: usize| -> usize {
        let (by, bx) = (y % b, xx % b);
        let dc = if crd {
            ci * b * b + by * b + bx
        } else {
            (by * b + bx) * sc + ci
        };
        ((ni * deep_c + dc) * dh + y / b) * dw + xx / b
    };
    let total = n * sc * sh * sw;
    cx.check(x.dtype(), total)?;
    if op == "DepthToSpace" {
        let mut idx = Vec::with_capacity(total);
        for ni in 0..n {
            for ci in 0..sc {
                for y in 0..sh {
                    for xx in 0..sw {
                        idx.push(deep_index(ni, ci, y, xx));
                    }
                }
            }
        }
        Ok(x.take(&idx, vec![n, sc, sh, sw]))
    } else {
        // The inverse permutation: deep position -> spatial element.
        let mut idx = vec![0usize; total];
        let mut k = 0;
        for ni in 0..n {
            for ci in 0..sc {
                for y in 0..sh {
                    for xx in 0..sw {
                        idx[deep_index(ni, ci, y, xx)] = k;
                        k += 1;
                    }
                }
            }
        }
        Ok(x.take(&idx, vec![n, deep_c, dh, dw]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::attr::Attribute;

    fn i8a(v: &[i8]) -> Option<crate::Tensor> {
        t(Array::new(vec![v.len()], Buf::I8(v.to_vec())))
    }

    fn shift(dir: &str, x: Option<crate::Tensor>, y: Option<crate::Tensor>) -> Buf {
        eval1(
            "BitShift",
            11,
            &[x, y],
            vec![Attribute::string("direction", dir)],
        )
        .buf
    }

    // The values of ONNX's test_bitshift_*_int8/int32_{shift_ge_width,negative_shift}.
    #[test]
    fn bit_shift_counts_outside_the_width_shift_everything_out() {
        let x = || i8a(&[-8, 4, -1]);
        assert_eq!(
            shift("LEFT", x(), i8a(&[8, 9, 127])),
            Buf::I8(vec![0, 0, 0])
        );
        assert_eq!(
            shift("RIGHT", x(), i8a(&[8, 9, 127])),
            Buf::I8(vec![-1, 0, -1])
        );
        assert_eq!(
            shift("LEFT", x(), i8a(&[-1, -8, -16])),
            Buf::I8(vec![0, 0, 0])
        );
        assert_eq!(
            shift("RIGHT", x(), i8a(&[-1, -8, -16])),
            Buf::I8(vec![-1, 0, -1])
        );
        let x32 = || i32a(&[3], &[-8, 4, -1]);
        assert_eq!(
            shift("LEFT", x32(), i32a(&[3], &[32, 33, 100])),
            Buf::I32(vec![0, 0, 0])
        );
        assert_eq!(
            shift("RIGHT", x32(), i32a(&[3], &[-1, -32, -64])),
            Buf::I32(vec![-1, 0, -1])
        );
    }

    #[test]
    fn bit_shift_in_range_wraps_left_and_is_arithmetic_right() {
        assert_eq!(
            shift("LEFT", i8a(&[64, 1, -64]), i8a(&[1, 7, 1])),
            Buf::I8(vec![-128, -128, -128])
        );
        assert_eq!(
            shift("RIGHT", i8a(&[-8, -1, -128]), i8a(&[1, 1, 1])),
            Buf::I8(vec![-4, -1, -64])
        );
        let u = |v: &[u8]| t(Array::new(vec![v.len()], Buf::U8(v.to_vec())));
        assert_eq!(
            shift("LEFT", u(&[16, 4, 1]), u(&[1, 2, 3])),
            Buf::U8(vec![32, 16, 8])
        );
        assert_eq!(
            shift("RIGHT", u(&[16, 4, 255]), u(&[1, 2, 8])),
            Buf::U8(vec![8, 1, 0])
        );
    }

    fn iota(n: usize) -> Vec<f32> {
        (0..n).map(|i| i as f32).collect()
    }

    // ONNX's test_spacetodepth_crd_mode_example and DepthToSpace's
    // documented examples: a 1x8x2x3 tensor, blocksize 2.
    #[test]
    fn depth_to_space_in_both_modes_and_space_to_depth_inverts_it() {
        let x = f32a(&[1, 8, 2, 3], &iota(48));
        let d2s = |mode: &str, x: Option<crate::Tensor>| {
            eval1(
                "DepthToSpace",
                13,
                &[x],
                vec![
                    Attribute::int("blocksize", 2),
                    Attribute::string("mode", mode),
                ],
            )
        };
        let dcr = d2s("DCR", x.clone());
        assert_eq!(dcr.dims, vec![1, 2, 4, 6]);
        let Buf::F32(v) = &dcr.buf else { panic!() };
        assert_eq!(
            &v[..12],
            &[0., 12., 1., 13., 2., 14., 24., 36., 25., 37., 26., 38.]
        );
        let crd = d2s("CRD", x.clone());
        let Buf::F32(v) = &crd.buf else { panic!() };
        assert_eq!(
            &v[..12],
            &[0., 6., 1., 7., 2., 8., 12., 18., 13., 19., 14., 20.]
        );
        for (mode, y) in [("DCR", dcr), ("CRD", crd)] {
            let back = eval1(
                "SpaceToDepth",
                13,
                &[t(y)],
                vec![
                    Attribute::int("blocksize", 2),
                    Attribute::string("mode", mode),
                ],
            );
            assert_eq!(Some(back.to_tensor()), x, "{mode}");
        }
    }

    #[test]
    fn softmax_rounds_each_step_of_its_function_body() {
        // float16: exp(-1) rounds to 0.3679 (0x35E3) before the sum.
        let y = eval1("Softmax", 13, &[f16a(&[1, 2], &[0.0, -1.0])], vec![]);
        let Buf::F16(v) = y.buf else { panic!() };
        let e = half::f16::from_f64((-1f64).exp()).to_f64();
        let s = half::f16::from_f64(1.0 + e).to_f64();
        assert_eq!(v[1], half::f16::from_f64(e / s));
        assert_eq!(v[0], half::f16::from_f64(1.0 / s));
        // Opset 11 flattens from axis 1: one softmax over all 4 elements.
        let y = eval1(
            "Softmax",
            11,
            &[f32a(&[1, 2, 2], &[1.0, 1.0, 1.0, 1.0])],
            vec![],
        );
        assert_eq!(y.buf, Buf::F32(vec![0.25; 4]));
        // Opset 13, axis 1 of [1, 2, 2]: pairs along the middle axis.
        let y = eval1(
            "Softmax",
            13,
            &[f32a(&[1, 2, 2], &[0.0, 5.0, 0.0, 5.0])],
            vec![Attribute::int("axis", 1)],
        );
        assert_eq!(y.buf, Buf::F32(vec![0.5; 4]));
    }

    #[test]
    fn celu_and_swish_keep_alpha_in_float16() {
        // test_celu_float16: alpha 2, x = -3 gives 2 * expm1(-1.5) = -1.554.
        let y = eval1(
            "Celu",
            12,
            &[f16a(&[3], &[-3.0, 0.0, 3.0])],
            vec![Attribute::float("alpha", 2.0)],
        );
        let Buf::F16(v) = y.buf else { panic!() };
        let want = (2.0f64 * (-1.5f64).exp_m1()) as f32;
        assert_eq!(v[0], half::f16::from_f32(want));
        assert_eq!(v[1].to_f32(), 0.0);
        assert_eq!(v[2].to_f32(), 3.0);
        // Swish alpha 0.5 at x = 2: 2 / (1 + e^-1).
        let y = eval1(
            "Swish",
            24,
            &[f32a(&[1], &[2.0])],
            vec![Attribute::float("alpha", 0.5)],
        );
        let Buf::F32(v) = y.buf else { panic!() };
        assert_eq!(v[0], (2.0f64 / (1.0 + (-1.0f64).exp())) as f32);
    }
}
