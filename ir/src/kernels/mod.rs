//! Reference kernels: exact CPU implementations of the ops constant folding
//! meets (shape arithmetic, elementwise math, Cast, data movement, small
//! reductions and MatMul).
//!
//! Folding sees them through the [`Evaluator`] trait, so another evaluator
//! (tract, in the CLI) can serve rarer ops behind the same interface: chain
//! them with [`Fallback`].
//!
//! Exactness: integer math is exact with two's-complement wrapping like the
//! C++ runtimes; float `+ - * /`, `sqrt`, comparisons, casts and data movement
//! give the correctly rounded (bit-exact) result in every float type;
//! transcendental functions (`Exp`, `Log`, `Pow`) and sums are computed in f64
//! and rounded once, which may differ from a runtime's f32 result by an ulp.
//! Anything an ONNX runtime would leave undefined (integer division by zero,
//! casting NaN or out-of-range floats to integers, out-of-range indices) is an
//! error, never a guessed value.

pub mod array;
mod cx;
mod elementwise;
mod error;
mod misc;
mod movement;
mod recurrent;
mod reduce;
mod special;

use crate::graph::Node;
use crate::tensor::Tensor;

pub use array::{Array, Buf, Num};
// What the kernels share sits below them (error.rs, cx.rs); this file
// only dispatches to them.
use cx::Cx;
pub use error::KernelError;

/// Computes a node's outputs from constant inputs.
pub trait Evaluator {
    /// `inputs[i]` is `None` for an omitted optional input. `Ok(None)`: this
    /// evaluator does not implement the op (or this form of it).
    fn eval(
        &self,
        node: &Node,
        inputs: &[Option<&Tensor>],
        opset: i64,
    ) -> Result<Option<Vec<Tensor>>, KernelError>;
}

/// Tries `.0`, and `.1` for what `.0` does not implement.
pub struct Fallback<A, B>(pub A, pub B);

impl<A: Evaluator, B: Evaluator> Evaluator for Fallback<A, B> {
    fn eval(
        &self,
        node: &Node,
        inputs: &[Option<&Tensor>],
        opset: i64,
    ) -> Result<Option<Vec<Tensor>>, KernelError> {
        match self.0.eval(node, inputs, opset)? {
            Some(out) => Ok(Some(out)),
            None => self.1.eval(node, inputs, opset),
        }
    }
}

impl<E: Evaluator + ?Sized> Evaluator for Box<E> {
    fn eval(
        &self,
        node: &Node,
        inputs: &[Option<&Tensor>],
        opset: i64,
    ) -> Result<Option<Vec<Tensor>>, KernelError> {
        (**self).eval(node, inputs, opset)
    }
}

/// The built-in kernels. `max_output_bytes` refuses, before allocating, any
/// output larger than the limit (a `ConstantOfShape` to 1 GB never allocates).
#[derive(Clone, Debug, Default)]
pub struct ReferenceKernels {
    pub max_output_bytes: Option<u64>,
}

/// Ops of the default domain the reference kernels implement.
pub const SUPPORTED_OPS: &[&str] = &[
    "Abs",
    "Add",
    "And",
    "BitShift",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "DepthToSpace",
    "Div",
    "Equal",
    "Exp",
    "Expand",
    "Flatten",
    "Floor",
    "GRU",
    "Gather",
    "GatherElements",
    "Greater",
    "GreaterOrEqual",
    "Identity",
    "Less",
    "LessOrEqual",
    "LSTM",
    "Log",
    "MatMul",
    "Max",
    "Mean",
    "Min",
    "Mod",
    "Mul",
    "Neg",
    "Not",
    "Or",
    "Pow",
    "RNN",
    "Range",
    "Reciprocal",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "Relu",
    "Reshape",
    "Round",
    "Shape",
    "Sign",
    "Size",
    "Slice",
    "Softmax",
    "SpaceToDepth",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Sum",
    "Swish",
    "Tile",
    "Transpose",
    "Unsqueeze",
    "Where",
    "Xor",
];

impl ReferenceKernels {
    pub fn new() -> ReferenceKernels {
        ReferenceKernels::default()
    }

    pub fn with_limit(max_output_bytes: u64) -> ReferenceKernels {
        ReferenceKernels {
            max_output_bytes: Some(max_output_bytes),
        }
    }

    /// True when the op has a reference kernel (some forms may still decline).
    pub fn supports(node: &Node) -> bool {
        node.domain().is_empty() && SUPPORTED_OPS.contains(&node.op_type.as_str())
    }
}

impl Evaluator for ReferenceKernels {
    fn eval(
        &self,
        node: &Node,
        inputs: &[Option<&Tensor>],
        opset: i64,
    ) -> Result<Option<Vec<Tensor>>, KernelError> {
        if !ReferenceKernels::supports(node) {
            return Ok(None);
        }
        let cx = Cx {
            node,
            raw: inputs,
            opset,
            limit: self.max_output_bytes,
        };
        let out = match run(&cx)? {
            Some(o) => o,
            None => return Ok(None),
        };
        for a in &out {
            cx.check(a.dtype(), a.numel())?;
        }
        Ok(Some(out.iter().map(|a| a.to_tensor()).collect()))
    }
}

