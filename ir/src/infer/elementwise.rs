//! Elementwise ops: unary, binary and variadic with multidirectional
//! broadcasting, comparisons, logic, Where, Cast — and the value arithmetic
//! on shape tensors (`Mul(Gather(Shape(x), 0), 2)` has value `2*batch`).

use crate::dtype::DataType;
use crate::shape::Dim;

use super::facts::{Fact, SymValue};
use super::rule_cx::RuleCx;
use super::sym::{self, Expr};

/// Broadcast of two dims. `None` when they provably cannot broadcast.
pub(crate) fn broadcast_dim(a: &Dim, b: &Dim) -> Option<Dim> {
    Some(match (a, b) {
        (Dim::Known(1), x) | (x, Dim::Known(1)) => x.clone(),
        (Dim::Known(p), Dim::Known(q)) => {
            if p != q {
                return None;
            }
            Dim::Known(*p)
        }
        // A known size other than 1 wins: the other side is that size or 1.
        (Dim::Known(p), _) | (_, Dim::Known(p)) => Dim::Known(*p),
        (Dim::Sym(x), Dim::Sym(y)) if sym::canonical(a) == sym::canonical(b) || x == y => {
            Dim::Sym(x.clone())
        }
        _ => Dim::Unknown,
    })
}

/// Multidirectional (numpy) broadcast of shapes; `None` if any rank is
/// unknown or the shapes cannot broadcast.
pub(crate) fn broadcast(shapes: &[Option<&[Dim]>]) -> Option<Vec<Dim>> {
    let mut out: Vec<Dim> = Vec::new();
    for s in shapes {
        let s = (*s)?;
        if s.len() > out.len() {
            let mut grown = vec![Dim::Known(1); s.len() - out.len()];
            grown.extend(out);
            out = grown;
        }
        let off = out.len() - s.len();
        for (i, d) in s.iter().enumerate() {
            out[off + i] = broadcast_dim(&out[off + i], d)?;
        }
    }
    Some(out)
}

const UNARY_SAME: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Ceil",
    "Celu",
    "Cos",
    "Cosh",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "LeakyRelu",
    "Log",
    "Mish",
    "Neg",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "BitwiseNot",
    "Not",
    "Clip",
    "CumSum",
    "Softmax",
    "LogSoftmax",
    "Hardmax",
    "LRN",
    "InstanceNormalization",
    "LpNormalization",
    "MeanVarianceNormalization",
    "Trilu",
    "ReverseSequence",
    "Swish",
];

const BINARY_SAME: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "PRelu",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "And",
    "Or",
    "Xor",
];

const COMPARE: &[&str] = &["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"];

const VARIADIC: &[&str] = &["Max", "Min", "Sum", "Mean"];

