//! Elementwise kernels: binary arithmetic, comparisons and logic with
//! broadcasting, unary math, Where, variadic Min/Max/Sum/Mean, Cast.

use half::{bf16, f16};

use crate::dtype::DataType;

use super::array::{Array, Buf, Num};
use super::cx::{Cx, broadcast_dims, broadcast_index};
use super::error::KernelError;

pub(crate) fn run(cx: &Cx, op: &str) -> Result<Option<Vec<Array>>, KernelError> {
    Ok(Some(vec![match op {
        "Add" | "Sub" | "Mul" | "Div" | "Mod" | "Pow" => {
            let (a, b) = (cx.input(0)?, cx.input(1)?);
            arith(cx, op, &a, &b)?
        }
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
            compare(cx, op, &cx.input(0)?, &cx.input(1)?)?
        }
        "And" | "Or" | "Xor" => logic(cx, op, &cx.input(0)?, &cx.input(1)?)?,
        "Not" => match cx.input(0)?.buf {
            Buf::Bool(v) => Array::new(
                cx.input(0)?.dims,
                Buf::Bool(v.into_iter().map(|b| !b).collect()),
            ),
            _ => return Err(KernelError::invalid("Not needs a bool tensor")),
        },
        "Neg" | "Abs" | "Sqrt" | "Exp" | "Log" | "Floor" | "Ceil" | "Sign" | "Reciprocal"
        | "Relu" | "Round" => unary(op, &cx.input(0)?)?,
        "Identity" => cx.input(0)?,
        "Where" => where_(cx)?,
        "Max" | "Min" | "Sum" | "Mean" => variadic(cx, op)?,
        "Cast" => {
            let to = DataType::from_code(cx.attr_int("to", 0)? as i32);
            cast(&cx.input(0)?, to)?
        }
        "CastLike" => cast(&cx.input(0)?, cx.tensor(1)?.dtype())?,
        _ => return Ok(None),
    }]))
}

/// Output dims and, per output element, the element of `a` and of `b` it reads.
type BinaryIndex = (Vec<usize>, Vec<usize>, Vec<usize>);

fn binary_indices(
    cx: &Cx,
    a: &Array,
    b: &Array,
    dtype: DataType,
) -> Result<BinaryIndex, KernelError> {
    let dims = broadcast_dims(&[&a.dims, &b.dims])?;
    cx.check_dims(dtype, &dims)?;
    let ia = broadcast_index(&a.dims, &dims);
    let ib = broadcast_index(&b.dims, &dims);
    Ok((dims, ia, ib))
}

fn int_err(op: &str) -> KernelError {
    KernelError::invalid(format!("integer {op} by zero is undefined"))
}

