//! Shape, Size, Constant, ConstantOfShape, Range, MatMul.

use crate::dtype::DataType;

use super::array::{Array, Buf, Num, numel};
use super::cx::{Cx, broadcast_dims, broadcast_index};
use super::error::KernelError;

pub(crate) fn run(cx: &Cx, op: &str) -> Result<Option<Vec<Array>>, KernelError> {
    Ok(Some(vec![match op {
        "Shape" => {
            // Only the dims are needed: the data is not decoded.
            let dims = cx.tensor(0)?.dims().to_vec();
            let r = dims.len() as i64;
            let clamp = |x: i64| if x < 0 { (x + r).max(0) } else { x.min(r) };
            let (s, e) = if cx.opset >= 15 {
                (
                    clamp(cx.attr_int("start", 0)?),
                    clamp(cx.attr_int("end", r)?),
                )
            } else {
                (0, r)
            };
            let v: Vec<i64> = if s < e {
                dims[s as usize..e as usize].to_vec()
            } else {
                vec![]
            };
            Array::i64s(vec![v.len()], v)
        }
        "Size" => {
            // Saturating: an empty tensor may declare dims whose product
            // is past i64 (one 0 among them keeps it empty).
            let n: i64 = cx
                .tensor(0)?
                .dims()
                .iter()
                .fold(1i64, |acc, &d| acc.saturating_mul(d));
            Array::i64s(vec![], vec![n])
        }
        "Constant" => {
            let t = crate::infer::shape_ops_constant(cx.node)
                .ok_or_else(|| KernelError::invalid("Constant without a value"))?;
            Array::from_tensor(&t)?
        }
        "ConstantOfShape" => {
            let shape = cx.ints(0)?;
            let dims: Vec<usize> = shape
                .iter()
                .map(|&d| {
                    usize::try_from(d)
                        .map_err(|_| KernelError::invalid("negative dim in ConstantOfShape"))
                })
                .collect::<Result<_, _>>()?;
            let value = match cx
                .node
                .attr_tensor("value")
                .map_err(|e| KernelError::invalid(e.to_string()))?
            {
                Some(t) => Array::from_tensor(&t)?,
                None => Array::new(vec![1], Buf::F32(vec![0.0])),
            };
            if value.numel() != 1 {
                return Err(KernelError::invalid(
                    "ConstantOfShape value must have one element",
                ));
            }
            cx.check_dims(value.dtype(), &dims)?;
            let n = numel(&dims);
            Array::new(dims, value.buf.repeat(0, n))
        }
        "Range" => range(cx)?,
        "MatMul" => matmul(cx)?,
        _ => return Ok(None),
    }]))
}

fn range(cx: &Cx) -> Result<Array, KernelError> {
    let (s, l, d) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    if [&s, &l, &d].iter().any(|a| a.numel() != 1) {
        return Err(KernelError::invalid("Range inputs must be scalars"));
    }
    let dtype = s.dtype();
    match (s.buf.to_num(), l.buf.to_num(), d.buf.to_num()) {
        (Some(Num::I(s)), Some(Num::I(l)), Some(Num::I(d))) => {
            let (s, l, d) = (s[0], l[0], d[0]);
            if d == 0 {
                return Err(KernelError::invalid("Range with delta 0"));
            }
            // ceil((l - s) / d), at least 0.
            let span = l - s;
            let n = if (span > 0) != (d > 0) || span == 0 {
                0
            } else {
                (span + d - d.signum()) / d
            };
            let n = usize::try_from(n).unwrap_or(0);
            cx.check(dtype, n)?;
            let v: Vec<i128> = (0..n as i128).map(|i| s + i * d).collect();
            Ok(Array::new(
                vec![n],
                Buf::from_i128(dtype, v)
                    .ok_or_else(|| KernelError::Unsupported(format!("Range on {dtype}")))?,
            ))
        }
        (Some(Num::F(s)), Some(Num::F(l)), Some(Num::F(d))) => {
            let (s, l, d) = (s[0], l[0], d[0]);
            let n = ((l - s) / d).ceil();
            if !n.is_finite() {
                return Err(KernelError::invalid("Range with a non-finite length"));
            }
            let n = n.max(0.0) as usize;
            cx.check(dtype, n)?;
            // output[i] = start + i * delta, in the output's precision.
            let buf = match dtype {
                DataType::Float => {
                    let (s, d) = (s as f32, d as f32);
                    Buf::F32((0..n).map(|i| s + (i as f32) * d).collect())
                }
                DataType::Double => Buf::F64((0..n).map(|i| s + (i as f64) * d).collect()),
                _ => return Err(KernelError::Unsupported(format!("Range on {dtype}"))),
            };
            Ok(Array::new(vec![n], buf))
        }
        _ => Err(KernelError::Unsupported(format!("Range on {dtype}"))),
    }
}