pub(crate) fn infer(cx: &RuleCx) -> Option<Vec<Fact>> {
    let op = cx.node.op_type.as_str();
    if UNARY_SAME.contains(&op) {
        let mut f = Fact::new(cx.dtype(0), cx.shape(0).map(|s| s.to_vec()));
        if op == "Identity" {
            f.value = cx.value(0).cloned();
        } else if op == "Neg" {
            f.value = map_value(cx, |e| e.neg());
        }
        return Some(vec![f]);
    }
    if BINARY_SAME.contains(&op) || VARIADIC.contains(&op) {
        let shapes: Vec<Option<&[Dim]>> = (0..cx.n_inputs()).map(|i| cx.shape(i)).collect();
        let shape = broadcast(&shapes);
        let dtype = (0..cx.n_inputs())
            .map(|i| cx.dtype(i))
            .find(|d| *d != DataType::Undefined)
            .unwrap_or(DataType::Undefined);
        // Pow's result has the base's type.
        let dtype = if op == "Pow" { cx.dtype(0) } else { dtype };
        return Some(vec![
            Fact::new(dtype, shape).with_value(binary_value(cx, op)),
        ]);
    }
    if COMPARE.contains(&op) {
        let shape = broadcast(&[cx.shape(0), cx.shape(1)]);
        return Some(vec![
            Fact::new(DataType::Bool, shape).with_value(compare_value(cx, op)),
        ]);
    }
    match op {
        "IsNaN" | "IsInf" => Some(vec![Fact::new(
            DataType::Bool,
            cx.shape(0).map(|s| s.to_vec()),
        )]),
        "Where" => {
            let shape = broadcast(&[cx.shape(0), cx.shape(1), cx.shape(2)]);
            let dtype = if cx.dtype(1) != DataType::Undefined {
                cx.dtype(1)
            } else {
                cx.dtype(2)
            };
            Some(vec![Fact::new(dtype, shape).with_value(where_value(cx))])
        }
        "Cast" => {
            let to = DataType::from_code(cx.attr_int("to", 0) as i32);
            let value = cast_value(cx.value(0), cx.dtype(0), to);
            Some(vec![
                Fact::new(to, cx.shape(0).map(|s| s.to_vec())).with_value(value),
            ])
        }
        "CastLike" => {
            let to = cx.dtype(1);
            let value = cast_value(cx.value(0), cx.dtype(0), to);
            Some(vec![
                Fact::new(to, cx.shape(0).map(|s| s.to_vec())).with_value(value),
            ])
        }
        "QuantizeLinear" => {
            let dtype = match cx.attr_int_opt("output_dtype").filter(|&c| c != 0) {
                Some(c) => DataType::from_code(c as i32),
                None if cx.has_input(2) => cx.dtype(2),
                None => DataType::Uint8,
            };
            Some(vec![Fact::new(dtype, cx.shape(0).map(|s| s.to_vec()))])
        }
        "DequantizeLinear" => {
            let dtype = match cx.attr_int_opt("output_dtype").filter(|&c| c != 0) {
                Some(c) => DataType::from_code(c as i32),
                None => cx.dtype(1),
            };
            Some(vec![Fact::new(dtype, cx.shape(0).map(|s| s.to_vec()))])
        }
        "DynamicQuantizeLinear" => Some(vec![
            Fact::new(DataType::Uint8, cx.shape(0).map(|s| s.to_vec())),
            Fact::new(DataType::Float, Some(vec![])),
            Fact::new(DataType::Uint8, Some(vec![])),
        ]),
        "Dropout" => {
            let shape = cx.shape(0).map(|s| s.to_vec());
            Some(vec![
                Fact::new(cx.dtype(0), shape.clone()),
                Fact::new(DataType::Bool, shape),
            ])
        }
        _ => None,
    }
}

fn cast_value(v: Option<&SymValue>, from: DataType, to: DataType) -> Option<SymValue> {
    // Integer to integer only, and only when every known element fits.
    if !super::facts::is_int(from) || !matches!(to, DataType::Int64 | DataType::Int32) {
        return None;
    }
    let v = v?;
    let fits = v.elems.iter().all(|d| match d {
        Dim::Known(x) => to == DataType::Int64 || i32::try_from(*x).is_ok(),
        _ => true,
    });
    fits.then(|| v.clone())
}

fn map_value(cx: &RuleCx, f: impl Fn(&Expr) -> Option<Expr>) -> Option<SymValue> {
    let v = cx.value(0)?;
    Some(SymValue {
        scalar: v.scalar,
        elems: v
            .elems
            .iter()
            .map(|d| {
                sym::expr_of(d)
                    .and_then(|e| f(&e))
                    .map(|e| e.to_dim())
                    .unwrap_or(Dim::Unknown)
            })
            .collect(),
    })
}

/// The element pairs of two integer shape-like values, broadcast (one side
/// may have a single element), and whether the result is a scalar.
fn value_pairs(cx: &RuleCx) -> Option<(Vec<(Dim, Dim)>, bool)> {
    if cx.n_inputs() != 2 || !super::facts::is_int(cx.dtype(0)) {
        return None;
    }
    let (a, b) = (cx.value(0)?, cx.value(1)?);
    let n = match (a.elems.len(), b.elems.len()) {
        (x, y) if x == y => x,
        (1, y) => y,
        (x, 1) => x,
        _ => return None,
    };
    let get = |v: &SymValue, i: usize| v.elems[if v.elems.len() == 1 { 0 } else { i }].clone();
    Some((
        (0..n).map(|i| (get(a, i), get(b, i))).collect(),
        a.scalar && b.scalar,
    ))
}