pub(crate) fn arith(cx: &Cx, op: &str, a: &Array, b: &Array) -> Result<Array, KernelError> {
    let dtype = a.dtype();
    // Pow's exponent may have another type; every other op needs equal types.
    if op != "Pow" && b.dtype() != dtype {
        return Err(KernelError::invalid(format!(
            "{op} of {dtype} and {}",
            b.dtype()
        )));
    }
    let (dims, ia, ib) = binary_indices(cx, a, b, dtype)?;
    let fmod = cx.attr_int("fmod", 0)? != 0;
    let buf = match (a.buf.to_num(), b.buf.to_num()) {
        (Some(Num::F(x)), Some(yn)) => {
            let y: Vec<f64> = match yn {
                Num::F(y) => y,
                Num::I(y) => y.into_iter().map(|v| v as f64).collect(),
                Num::B(_) => return Err(KernelError::invalid("bool exponent")),
            };
            if op == "Mod" && !fmod {
                return Err(KernelError::invalid("Mod of floats needs fmod=1"));
            }
            let f: fn(f64, f64) -> f64 = match op {
                "Add" => |p, q| p + q,
                "Sub" => |p, q| p - q,
                "Mul" => |p, q| p * q,
                "Div" => |p, q| p / q,
                "Mod" => |p, q| p % q,
                _ => f64::powf,
            };
            let out: Vec<f64> = ia.iter().zip(&ib).map(|(&i, &j)| f(x[i], y[j])).collect();
            if op == "Pow" && dtype == DataType::Float {
                // Single-precision pow of the f32 operands, as runtimes compute it.
                let out: Vec<f32> = ia
                    .iter()
                    .zip(&ib)
                    .map(|(&i, &j)| (x[i] as f32).powf(y[j] as f32))
                    .collect();
                Buf::F32(out)
            } else {
                Buf::from_f64(dtype, out)
                    .ok_or_else(|| KernelError::Unsupported(format!("{op} on {dtype}")))?
            }
        }
        (Some(Num::I(x)), Some(Num::I(y))) => {
            let mut out = Vec::with_capacity(ia.len());
            for (&i, &j) in ia.iter().zip(&ib) {
                let (p, q) = (x[i], y[j]);
                out.push(match op {
                    "Add" => p + q,
                    "Sub" => p - q,
                    "Mul" => p.wrapping_mul(q),
                    // Integer division truncates toward zero (C++ semantics).
                    "Div" => p.checked_div(q).ok_or_else(|| int_err("division"))?,
                    "Mod" => {
                        let r = p.checked_rem(q).ok_or_else(|| int_err("modulo"))?;
                        // fmod=0: the remainder takes the divisor's sign.
                        if !fmod && r != 0 && ((r < 0) != (q < 0)) {
                            r + q
                        } else {
                            r
                        }
                    }
                    _ => {
                        let e = u32::try_from(q).map_err(|_| {
                            KernelError::invalid("integer Pow with a negative exponent")
                        })?;
                        p.checked_pow(e)
                            .ok_or_else(|| KernelError::invalid("integer Pow overflows"))?
                    }
                });
            }
            Buf::from_i128(dtype, out)
                .ok_or_else(|| KernelError::Unsupported(format!("{op} on {dtype}")))?
        }
        _ => return Err(KernelError::Unsupported(format!("{op} on {dtype}"))),
    };
    Ok(Array::new(dims, buf))
}

fn compare(cx: &Cx, op: &str, a: &Array, b: &Array) -> Result<Array, KernelError> {
    if a.dtype() != b.dtype() {
        return Err(KernelError::invalid(format!(
            "{op} of {} and {}",
            a.dtype(),
            b.dtype()
        )));
    }
    let (dims, ia, ib) = binary_indices(cx, a, b, DataType::Bool)?;
    fn cmp<T: PartialOrd>(op: &str, p: T, q: T) -> bool {
        match op {
            "Equal" => p == q,
            "Less" => p < q,
            "Greater" => p > q,
            "LessOrEqual" => p <= q,
            _ => p >= q,
        }
    }
    let out: Vec<bool> = match (&a.buf, &b.buf) {
        (Buf::Str(x), Buf::Str(y)) if op == "Equal" => {
            ia.iter().zip(&ib).map(|(&i, &j)| x[i] == y[j]).collect()
        }
        _ => match (a.buf.to_num(), b.buf.to_num()) {
            (Some(Num::F(x)), Some(Num::F(y))) => ia
                .iter()
                .zip(&ib)
                .map(|(&i, &j)| cmp(op, x[i], y[j]))
                .collect(),
            (Some(Num::I(x)), Some(Num::I(y))) => ia
                .iter()
                .zip(&ib)
                .map(|(&i, &j)| cmp(op, x[i], y[j]))
                .collect(),
            (Some(Num::B(x)), Some(Num::B(y))) => ia
                .iter()
                .zip(&ib)
                .map(|(&i, &j)| cmp(op, x[i], y[j]))
                .collect(),
            _ => return Err(KernelError::Unsupported(format!("{op} on {}", a.dtype()))),
        },
    };
    Ok(Array::new(dims, Buf::Bool(out)))
}