fn matmul(cx: &Cx) -> Result<Array, KernelError> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    if a.dtype() != b.dtype() || a.rank() == 0 || b.rank() == 0 {
        return Err(KernelError::invalid("MatMul operands"));
    }
    let dtype = a.dtype();
    let a_dims: Vec<usize> = if a.rank() == 1 {
        vec![1, a.dims[0]]
    } else {
        a.dims.clone()
    };
    let b_dims: Vec<usize> = if b.rank() == 1 {
        vec![b.dims[0], 1]
    } else {
        b.dims.clone()
    };
    let (m, k) = (a_dims[a_dims.len() - 2], a_dims[a_dims.len() - 1]);
    let (k2, n) = (b_dims[b_dims.len() - 2], b_dims[b_dims.len() - 1]);
    if k != k2 {
        return Err(KernelError::invalid(format!(
            "MatMul of {:?} and {:?}",
            a.dims, b.dims
        )));
    }
    let batch = broadcast_dims(&[&a_dims[..a_dims.len() - 2], &b_dims[..b_dims.len() - 2]])?;
    let mut dims = batch.clone();
    if a.rank() > 1 {
        dims.push(m);
    }
    if b.rank() > 1 {
        dims.push(n);
    }
    cx.check_dims(dtype, &dims)?;
    let nb = numel(&batch);
    // Batch index → matrix index of each operand.
    let ia = broadcast_index(&a_dims[..a_dims.len() - 2], &batch);
    let ib = broadcast_index(&b_dims[..b_dims.len() - 2], &batch);
    let buf = match (a.buf.to_num(), b.buf.to_num()) {
        (Some(Num::F(x)), Some(Num::F(y))) => {
            let mut out = vec![0.0f64; nb * m * n];
            for bi in 0..nb {
                let (xa, yb) = (ia[bi] * m * k, ib[bi] * k * n);
                for i in 0..m {
                    for j in 0..n {
                        out[(bi * m + i) * n + j] =
                            (0..k).map(|p| x[xa + i * k + p] * y[yb + p * n + j]).sum();
                    }
                }
            }
            Buf::from_f64(dtype, out)
        }
        (Some(Num::I(x)), Some(Num::I(y))) => {
            let mut out = vec![0i128; nb * m * n];
            for bi in 0..nb {
                let (xa, yb) = (ia[bi] * m * k, ib[bi] * k * n);
                for i in 0..m {
                    for j in 0..n {
                        out[(bi * m + i) * n + j] = (0..k)
                            .map(|p| x[xa + i * k + p].wrapping_mul(y[yb + p * n + j]))
                            .sum();
                    }
                }
            }
            Buf::from_i128(dtype, out)
        }
        _ => None,
    };
    let buf = buf.ok_or_else(|| KernelError::Unsupported(format!("MatMul on {dtype}")))?;
    Ok(Array::new(dims, buf))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::attr::Attribute;
    use crate::tensor::Tensor;

    #[test]
    fn shape_size_constant_of_shape() {
        let x = f32a(&[2, 3, 4], &[0.0; 24]);
        let a = eval1("Shape", 13, std::slice::from_ref(&x), vec![]);
        assert_eq!(ints(&a), vec![2, 3, 4]);
        let a = eval1(
            "Shape",
            15,
            std::slice::from_ref(&x),
            vec![Attribute::int("start", -2)],
        );
        assert_eq!(ints(&a), vec![3, 4]);
        let a = eval1(
            "Shape",
            15,
            std::slice::from_ref(&x),
            vec![Attribute::int("start", 1), Attribute::int("end", -1)],
        );
        assert_eq!(ints(&a), vec![3]);
        let a = eval1("Size", 13, &[x], vec![]);
        assert_eq!((a.dims.clone(), ints(&a)), (vec![], vec![24]));
        let a = eval1(
            "ConstantOfShape",
            13,
            &[i64a(&[2], &[2, 2])],
            vec![Attribute::tensor("value", &Tensor::from_i64(vec![1], &[7]))],
        );
        assert_eq!((a.dims.clone(), ints(&a)), (vec![2, 2], vec![7; 4]));
        let a = eval1("ConstantOfShape", 13, &[i64a(&[0], &[])], vec![]);
        assert_eq!((a.dims.clone(), floats(&a)), (vec![], vec![0.0]));
        let a = eval1(
            "Constant",
            13,
            &[],
            vec![Attribute::ints("value_ints", vec![1, 2])],
        );
        assert_eq!(ints(&a), vec![1, 2]);
    }

    #[test]
    fn range() {
        let a = eval1(
            "Range",
            13,
            &[i64a(&[], &[0]), i64a(&[], &[10]), i64a(&[], &[3])],
            vec![],
        );
        assert_eq!(ints(&a), vec![0, 3, 6, 9]);
        let a = eval1(
            "Range",
            13,
            &[i64a(&[], &[10]), i64a(&[], &[4]), i64a(&[], &[-2])],
            vec![],
        );
        assert_eq!(ints(&a), vec![10, 8, 6]);
        let a = eval1(
            "Range",
            13,
            &[i64a(&[], &[5]), i64a(&[], &[1]), i64a(&[], &[1])],
            vec![],
        );
        assert_eq!(a.dims, vec![0]);
        let a = eval1(
            "Range",
            13,
            &[f32a(&[], &[1.0]), f32a(&[], &[2.0]), f32a(&[], &[0.3])],
            vec![],
        );
        assert_eq!(
            a.buf,
            super::Buf::F32(vec![
                1.0,
                1.0 + 0.3f32,
                1.0 + 2.0 * 0.3f32,
                1.0 + 3.0 * 0.3f32
            ])
        );
        let a = eval1(
            "Range",
            13,
            &[i32a(&[], &[0]), i32a(&[], &[3]), i32a(&[], &[1])],
            vec![],
        );
        assert_eq!(a.buf, super::Buf::I32(vec![0, 1, 2]));
    }

    #[test]
    fn matmul() {
        let a = eval1(
            "MatMul",
            13,
            &[
                f32a(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
                f32a(&[2, 1], &[1.0, 1.0]),
            ],
            vec![],
        );
        assert_eq!((a.dims.clone(), floats(&a)), (vec![2, 1], vec![3.0, 7.0]));
        let a = eval1(
            "MatMul",
            13,
            &[
                f32a(&[2], &[1.0, 2.0]),
                f32a(&[2, 2, 2], &[1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0]),
            ],
            vec![],
        );
        assert_eq!(
            (a.dims.clone(), floats(&a)),
            (vec![2, 2], vec![1.0, 2.0, 2.0, 4.0])
        );
        let a = eval1(
            "MatMul",
            13,
            &[i64a(&[1, 2], &[2, 3]), i64a(&[2], &[4, 5])],
            vec![],
        );
        assert_eq!((a.dims.clone(), ints(&a)), (vec![1], vec![23]));
        assert!(
            eval(
                "MatMul",
                13,
                &[f32a(&[2, 3], &[0.0; 6]), f32a(&[2, 3], &[0.0; 6])],
                vec![]
            )
            .is_err()
        );
    }
}