/// `Where(c, x, y)` on shape-like values whose condition is known element by
/// element (`Where(Equal(shape, -1), 1, shape)` in HF exports' Expand).
fn where_value(cx: &RuleCx) -> Option<SymValue> {
    let (c, x, y) = (cx.value(0)?, cx.value(1)?, cx.value(2)?);
    let n = [c, x, y].iter().map(|v| v.elems.len()).max()?;
    if [c, x, y]
        .iter()
        .any(|v| v.elems.len() != n && v.elems.len() != 1)
    {
        return None;
    }
    let get = |v: &SymValue, i: usize| v.elems[if v.elems.len() == 1 { 0 } else { i }].clone();
    let mut elems = Vec::with_capacity(n);
    for i in 0..n {
        elems.push(match get(c, i) {
            Dim::Known(0) => get(y, i),
            Dim::Known(_) => get(x, i),
            _ => return None,
        });
    }
    Some(SymValue {
        scalar: c.scalar && x.scalar && y.scalar,
        elems,
    })
}

/// Comparisons of shape-like values, as 0/1: known numbers compare as usual,
/// and a size (a symbol, non-negative) is never equal to a negative number
/// (the `Where(Equal(shape, -1), 1, shape)` idiom of HF exports).
fn compare_value(cx: &RuleCx, op: &str) -> Option<SymValue> {
    let (pairs, scalar) = value_pairs(cx)?;
    let mut elems = Vec::with_capacity(pairs.len());
    for (x, y) in pairs {
        let r = match (&x, &y) {
            (Dim::Known(p), Dim::Known(q)) => Some(match op {
                "Equal" => p == q,
                "Less" => p < q,
                "Greater" => p > q,
                "LessOrEqual" => p <= q,
                _ => p >= q,
            }),
            // A size (symbol) is never a negative number.
            (Dim::Sym(_), Dim::Known(q)) | (Dim::Known(q), Dim::Sym(_))
                if op == "Equal"
                    && *q < 0
                    && nonneg(if matches!(x, Dim::Sym(_)) { &x } else { &y }) =>
            {
                Some(false)
            }
            (Dim::Sym(p), Dim::Sym(q)) if op == "Equal" && p == q => Some(true),
            _ => None,
        };
        elems.push(r.map(|t| Dim::Known(t as i64)).unwrap_or(Dim::Unknown));
    }
    Some(SymValue { scalar, elems })
}

/// Elementwise value arithmetic on two shape-like values with broadcasting.
fn binary_value(cx: &RuleCx, op: &str) -> Option<SymValue> {
    let (pairs, scalar) = value_pairs(cx)?;
    let mut elems = Vec::with_capacity(pairs.len());
    for (x, y) in pairs {
        elems.push(match op {
            "Add" => sym::add(&x, &y),
            "Sub" => sym::sub(&x, &y),
            "Mul" => sym::mul(&x, &y),
            "Div" => match (&x, &y) {
                // Integer division truncates toward zero.
                (Dim::Known(p), Dim::Known(q)) if *q != 0 => Dim::Known(p / q),
                (_, Dim::Known(q)) if *q > 0 && nonneg(&x) => sym::floor_div(&x, *q),
                _ => Dim::Unknown,
            },
            "Max" | "Min" => match (&x, &y) {
                (Dim::Known(p), Dim::Known(q)) => {
                    Dim::Known(if op == "Max" { *p.max(q) } else { *p.min(q) })
                }
                _ if x == y => x.clone(),
                _ => Dim::Unknown,
            },
            "Mod" => match (&x, &y) {
                (Dim::Known(p), Dim::Known(q)) if *q != 0 => {
                    let fmod = cx.attr_int("fmod", 0) != 0;
                    let r = p % q;
                    Dim::Known(if !fmod && r != 0 && (r < 0) != (*q < 0) {
                        r + q
                    } else {
                        r
                    })
                }
                _ => Dim::Unknown,
            },
            _ => return None,
        });
    }
    Some(SymValue { scalar, elems })
}