fn logic(cx: &Cx, op: &str, a: &Array, b: &Array) -> Result<Array, KernelError> {
    let (Buf::Bool(x), Buf::Bool(y)) = (&a.buf, &b.buf) else {
        return Err(KernelError::invalid(format!("{op} needs bool tensors")));
    };
    let (dims, ia, ib) = binary_indices(cx, a, b, DataType::Bool)?;
    let out = ia
        .iter()
        .zip(&ib)
        .map(|(&i, &j)| match op {
            "And" => x[i] && y[j],
            "Or" => x[i] || y[j],
            _ => x[i] != y[j],
        })
        .collect();
    Ok(Array::new(dims, Buf::Bool(out)))
}

fn unary(op: &str, a: &Array) -> Result<Array, KernelError> {
    let dtype = a.dtype();
    let buf = match a.buf.to_num() {
        Some(Num::F(x)) => {
            let f: fn(f64) -> f64 = match op {
                "Neg" => |v| -v,
                "Abs" => f64::abs,
                "Sqrt" => f64::sqrt,
                "Exp" => f64::exp,
                "Log" => f64::ln,
                "Floor" => f64::floor,
                "Ceil" => f64::ceil,
                "Sign" => |v: f64| {
                    if v > 0.0 {
                        1.0
                    } else if v < 0.0 {
                        -1.0
                    } else {
                        v
                    }
                },
                "Reciprocal" => |v| 1.0 / v,
                "Relu" => |v: f64| if v > 0.0 || v.is_nan() { v } else { 0.0 },
                _ => f64::round_ties_even,
            };
            Buf::from_f64(dtype, x.into_iter().map(f).collect())
        }
        Some(Num::I(x)) => {
            let f: fn(i128) -> i128 = match op {
                "Neg" => |v| -v,
                "Abs" => i128::abs,
                "Sign" => i128::signum,
                "Relu" => |v: i128| v.max(0),
                "Floor" | "Ceil" | "Round" => |v| v,
                _ => return Err(KernelError::Unsupported(format!("{op} on {dtype}"))),
            };
            Buf::from_i128(dtype, x.into_iter().map(f).collect())
        }
        _ => None,
    };
    let buf = buf.ok_or_else(|| KernelError::Unsupported(format!("{op} on {dtype}")))?;
    Ok(Array::new(a.dims.clone(), buf))
}

fn where_(cx: &Cx) -> Result<Array, KernelError> {
    let (c, x, y) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let Buf::Bool(cond) = &c.buf else {
        return Err(KernelError::invalid("Where needs a bool condition"));
    };
    if x.dtype() != y.dtype() {
        return Err(KernelError::invalid("Where branches have different types"));
    }
    let dims = broadcast_dims(&[&c.dims, &x.dims, &y.dims])?;
    cx.check_dims(x.dtype(), &dims)?;
    let (ic, ix, iy) = (
        broadcast_index(&c.dims, &dims),
        broadcast_index(&x.dims, &dims),
        broadcast_index(&y.dims, &dims),
    );
    let both = Buf::concat(&[&x.buf, &y.buf])
        .ok_or_else(|| KernelError::invalid("Where branches have different types"))?;
    let off = x.numel();
    let idx: Vec<usize> = (0..ic.len())
        .map(|k| if cond[ic[k]] { ix[k] } else { off + iy[k] })
        .collect();
    Ok(Array::new(dims, both.take(&idx)))
}

