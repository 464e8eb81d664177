//! ReduceSum / ReduceProd / ReduceMax / ReduceMin / ReduceMean.

use super::array::{Array, Buf, Num, numel, strides};
use super::cx::{Cx, axis};
use super::error::KernelError;

pub(crate) fn run(cx: &Cx, op: &str) -> Result<Option<Vec<Array>>, KernelError> {
    if !matches!(
        op,
        "ReduceSum" | "ReduceProd" | "ReduceMax" | "ReduceMin" | "ReduceMean"
    ) {
        return Ok(None);
    }
    let x = cx.input(0)?;
    // Axes: attribute until opset 12 (ReduceSum) / 17 (the others), input after.
    let since = if op == "ReduceSum" { 13 } else { 18 };
    let axes = if cx.opset < since {
        cx.attr_ints("axes")?
    } else if cx.has(1) {
        Some(cx.ints(1)?)
    } else {
        None
    };
    let keep = cx.attr_int("keepdims", 1)? != 0;
    let noop = cx.opset >= since && cx.attr_int("noop_with_empty_axes", 0)? != 0;
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&v| axis(v, x.rank()))
            .collect::<Result<_, _>>()?,
        _ if noop => return Ok(Some(vec![x])),
        _ => (0..x.rank()).collect(),
    };
    let out_dims_keep: Vec<usize> = x
        .dims
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    let out_dims: Vec<usize> = if keep {
        out_dims_keep.clone()
    } else {
        x.dims
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect()
    };
    cx.check_dims(x.dtype(), &out_dims_keep)?;
    let n_out: usize = numel(&out_dims_keep);
    // Output slot of every input element.
    let xs = strides(&x.dims);
    let os = strides(&out_dims_keep);
    let slot: Vec<usize> = (0..x.numel())
        .map(|k| {
            (0..x.rank())
                .map(|ax| {
                    if axes.contains(&ax) {
                        0
                    } else {
                        (k / xs[ax]) % x.dims[ax] * os[ax]
                    }
                })
                .sum()
        })
        .collect();
    let count = x.numel().checked_div(n_out).unwrap_or(0);
    if count == 0 && matches!(op, "ReduceMax" | "ReduceMin") && n_out > 0 {
        return Err(KernelError::invalid(format!("{op} over an empty axis")));
    }
    let dtype = x.dtype();
    let buf = match x.buf.to_num() {
        Some(Num::F(v)) => {
            let init = match op {
                "ReduceProd" => 1.0,
                "ReduceMax" => f64::NEG_INFINITY,
                "ReduceMin" => f64::INFINITY,
                _ => 0.0,
            };
            let mut acc = vec![init; n_out];
            for (k, &val) in v.iter().enumerate() {
                let a = &mut acc[slot[k]];
                *a = match op {
                    "ReduceProd" => *a * val,
                    "ReduceMax" => {
                        if a.is_nan() || val.is_nan() {
                            f64::NAN
                        } else {
                            a.max(val)
                        }
                    }
                    "ReduceMin" => {
                        if a.is_nan() || val.is_nan() {
                            f64::NAN
                        } else {
                            a.min(val)
                        }
                    }
                    _ => *a + val,
                };
            }
            if op == "ReduceMean" {
                acc.iter_mut().for_each(|a| *a /= count as f64);
            }
            Buf::from_f64(dtype, acc)
        }
        Some(Num::I(v)) => {
            let init: i128 = match op {
                "ReduceProd" => 1,
                "ReduceMax" => i128::MIN,
                "ReduceMin" => i128::MAX,
                _ => 0,
            };
            let mut acc = vec![init; n_out];
            for (k, &val) in v.iter().enumerate() {
                let a = &mut acc[slot[k]];
                *a = match op {
                    "ReduceProd" => a
                        .checked_mul(val)
                        .ok_or_else(|| KernelError::invalid("ReduceProd overflows"))?,
                    "ReduceMax" => (*a).max(val),
                    "ReduceMin" => (*a).min(val),
                    _ => *a + val,
                };
            }
            if op == "ReduceMean" {
                if count == 0 {
                    return Err(KernelError::invalid("ReduceMean over an empty axis"));
                }
                acc.iter_mut().for_each(|a| *a /= count as i128);
            }
            Buf::from_i128(dtype, acc)
        }
        _ => None,
    };
    let buf = buf.ok_or_else(|| KernelError::Unsupported(format!("{op} on {dtype}")))?;
    Ok(Some(vec![Array::new(out_dims, buf)]))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::attr::Attribute;

    #[test]
    fn reductions_by_opset() {
        let x = || i64a(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let a = eval1(
            "ReduceSum",
            13,
            &[x(), i64a(&[1], &[1])],
            vec![Attribute::int("keepdims", 0)],
        );
        assert_eq!((a.dims.clone(), ints(&a)), (vec![2], vec![6, 15]));
        let a = eval1(
            "ReduceSum",
            11,
            &[x()],
            vec![Attribute::ints("axes", vec![0])],
        );
        assert_eq!((a.dims.clone(), ints(&a)), (vec![1, 3], vec![5, 7, 9]));
        let a = eval1(
            "ReduceProd",
            17,
            &[x()],
            vec![Attribute::ints("axes", vec![-1])],
        );
        assert_eq!(ints(&a), vec![6, 120]);
        let a = eval1("ReduceProd", 18, &[x(), i64a(&[1], &[-1])], vec![]);
        assert_eq!(ints(&a), vec![6, 120]);
        let a = eval1("ReduceMax", 13, &[x()], vec![Attribute::int("keepdims", 0)]);
        assert_eq!((a.dims.clone(), ints(&a)), (vec![], vec![6]));
        let a = eval1("ReduceMin", 18, &[f32a(&[3], &[2.0, -1.0, 4.0])], vec![]);
        assert_eq!(floats(&a), vec![-1.0]);
        let a = eval1(
            "ReduceMean",
            17,
            &[f32a(&[2, 2], &[1.0, 2.0, 3.0, 5.0])],
            vec![Attribute::ints("axes", vec![1])],
        );
        assert_eq!(floats(&a), vec![1.5, 4.0]);
        let a = eval1(
            "ReduceSum",
            13,
            &[x()],
            vec![Attribute::int("noop_with_empty_axes", 1)],
        );
        assert_eq!(a.dims, vec![2, 3]);
    }
}
