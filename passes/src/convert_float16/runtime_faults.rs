//! float16 forms ONNX Runtime's CPU session crashes on. A float16 MatMul
//! with constant weights whose input is a Transpose moving the leading
//! axis (`perm[0] != 0`: [1,0,2] or [1,2,0] on a rank-3 input) kills the
//! process with a segmentation fault while the session is created at
//! `ORT_ENABLE_ALL` (ONNX Runtime 1.31.1 and 1.32.0, CPU; float32, or the
//! weights as an input, load). pyannote's speaker segmentation reads its
//! bidirectional LSTM that way (`Transpose(perm=[1,0,2])`, then Linear):
//! `optimize --fp16` died on it, verifying the converted model. A float16
//! Transpose, a Cast to float32 and a float32 MatMul crash it the same way;
//! a Cast to float32 before the Transpose does not. So both the Transpose
//! and the MatMul stay float32.

use std::collections::HashMap;

use infopt_ir::{Graph, NodeId};

/// Transposes and the MatMuls reading them kept in float32 because ONNX
/// Runtime crashes on their float16 form, with the reason.
pub fn crashing(g: &Graph) -> HashMap<NodeId, String> {
    let mut out = HashMap::new();
    for (id, n) in g.nodes() {
        if !n.domain().is_empty() || n.op_type != "MatMul" {
            continue;
        }
        let (Some(Some(a)), Some(Some(b))) = (n.inputs.first(), n.inputs.get(1)) else {
            continue;
        };
        if g.value(*b).initializer.is_none() {
            continue;
        }
        let Some((p, _)) = g.value(*a).producer else {
            continue;
        };
        let t = g.node(p);
        if !t.domain().is_empty() || t.op_type != "Transpose" {
            continue;
        }
        // No perm reverses the axes: the leading one moves too.
        let moves_leading = match t.attr_ints("perm") {
            Ok(Some(perm)) => perm.first().is_some_and(|&p0| p0 != 0),
            Ok(None) => true,
            Err(_) => false,
        };
        if moves_leading {
            let why = format!(
                "ONNX Runtime's CPU session crashes (a segmentation fault, 1.31 and 1.32) on a float16 Transpose moving the leading axis ('{}') read by a MatMul with constant weights ('{}'), in float16 or behind a Cast",
                t.name_or_op(),
                n.name_or_op()
            );
            out.insert(p, why.clone());
            out.insert(id, why);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};

    fn transposed_linear(perm: Option<Vec<i64>>, constant_weights: bool) -> Graph {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["T", "B", "4"]));
        let attrs = perm.map(|p| vec![Attribute::ints("perm", p)]).unwrap_or_default();
        let t = b.op("Transpose", &[x], attrs);
        let w = if constant_weights {
            b.f32("w", &[4, 2], &[0.5; 8])
        } else {
            b.input("w", DataType::Float, dims(&["4", "2"]))
        };
        let y = b.op("MatMul", &[t, w], vec![]);
        b.output(y, "y", DataType::Float, None);
        b.build(17).graph
    }

    #[test]
    fn a_transpose_moving_the_leading_axis_into_a_constant_matmul_stays_float32() {
        for perm in [Some(vec![1, 0, 2]), Some(vec![1, 2, 0]), None] {
            let g = transposed_linear(perm.clone(), true);
            let kept = crashing(&g);
            let ops: Vec<&str> = kept.keys().map(|&id| g.node(id).op_type.as_str()).collect();
            assert_eq!(kept.len(), 2, "{perm:?}: {ops:?}");
            assert!(ops.contains(&"Transpose") && ops.contains(&"MatMul"));
            assert!(kept.values().all(|w| w.contains("segmentation fault")));
        }
        // The leading axis in place, or weights fed as an input: ONNX
        // Runtime loads their float16 form.
        assert!(crashing(&transposed_linear(Some(vec![0, 2, 1]), true)).is_empty());
        assert!(crashing(&transposed_linear(Some(vec![1, 0, 2]), false)).is_empty());
    }
}
