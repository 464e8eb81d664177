//! Which nodes of a lower-precision model add the most error: every tensor
//! two models compute under the same name is compared (see
//! [`crate::intermediates`]), and each node is charged the signal-to-noise
//! ratio its output loses against the cleanest of its inputs. A node whose
//! float16 output overflows loses everything (its SNR is minus infinity); a
//! node that only rounds like the rest loses a few dB.
//!
//! Used by the automatic float32 islands of `--fp16`/`--bf16` (src/half.rs);
//! the INT8 fallback ranks its layers the same way.

use std::collections::HashMap;

use infopt_ir::Model;
use infopt_runtime::{Backend, InputShapes, OutputAgreement};
use serde::Serialize;

use crate::error::Result;
use crate::intermediates::{self, Side};

/// The error one node adds.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct NodeError {
    /// The node's name in the reference model.
    pub node: String,
    pub op: String,
    /// Its first output.
    pub tensor: String,
    /// SNR of that output against the reference, dB (minus infinity when it
    /// holds an infinity or NaN the reference does not).
    pub output_snr_db: f64,
    /// The SNR the node loses: the cleanest input's (at most `ceiling_db`)
    /// minus its output's.
    pub added_db: f64,
}

/// The SNR of a compared tensor, with non-finite differences as minus infinity.
pub fn snr_of(a: &OutputAgreement) -> f64 {
    if a.issue.is_some() && a.elements == 0 {
        return f64::NEG_INFINITY;
    }
    if !a.max_abs.is_finite() || a.nan_mismatches > 0 || a.snr_db.is_nan() {
        return f64::NEG_INFINITY;
    }
    a.snr_db
}

/// Ranks the nodes of `reference` by the error they add in `candidate`,
/// worst first. `outputs` are the graph outputs' agreements (the
/// verification's), so the nodes that produce graph outputs are ranked too.
/// `ceiling_db` caps the SNR of inputs that are exact in both models (graph
/// inputs, weights): one rounding to the lower precision costs about that
/// much, so a first layer is charged its own rounding, not infinity.
pub fn rank(
    backend: &dyn Backend,
    shapes: &InputShapes,
    reference: Side<'_>,
    candidate: Side<'_>,
    outputs: &[OutputAgreement],
    ceiling_db: f64,
) -> Result<Vec<NodeError>> {
    let tol = infopt_runtime::compare::Tolerance {
        rtol: 0.0,
        atol: 0.0,
    };
    let model: &Model = reference.model;
    let report = intermediates::compare(backend, shapes, reference, candidate, tol)?;
    let mut snr: HashMap<&str, f64> = report
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), snr_of(&t.agreement)))
        .collect();
    for o in outputs {
        snr.insert(o.name.as_str(), snr_of(o));
    }
    Ok(rank_nodes(model, &snr, ceiling_db))
}

/// The ranking from known tensor SNRs (by name); nodes whose first output
/// was not compared are left out.
pub fn rank_nodes(model: &Model, snr: &HashMap<&str, f64>, ceiling_db: f64) -> Vec<NodeError> {
    let g = &model.graph;
    let mut out = Vec::new();
    for (_, node) in g.nodes() {
        let Some(first) = node.outputs.first().copied().flatten() else {
            continue;
        };
        let tensor = g.value(first).name.clone();
        let Some(&out_snr) = snr.get(tensor.as_str()) else {
            continue;
        };
        let input_snr = node
            .inputs
            .iter()
            .flatten()
            .filter_map(|v| snr.get(g.value(*v).name.as_str()).copied())
            .fold(ceiling_db, f64::min);
        let added = if out_snr == f64::NEG_INFINITY {
            if input_snr == f64::NEG_INFINITY {
                // Broken upstream already: this node is not the cause.
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            (input_snr - out_snr.min(ceiling_db)).max(0.0)
        };
        out.push(NodeError {
            node: node.name_or_op().to_string(),
            op: node.op_type.clone(),
            tensor,
            output_snr_db: out_snr,
            added_db: added,
        });
    }
    // Worst first; ties (equal loss) in graph order.
    out.sort_by(|a, b| b.added_db.total_cmp(&a.added_db));
    out
}

/// The SNR of one rounding to a type with `mantissa_bits` explicit bits: a
/// relative error uniform within half a unit in the last place.
pub fn rounding_snr_db(mantissa_bits: u32) -> f64 {
    let unit = 2f64.powi(-(mantissa_bits as i32) - 1);
    -20.0 * (unit / 3f64.sqrt()).log10()
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::DataType;
    use infopt_ir::builder::GraphBuilder;
    use infopt_ir::builder::dims;

    #[test]
    fn the_node_that_overflows_is_charged_everything_and_ranked_first() {
        // x -> Relu -> Mul -> Tanh: Relu rounds (60 dB), Mul overflows
        // (-inf), Tanh reads the broken tensor and is not blamed.
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["4"]));
        let a = b.op("Relu", &[x], vec![]);
        let k = b.f32("k", &[1], &[3.0]);
        let m = b.op("Mul", &[a, k], vec![]);
        let t = b.op("Tanh", &[m], vec![]);
        b.output(t, "y", DataType::Float, None);
        let model = b.build(17);
        let snr: HashMap<&str, f64> = [
            ("relu_1_out", 60.0),
            ("mul_2_out", f64::NEG_INFINITY),
            ("y", f64::NEG_INFINITY),
        ]
        .into_iter()
        .collect();
        let ranked = rank_nodes(&model, &snr, 71.0);
        assert_eq!(ranked[0].node, "mul_2");
        assert_eq!(ranked[0].added_db, f64::INFINITY);
        let of = |n: &str| ranked.iter().find(|r| r.node == n).unwrap().added_db;
        assert_eq!(of("relu_1"), 11.0, "a graph input counts as the ceiling");
        assert_eq!(of("tanh_3"), 0.0);
        assert_eq!(ranked.len(), 3);
    }

    #[test]
    fn float16_rounding_costs_about_71_db() {
        let db = rounding_snr_db(10);
        assert!((db - 70.99).abs() < 0.1, "{db}");
        assert!((rounding_snr_db(7) - 52.9).abs() < 0.1);
    }
}