fn variadic(cx: &Cx, op: &str) -> Result<Array, KernelError> {
    let inputs: Vec<Array> = (0..cx.n_inputs())
        .filter(|&i| cx.has(i))
        .map(|i| cx.input(i))
        .collect::<Result<_, _>>()?;
    let first = inputs
        .first()
        .ok_or_else(|| KernelError::invalid(format!("{op} needs inputs")))?;
    let dtype = first.dtype();
    if inputs.iter().any(|a| a.dtype() != dtype) {
        return Err(KernelError::invalid(format!(
            "{op} inputs have different types"
        )));
    }
    let shapes: Vec<&[usize]> = inputs.iter().map(|a| a.dims.as_slice()).collect();
    let dims = broadcast_dims(&shapes)?;
    cx.check_dims(dtype, &dims)?;
    let n: usize = dims.iter().product();
    let maps: Vec<Vec<usize>> = inputs
        .iter()
        .map(|a| broadcast_index(&a.dims, &dims))
        .collect();
    let buf = match first.buf.to_num() {
        Some(Num::F(_)) => {
            let vals: Vec<Vec<f64>> = inputs
                .iter()
                .map(|a| match a.buf.to_num() {
                    Some(Num::F(v)) => v,
                    _ => vec![],
                })
                .collect();
            let out: Vec<f64> = (0..n)
                .map(|k| {
                    let it = vals.iter().zip(&maps).map(|(v, m)| v[m[k]]);
                    match op {
                        // NaN propagates, as in numpy maximum/minimum.
                        "Max" => it.fold(f64::NEG_INFINITY, |acc, v| {
                            if acc.is_nan() || v.is_nan() {
                                f64::NAN
                            } else {
                                acc.max(v)
                            }
                        }),
                        "Min" => it.fold(f64::INFINITY, |acc, v| {
                            if acc.is_nan() || v.is_nan() {
                                f64::NAN
                            } else {
                                acc.min(v)
                            }
                        }),
                        "Sum" => it.sum(),
                        _ => it.sum::<f64>() / inputs.len() as f64,
                    }
                })
                .collect();
            Buf::from_f64(dtype, out)
        }
        Some(Num::I(_)) => {
            let vals: Vec<Vec<i128>> = inputs
                .iter()
                .map(|a| match a.buf.to_num() {
                    Some(Num::I(v)) => v,
                    _ => vec![],
                })
                .collect();
            let out: Vec<i128> = (0..n)
                .map(|k| {
                    let it = vals.iter().zip(&maps).map(|(v, m)| v[m[k]]);
                    match op {
                        "Max" => it.max().unwrap_or(0),
                        "Min" => it.min().unwrap_or(0),
                        "Sum" => it.sum(),
                        _ => it.sum::<i128>() / inputs.len() as i128,
                    }
                })
                .collect();
            Buf::from_i128(dtype, out)
        }
        _ => None,
    };
    let buf = buf.ok_or_else(|| KernelError::Unsupported(format!("{op} on {dtype}")))?;
    Ok(Array::new(dims, buf))
}

/// Cast between numeric types and bool. Float to integer truncates toward
/// zero; NaN, infinities and out-of-range values are errors (undefined in ONNX).
pub(crate) fn cast(a: &Array, to: DataType) -> Result<Array, KernelError> {
    let from = a.dtype();
    if from == to {
        return Ok(a.clone());
    }
    let unsupported = || KernelError::Unsupported(format!("Cast from {from} to {to}"));
    let buf = match (&a.buf, to) {
        (Buf::Str(_), _) | (_, DataType::String) => return Err(unsupported()),
        (_, DataType::Bool) => Buf::Bool(match a.buf.to_num().ok_or_else(unsupported)? {
            Num::F(v) => v.into_iter().map(|x| x != 0.0).collect(),
            Num::I(v) => v.into_iter().map(|x| x != 0).collect(),
            Num::B(v) => v,
        }),
        // Floats to floats: exact source value, rounded once.
        (Buf::F64(v), DataType::Float) => Buf::F32(v.iter().map(|&x| x as f32).collect()),
        (Buf::F64(v), DataType::Float16) => Buf::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
        (Buf::F64(v), DataType::Bfloat16) => {
            Buf::Bf16(v.iter().map(|&x| bf16::from_f64(x)).collect())
        }
        (Buf::F32(v), DataType::Float16) => Buf::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
        (Buf::F32(v), DataType::Bfloat16) => {
            Buf::Bf16(v.iter().map(|&x| bf16::from_f32(x)).collect())
        }
        // Integers to f32: Rust's `as` rounds correctly from any integer width.
        (_, DataType::Float) if matches!(a.buf.to_num(), Some(Num::I(_))) => match a.buf.to_num() {
            Some(Num::I(v)) => Buf::F32(v.into_iter().map(|x| x as f32).collect()),
            _ => unreachable!(),
        },
        _ => match (a.buf.to_num().ok_or_else(unsupported)?, to) {
            (Num::B(v), t) if t.is_float() => {
                Buf::from_f64(t, v.into_iter().map(|b| b as u8 as f64).collect())
                    .ok_or_else(unsupported)?
            }
            (Num::B(v), t) => Buf::from_i128(t, v.into_iter().map(|b| b as i128).collect())
                .ok_or_else(unsupported)?,
            (Num::F(v), t) if t.is_float() => Buf::from_f64(t, v).ok_or_else(unsupported)?,
            (Num::I(v), t) if t.is_float() => {
                Buf::from_f64(t, v.into_iter().map(|x| x as f64).collect())
                    .ok_or_else(unsupported)?
            }
            (Num::I(v), t) => Buf::from_i128(t, v).ok_or_else(unsupported)?,
            (Num::F(v), t) => {
                let (lo, hi) = int_range(t).ok_or_else(unsupported)?;
                let mut out = Vec::with_capacity(v.len());
                for x in v {
                    let tr = x.trunc();
                    if !tr.is_finite() || tr < lo as f64 || tr > hi as f64 {
                        return Err(KernelError::invalid(format!(
                            "casting {x} to {t} is undefined"
                        )));
                    }
                    out.push(tr as i128);
                }
                Buf::from_i128(t, out).ok_or_else(unsupported)?
            }
        },
    };
    Ok(Array::new(a.dims.clone(), buf))
}

