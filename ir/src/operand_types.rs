//! Operands no runtime can compute on: a string tensor read by an operator
//! that does arithmetic (a mutated file once gave a Conv a string bias; tract
//! panicked loading it and ONNX Runtime refused it, so verification could only
//! say that it "cannot verify"). Such a model is a model error naming the node
//! and the tensor, found at load.
//!
//! The list holds only operators whose every input is numeric in the ONNX
//! schemas, so a valid model is never refused: operators that move or compare
//! data (Gather, Concat, Reshape, Equal, ...) may carry strings and are not
//! listed.

use crate::dtype::DataType;
use crate::error::{IrError, Result};
use crate::graph::Graph;
use crate::infer::GraphFacts;

/// Standard-domain operators that compute on numbers only.
const NUMERIC_ONLY: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Add",
    "ArgMax",
    "ArgMin",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "AveragePool",
    "BatchNormalization",
    "Ceil",
    "Celu",
    "Clip",
    "Conv",
    "ConvInteger",
    "ConvTranspose",
    "Cos",
    "Cosh",
    "CumSum",
    "DequantizeLinear",
    "Div",
    "Einsum",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GlobalLpPool",
    "GlobalMaxPool",
    "GroupNormalization",
    "GRU",
    "HardSigmoid",
    "HardSwish",
    "InstanceNormalization",
    "LayerNormalization",
    "LeakyRelu",
    "Log",
    "LogSoftmax",
    "LpNormalization",
    "LpPool",
    "LRN",
    "LSTM",
    "MatMul",
    "MatMulInteger",
    "Max",
    "MaxPool",
    "Mean",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Neg",
    "Pow",
    "PRelu",
    "QLinearConv",
    "QLinearMatMul",
    "QuantizeLinear",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "Relu",
    "Resize",
    "RMSNormalization",
    "RNN",
    "Round",
    "Selu",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softmax",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Sub",
    "Sum",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "TopK",
];

/// Refuses a string tensor read by an operator of [`NUMERIC_ONLY`] (main
/// graph with inferred types, subgraphs with declared ones).
pub(crate) fn check_operand_types(g: &Graph, facts: Option<&GraphFacts>) -> Result<()> {
    for (_, node) in g.nodes() {
        if !node.domain().is_empty() || !NUMERIC_ONLY.contains(&node.op_type.as_str()) {
            continue;
        }
        for v in node.inputs.iter().flatten().copied() {
            let dtype = facts
                .and_then(|f| f.get(v))
                .map(|f| f.ty.dtype)
                .filter(|d| *d != DataType::Undefined)
                .or_else(|| g.value_type(v).map(|t| t.dtype));
            if dtype == Some(DataType::String) {
                return Err(IrError::Invalid(format!(
                    "node '{}' ({}): input '{}' is a string tensor, and {} computes on numbers; the file is damaged or was written with the wrong type",
                    node.name_or_op(),
                    node.op_type,
                    g.value(v).name,
                    node.op_type
                )));
            }
        }
    }
    Ok(())
}
