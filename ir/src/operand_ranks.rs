//! Operands of a rank no operator accepts: a MatMul fed a scalar (a mutated
//! file once turned a Div into a MatMul of a rank-0 tensor; tract panicked
//! loading it, ONNX Runtime's shape inference refused it, and verification
//! could only say that it "cannot verify"), a Gemm of a vector. Such a model
//! is a model error naming the node and the tensor, found at load.
//!
//! Only bounds the ONNX schemas state for every opset are listed, so a valid
//! model is never refused.

use crate::error::{IrError, Result};
use crate::graph::Graph;
use crate::infer::GraphFacts;

/// (op, input slot, lowest rank, highest rank) of standard-domain operators.
const RANKS: &[(&str, usize, usize, usize)] = &[
    // numpy.matmul: vectors and up; a scalar has no axis to contract.
    ("MatMul", 0, 1, usize::MAX),
    ("MatMul", 1, 1, usize::MAX),
    ("MatMulInteger", 0, 1, usize::MAX),
    ("MatMulInteger", 1, 1, usize::MAX),
    // Gemm: A and B are matrices.
    ("Gemm", 0, 2, 2),
    ("Gemm", 1, 2, 2),
    // N x C x D1...: tract read the channel axis of a rank-1 input out of
    // bounds (a segfault in release; fuzz seed 90909 case 1948).
    ("BatchNormalization", 0, 2, usize::MAX),
];

/// Refuses an operand whose known rank (inferred in the main graph,
/// declared in subgraphs) lies outside [`RANKS`].
pub(crate) fn check_operand_ranks(g: &Graph, facts: Option<&GraphFacts>) -> Result<()> {
    for (_, node) in g.nodes() {
        if !node.domain().is_empty() {
            continue;
        }
        for &(op, slot, lo, hi) in RANKS {
            if node.op_type != op {
                continue;
            }
            let Some(v) = node.inputs.get(slot).copied().flatten() else {
                continue;
            };
            let rank = facts
                .and_then(|f| f.get(v))
                .and_then(|f| f.shape().map(<[_]>::len))
                .or_else(|| g.value_type(v).and_then(|t| t.shape.map(|s| s.len())));
            let Some(rank) = rank else { continue };
            if rank < lo || rank > hi {
                let wanted = if lo == hi {
                    format!("rank {lo}")
                } else {
                    format!("rank {lo} or more")
                };
                return Err(IrError::Invalid(format!(
                    "node '{}' ({}): input {slot} '{}' has rank {rank}, and {} takes {wanted} there",
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
