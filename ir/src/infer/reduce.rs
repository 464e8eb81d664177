//! Reductions, ArgMax/ArgMin, TopK.

use crate::dtype::DataType;
use crate::shape::Dim;

use super::facts::{Fact, norm_axis};
use super::rule_cx::RuleCx;
use super::shape_ops::axes_arg;

const REDUCE: &[&str] = &[
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
];

pub(crate) fn infer(cx: &RuleCx) -> Option<Vec<Fact>> {
    let op = cx.node.op_type.as_str();
    if REDUCE.contains(&op) {
        return Some(vec![reduce(cx, op)]);
    }
    Some(match op {
        "ArgMax" | "ArgMin" => {
            let keep = cx.attr_int("keepdims", 1) != 0;
            let shape = cx.shape(0).and_then(|s| {
                let a = norm_axis(cx.attr_int("axis", 0), s.len())?;
                Some(reduced(s, &[a], keep))
            });
            vec![Fact::new(DataType::Int64, shape)]
        }
        "TopK" => {
            let k = if cx.opset() < 10 {
                cx.attr_int_opt("k").map(Dim::Known)
            } else {
                cx.ints(1).and_then(|v| v.first().copied()).map(Dim::Known)
            };
            let shape = cx.shape(0).and_then(|s| {
                let a = norm_axis(cx.attr_int("axis", -1), s.len())?;
                let mut out = s.to_vec();
                out[a] = k.clone().unwrap_or(Dim::Unknown);
                Some(out)
            });
            vec![cx.like(0, shape.clone()), Fact::new(DataType::Int64, shape)]
        }
        _ => return None,
    })
}

fn reduced(s: &[Dim], axes: &[usize], keep: bool) -> Vec<Dim> {
    s.iter()
        .enumerate()
        .filter_map(|(i, d)| {
            if axes.contains(&i) {
                keep.then_some(Dim::Known(1))
            } else {
                Some(d.clone())
            }
        })
        .collect()
}

fn reduce(cx: &RuleCx, op: &str) -> Fact {
    let since = if op == "ReduceSum" { 13 } else { 18 };
    let keep = cx.attr_int("keepdims", 1) != 0;
    let Some(input) = cx.shape(0) else {
        return cx.like(0, None);
    };
    let Some(axes) = axes_arg(cx, since, 1) else {
        // Axes come from a tensor we cannot read: with keepdims the rank stays.
        return cx.like(0, keep.then(|| vec![Dim::Unknown; input.len()]));
    };
    let axes = axes.unwrap_or_default();
    let noop = cx.opset() >= since && cx.attr_int("noop_with_empty_axes", 0) != 0;
    if axes.is_empty() {
        if noop {
            return cx.like(0, Some(input.to_vec()));
        }
        let all: Vec<usize> = (0..input.len()).collect();
        return cx.like(0, Some(reduced(input, &all, keep)));
    }
    match axes
        .iter()
        .map(|&a| norm_axis(a, input.len()))
        .collect::<Option<Vec<_>>>()
    {
        Some(norm) => cx.like(0, Some(reduced(input, &norm, keep))),
        None => cx.like(0, None),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::attr::Attribute;
    use crate::dtype::DataType;

    #[test]
    fn reductions_by_opset() {
        // ReduceMean: axes attribute until 17, input from 18.
        let f = run(
            "ReduceMean",
            17,
            &[f32s(&["n", "c", "h", "w"])],
            vec![Attribute::ints("axes", vec![2, 3])],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,c,1,1]");
        let f = run(
            "ReduceMean",
            18,
            &[f32s(&["n", "c", "h", "w"]), i64c(&[-1])],
            vec![Attribute::int("keepdims", 0)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,c,h]");
        // ReduceSum: input from 13.
        let f = run(
            "ReduceSum",
            13,
            &[f32s(&["n", "4"]), i64c(&[1])],
            vec![Attribute::int("keepdims", 0)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n]");
        let f = run("ReduceSum", 11, &[f32s(&["n", "4"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[1,1]");
        let f = run(
            "ReduceSum",
            13,
            &[f32s(&["n", "4"])],
            vec![Attribute::int("noop_with_empty_axes", 1)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n,4]");
        let f = run(
            "ReduceMax",
            18,
            &[f32s(&["n", "4"]), Input::T(DataType::Int64, d(&["1"]))],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[?,?]");
    }

    #[test]
    fn arg_and_topk() {
        let f = run(
            "ArgMax",
            13,
            &[f32s(&["n", "10"])],
            vec![Attribute::int("axis", -1), Attribute::int("keepdims", 0)],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[n]");
        assert_eq!(f[0].ty.dtype, DataType::Int64);
        let f = run("TopK", 11, &[f32s(&["n", "10"]), i64c(&[3])], vec![], 2);
        assert_eq!(shape_of(&f[0]), "[n,3]");
        assert_eq!(f[1].ty.dtype, DataType::Int64);
        let f = run(
            "TopK",
            1,
            &[f32s(&["n", "10"])],
            vec![Attribute::int("k", 2)],
            2,
        );
        assert_eq!(shape_of(&f[1]), "[n,2]");
    }
}