fn run(cx: &Cx) -> Result<Option<Vec<Array>>, KernelError> {
    let op = cx.node.op_type.as_str();
    if let Some(r) = elementwise::run(cx, op)? {
        return Ok(Some(r));
    }
    if let Some(r) = movement::run(cx, op)? {
        return Ok(Some(r));
    }
    if let Some(r) = reduce::run(cx, op)? {
        return Ok(Some(r));
    }
    if let Some(r) = special::run(cx, op)? {
        return Ok(Some(r));
    }
    if let Some(r) = recurrent::run(cx, op)? {
        return Ok(Some(r));
    }
    misc::run(cx, op)
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::attr::Attribute;

    pub fn node(op: &str, attrs: Vec<Attribute>) -> Node {
        Node {
            op_type: op.into(),
            attributes: attrs,
            ..Default::default()
        }
    }

    pub fn eval(
        op: &str,
        opset: i64,
        inputs: &[Option<Tensor>],
        attrs: Vec<Attribute>,
    ) -> Result<Vec<Array>, KernelError> {
        let n = node(op, attrs);
        let refs: Vec<Option<&Tensor>> = inputs.iter().map(|t| t.as_ref()).collect();
        let out = ReferenceKernels::new()
            .eval(&n, &refs, opset)?
            .ok_or_else(|| KernelError::Unsupported(op.into()))?;
        out.iter().map(Array::from_tensor).collect()
    }

    pub fn eval1(op: &str, opset: i64, inputs: &[Option<Tensor>], attrs: Vec<Attribute>) -> Array {
        eval(op, opset, inputs, attrs)
            .unwrap_or_else(|e| panic!("{op}: {e}"))
            .remove(0)
    }

    pub fn t(a: Array) -> Option<Tensor> {
        Some(a.to_tensor())
    }

    pub fn f32a(dims: &[usize], v: &[f32]) -> Option<Tensor> {
        t(Array::new(dims.to_vec(), Buf::F32(v.to_vec())))
    }

    pub fn i64a(dims: &[usize], v: &[i64]) -> Option<Tensor> {
        t(Array::new(dims.to_vec(), Buf::I64(v.to_vec())))
    }

    pub fn i32a(dims: &[usize], v: &[i32]) -> Option<Tensor> {
        t(Array::new(dims.to_vec(), Buf::I32(v.to_vec())))
    }

    pub fn f64a(dims: &[usize], v: &[f64]) -> Option<Tensor> {
        t(Array::new(dims.to_vec(), Buf::F64(v.to_vec())))
    }

    pub fn f16a(dims: &[usize], v: &[f32]) -> Option<Tensor> {
        t(Array::new(
            dims.to_vec(),
            Buf::F16(v.iter().map(|&x| half::f16::from_f32(x)).collect()),
        ))
    }

    pub fn boola(dims: &[usize], v: &[bool]) -> Option<Tensor> {
        t(Array::new(dims.to_vec(), Buf::Bool(v.to_vec())))
    }

    pub fn ints(a: &Array) -> Vec<i64> {
        a.buf.to_i64().expect("integer array")
    }

    pub fn floats(a: &Array) -> Vec<f64> {
        match a.buf.to_num() {
            Some(Num::F(v)) => v,
            other => panic!("not a float array: {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use crate::attr::Attribute;

    #[test]
    fn limit_refuses_before_allocating() {
        let k = ReferenceKernels::with_limit(1024);
        let n = node("ConstantOfShape", vec![]);
        let shape = Tensor::from_i64(vec![3], &[1024, 1024, 256]);
        let e = k.eval(&n, &[Some(&shape)], 17).unwrap_err();
        assert_eq!(
            e,
            KernelError::TooLarge {
                bytes: 1 << 30,
                limit: 1024
            }
        );
        let e = eval(
            "Expand",
            17,
            &[f32a(&[1], &[1.0]), i64a(&[2], &[1 << 40, 1 << 40])],
            vec![],
        );
        assert!(
            e.is_ok() || matches!(e, Err(KernelError::TooLarge { .. })),
            "unlimited kernels still refuse overflowing sizes"
        );
    }

    #[test]
    fn unsupported_ops_and_domains_decline() {
        let n = node("Erf", vec![]);
        let x = Tensor::from_f32(vec![1], &[0.5]);
        assert_eq!(ReferenceKernels::new().eval(&n, &[Some(&x)], 17), Ok(None));
        let mut n = node("Add", vec![]);
        n.domain = Some("com.example".into());
        assert_eq!(
            ReferenceKernels::new().eval(&n, &[Some(&x), Some(&x)], 17),
            Ok(None)
        );
        let _ = Attribute::int("x", 0);
    }

    struct Doubler;
    impl Evaluator for Doubler {
        fn eval(
            &self,
            node: &Node,
            inputs: &[Option<&Tensor>],
            _: i64,
        ) -> Result<Option<Vec<Tensor>>, KernelError> {
            if node.op_type != "Erf" {
                return Ok(None);
            }
            let v: Vec<f32> = inputs[0]
                .unwrap()
                .to_f64_vec()
                .unwrap()
                .iter()
                .map(|x| (2.0 * x) as f32)
                .collect();
            Ok(Some(vec![Tensor::from_f32(vec![v.len() as i64], &v)]))
        }
    }

    #[test]
    fn fallback_serves_what_the_first_does_not() {
        let e = Fallback(ReferenceKernels::new(), Doubler);
        let x = Tensor::from_f32(vec![1], &[0.5]);
        let out = e
            .eval(&node("Erf", vec![]), &[Some(&x)], 17)
            .unwrap()
            .unwrap();
        assert_eq!(out[0].to_f64_vec().unwrap(), vec![1.0]);
        let out = e
            .eval(&node("Neg", vec![]), &[Some(&x)], 17)
            .unwrap()
            .unwrap();
        assert_eq!(out[0].to_f64_vec().unwrap(), vec![-0.5]);
    }
}