fn int_range(t: DataType) -> Option<(i128, i128)> {
    Some(match t {
        DataType::Int8 => (i8::MIN as i128, i8::MAX as i128),
        DataType::Int16 => (i16::MIN as i128, i16::MAX as i128),
        DataType::Int32 => (i32::MIN as i128, i32::MAX as i128),
        DataType::Int64 => (i64::MIN as i128, i64::MAX as i128),
        DataType::Uint8 => (0, u8::MAX as i128),
        DataType::Uint16 => (0, u16::MAX as i128),
        DataType::Uint32 => (0, u32::MAX as i128),
        DataType::Uint64 => (0, u64::MAX as i128),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Array, Buf, KernelError};
    use crate::attr::Attribute;
    use crate::dtype::DataType;
    use half::{bf16, f16};

    #[test]
    fn arithmetic_broadcasts() {
        let a = eval1(
            "Add",
            17,
            &[f32a(&[2, 1], &[1.0, 2.0]), f32a(&[3], &[10.0, 20.0, 30.0])],
            vec![],
        );
        assert_eq!(a.dims, vec![2, 3]);
        assert_eq!(floats(&a), vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
        let a = eval1(
            "Mul",
            17,
            &[i64a(&[3], &[1, 2, 3]), i64a(&[], &[-2])],
            vec![],
        );
        assert_eq!(ints(&a), vec![-2, -4, -6]);
        let a = eval1(
            "Sub",
            17,
            &[i32a(&[2], &[i32::MIN, 5]), i32a(&[1], &[1])],
            vec![],
        );
        assert_eq!(
            ints(&a),
            vec![i32::MAX as i64, 4],
            "int32 wraps like the runtimes"
        );
        let a = eval1("Add", 17, &[f64a(&[1], &[0.1]), f64a(&[1], &[0.2])], vec![]);
        assert_eq!(floats(&a), vec![0.1 + 0.2]);
    }

    #[test]
    fn float16_is_correctly_rounded() {
        let a = eval1(
            "Add",
            17,
            &[f16a(&[2], &[1.0, 0.1]), f16a(&[2], &[0.0004, 0.2])],
            vec![],
        );
        let Buf::F16(v) = a.buf else { panic!() };
        let expect =
            |x: f32, y: f32| f16::from_f64(f16::from_f32(x).to_f64() + f16::from_f32(y).to_f64());
        assert_eq!(v, vec![expect(1.0, 0.0004), expect(0.1, 0.2)]);
        let bf = Array::new(vec![1], Buf::Bf16(vec![bf16::from_f32(3.0)]));
        let a = eval1("Mul", 17, &[t(bf.clone()), t(bf)], vec![]);
        assert_eq!(a.buf, Buf::Bf16(vec![bf16::from_f32(9.0)]));
    }

    #[test]
    fn integer_division_and_mod() {
        let a = eval1(
            "Div",
            17,
            &[i64a(&[4], &[7, -7, 7, -7]), i64a(&[4], &[2, 2, -2, -2])],
            vec![],
        );
        assert_eq!(ints(&a), vec![3, -3, -3, 3], "truncates toward zero");
        let a = eval1(
            "Mod",
            17,
            &[i64a(&[4], &[7, -7, 7, -7]), i64a(&[4], &[3, 3, -3, -3])],
            vec![],
        );
        assert_eq!(ints(&a), vec![1, 2, -2, -1], "sign of the divisor");
        let a = eval1(
            "Mod",
            17,
            &[i64a(&[4], &[7, -7, 7, -7]), i64a(&[4], &[3, 3, -3, -3])],
            vec![Attribute::int("fmod", 1)],
        );
        assert_eq!(ints(&a), vec![1, -1, 1, -1], "sign of the dividend");
        let a = eval1(
            "Mod",
            17,
            &[f32a(&[2], &[5.5, -5.5]), f32a(&[1], &[2.0])],
            vec![Attribute::int("fmod", 1)],
        );
        assert_eq!(floats(&a), vec![1.5, -1.5]);
        assert!(eval("Div", 17, &[i64a(&[1], &[1]), i64a(&[1], &[0])], vec![]).is_err());
        let a = eval1("Div", 17, &[f32a(&[1], &[1.0]), f32a(&[1], &[0.0])], vec![]);
        assert_eq!(floats(&a), vec![f64::INFINITY]);
        let a = eval1(
            "Pow",
            17,
            &[f32a(&[2], &[2.0, 9.0]), i64a(&[1], &[2])],
            vec![],
        );
        assert_eq!(floats(&a), vec![4.0, 81.0]);
        let a = eval1("Pow", 17, &[i64a(&[1], &[3]), i64a(&[1], &[4])], vec![]);
        assert_eq!(ints(&a), vec![81]);
    }

    #[test]
    fn comparisons_logic_where() {
        let a = eval1(
            "Equal",
            17,
            &[i64a(&[3], &[1, -1, 3]), i64a(&[], &[-1])],
            vec![],
        );
        assert_eq!(a.buf, Buf::Bool(vec![false, true, false]));
        let a = eval1(
            "GreaterOrEqual",
            17,
            &[f32a(&[2], &[1.0, f32::NAN]), f32a(&[1], &[1.0])],
            vec![],
        );
        assert_eq!(a.buf, Buf::Bool(vec![true, false]));
        let a = eval1(
            "And",
            17,
            &[boola(&[2], &[true, false]), boola(&[1], &[true])],
            vec![],
        );
        assert_eq!(a.buf, Buf::Bool(vec![true, false]));
        let a = eval1("Not", 17, &[boola(&[2], &[true, false])], vec![]);
        assert_eq!(a.buf, Buf::Bool(vec![false, true]));
        let a = eval1(
            "Where",
            17,
            &[
                boola(&[2, 1], &[true, false]),
                i64a(&[3], &[1, 2, 3]),
                i64a(&[], &[0]),
            ],
            vec![],
        );
        assert_eq!(
            (a.dims.clone(), ints(&a)),
            (vec![2, 3], vec![1, 2, 3, 0, 0, 0])
        );
        assert!(eval("Less", 17, &[i64a(&[1], &[1]), f32a(&[1], &[1.0])], vec![]).is_err());
    }

    #[test]
    fn unary_and_variadic() {
        let a = eval1("Sqrt", 17, &[f32a(&[2], &[4.0, 2.0])], vec![]);
        assert_eq!(a.buf, Buf::F32(vec![2.0, 2f32.sqrt()]));
        let a = eval1("Neg", 17, &[i64a(&[2], &[3, -4])], vec![]);
        assert_eq!(ints(&a), vec![-3, 4]);
        let a = eval1("Sign", 17, &[f32a(&[3], &[-2.0, 0.0, 5.0])], vec![]);
        assert_eq!(floats(&a), vec![-1.0, 0.0, 1.0]);
        let a = eval1("Floor", 17, &[f32a(&[2], &[-1.5, 1.5])], vec![]);
        assert_eq!(floats(&a), vec![-2.0, 1.0]);
        let a = eval1("Round", 17, &[f32a(&[3], &[0.5, 1.5, -2.5])], vec![]);
        assert_eq!(floats(&a), vec![0.0, 2.0, -2.0], "half to even");
        let a = eval1(
            "Max",
            17,
            &[i64a(&[2], &[1, 5]), i64a(&[1], &[3]), i64a(&[2], &[0, 9])],
            vec![],
        );
        assert_eq!(ints(&a), vec![3, 9]);
        let a = eval1(
            "Min",
            17,
            &[f32a(&[2], &[1.0, f32::NAN]), f32a(&[1], &[0.0])],
            vec![],
        );
        let v = floats(&a);
        assert!(v[0] == 0.0 && v[1].is_nan());
        let a = eval1(
            "Mean",
            17,
            &[f32a(&[1], &[1.0]), f32a(&[1], &[2.0])],
            vec![],
        );
        assert_eq!(floats(&a), vec![1.5]);
    }

    #[test]
    fn casts() {
        let cast = |x: Option<crate::tensor::Tensor>, to: DataType| {
            eval(
                "Cast",
                17,
                &[x],
                vec![Attribute::int("to", to.code() as i64)],
            )
        };
        let a = cast(f32a(&[3], &[1.9, -1.9, 0.0]), DataType::Int64)
            .unwrap()
            .remove(0);
        assert_eq!(ints(&a), vec![1, -1, 0]);
        assert!(matches!(
            cast(f32a(&[1], &[f32::NAN]), DataType::Int32),
            Err(KernelError::Invalid(_))
        ));
        assert!(cast(f32a(&[1], &[3e9]), DataType::Int32).is_err());
        let a = cast(f32a(&[2], &[65520.0, 1.0 / 3.0]), DataType::Float16)
            .unwrap()
            .remove(0);
        assert_eq!(
            a.buf,
            Buf::F16(vec![f16::INFINITY, f16::from_f32(1.0 / 3.0)])
        );
        let a = cast(f32a(&[1], &[1.0 / 3.0]), DataType::Bfloat16)
            .unwrap()
            .remove(0);
        assert_eq!(a.buf, Buf::Bf16(vec![bf16::from_f32(1.0 / 3.0)]));
        let a = cast(i64a(&[2], &[(1 << 24) + 1, -3]), DataType::Float)
            .unwrap()
            .remove(0);
        assert_eq!(a.buf, Buf::F32(vec![16777216.0, -3.0]));
        let a = cast(i64a(&[2], &[300, -1]), DataType::Uint8)
            .unwrap()
            .remove(0);
        assert_eq!(a.buf, Buf::U8(vec![44, 255]), "integer narrowing wraps");
        let a = cast(boola(&[2], &[true, false]), DataType::Float)
            .unwrap()
            .remove(0);
        assert_eq!(floats(&a), vec![1.0, 0.0]);
        let a = cast(f32a(&[3], &[0.0, -0.5, f32::NAN]), DataType::Bool)
            .unwrap()
            .remove(0);
        assert_eq!(a.buf, Buf::Bool(vec![false, true, true]));
        let a = cast(f16a(&[1], &[0.1]), DataType::Double)
            .unwrap()
            .remove(0);
        assert_eq!(floats(&a), vec![f16::from_f32(0.1).to_f64()]);
        let a = cast(i32a(&[1], &[7]), DataType::Int64).unwrap().remove(0);
        assert_eq!(a.buf, Buf::I64(vec![7]));
        let a = eval1(
            "CastLike",
            17,
            &[i64a(&[1], &[2]), f16a(&[], &[0.0])],
            vec![],
        );
        assert_eq!(a.buf, Buf::F16(vec![f16::from_f32(2.0)]));
    }
}