/// True when the dim expression is provably ≥ 0 (sizes are non-negative).
pub(crate) fn nonneg(d: &Dim) -> bool {
    match d {
        Dim::Known(v) => *v >= 0,
        Dim::Sym(s) => {
            let e = Expr::parse(s);
            !e.to_string().contains('-')
        }
        Dim::Unknown => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::attr::Attribute;
    use crate::dtype::DataType;

    #[test]
    fn broadcasting() {
        let f = run(
            "Add",
            17,
            &[f32s(&["batch", "1", "8"]), f32s(&["4", "1"])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[batch,4,8]");
        let f = run(
            "Mul",
            17,
            &[f32s(&["batch", "seq"]), f32s(&["batch", "seq"])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[batch,seq]");
        // Different symbols: unknown, never a guess.
        let f = run("Add", 17, &[f32s(&["a"]), f32s(&["b"])], vec![], 1);
        assert_eq!(shape_of(&f[0]), "[?]");
        // A symbol against a known size > 1: the known size.
        let f = run(
            "Add",
            17,
            &[f32s(&["a", "3"]), f32s(&["5", "3"])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[5,3]");
        // Incompatible known sizes: nothing.
        let f = run("Add", 17, &[f32s(&["2"]), f32s(&["3"])], vec![], 1);
        assert_eq!(f[0].shape(), None);
        let f = run(
            "Where",
            17,
            &[
                Input::T(DataType::Bool, d(&["1", "seq"])),
                f32s(&[]),
                f32s(&["batch", "1"]),
            ],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[batch,seq]");
        assert_eq!(f[0].ty.dtype, DataType::Float);
        let f = run(
            "Max",
            17,
            &[f32s(&["3"]), f32s(&["2", "1"]), f32s(&[])],
            vec![],
            1,
        );
        assert_eq!(shape_of(&f[0]), "[2,3]");
    }

    #[test]
    fn types() {
        let f = run(
            "Equal",
            17,
            &[Input::T(DataType::Int64, d(&["3"])), i64c(&[1])],
            vec![],
            1,
        );
        assert_eq!(f[0].ty.dtype, DataType::Bool);
        assert_eq!(shape_of(&f[0]), "[3]");
        let f = run(
            "Cast",
            17,
            &[f32s(&["n"])],
            vec![Attribute::int("to", 10)],
            1,
        );
        assert_eq!(f[0].ty.dtype, DataType::Float16);
        let f = run(
            "CastLike",
            17,
            &[f32s(&["n"]), Input::T(DataType::Int32, d(&[]))],
            vec![],
            1,
        );
        assert_eq!(f[0].ty.dtype, DataType::Int32);
        let f = run("Dropout", 13, &[f32s(&["n", "2"])], vec![], 2);
        assert_eq!(f[1].ty.dtype, DataType::Bool);
        assert_eq!(shape_of(&f[1]), "[n,2]");
        let f = run(
            "DequantizeLinear",
            13,
            &[
                Input::T(DataType::Int8, d(&["n", "4"])),
                Input::C(Box::new(crate::tensor::Tensor::from_f32(vec![], &[0.5]))),
            ],
            vec![],
            1,
        );
        assert_eq!(
            (f[0].ty.dtype, shape_of(&f[0])),
            (DataType::Float, "[n,4]".to_string())
        );
        let f = run(
            "QuantizeLinear",
            13,
            &[
                f32s(&["n"]),
                Input::C(Box::new(crate::tensor::Tensor::from_f32(vec![], &[0.5]))),
                Input::T(DataType::Int8, vec![]),
            ],
            vec![],
            1,
        );
        assert_eq!(f[0].ty.dtype, DataType::Int8);
        let f = run(
            "Pow",
            17,
            &[f32s(&["n"]), Input::T(DataType::Int64, d(&[]))],
            vec![],
            1,
        );
        assert_eq!(f[0].ty.dtype, DataType::Float);
    }

    #[test]
    fn value_arithmetic() {
        use super::super::SymValue;
        use crate::shape::Dim;
        // Mul(Gather(Shape(x), 0), 2) → 2*batch
        let mut b = crate::builder::GraphBuilder::new();
        let x = b.input("x", DataType::Float, d(&["batch", "seq"]));
        let s = b.op("Shape", &[x], vec![]);
        let two = b.i64("two", &[], &[2]);
        let m = b.op("Mul", &[s, two], vec![]);
        let one = b.i64("one", &[1], &[1]);
        let a = b.op("Add", &[s, one], vec![]);
        let dv = b.op("Div", &[m, two], vec![]);
        let mut model = b.build(17);
        let mut r = super::super::InferReport::default();
        let o = super::super::Opsets::of(&model);
        let facts = super::super::infer_graph(&mut model.graph, o, &Default::default(), &mut r);
        assert_eq!(
            facts.get(m).unwrap().value,
            Some(SymValue::vector(d(&["2*batch", "2*seq"])))
        );
        assert_eq!(
            facts.get(a).unwrap().value,
            Some(SymValue::vector(d(&["batch+1", "seq+1"])))
        );
        assert_eq!(
            facts.get(dv).unwrap().value,
            Some(SymValue::vector(vec![
                Dim::Sym("batch".into()),
                Dim::Sym("seq".into())
            ]))
        );
    }
}
