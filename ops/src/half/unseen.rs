//! What generated inputs cannot show float16: with no `--inputs`, the
//! model is judged on seeded noise (floats uniform in [-1, 1)), which
//! spreads its energy where real signals concentrate it. basic-pitch's
//! CQT front end passed on noise and lost 30 points of note F1 on real
//! audio (non-finite outputs on some samples): a tone puts hundreds of
//! times the power of noise into one bin. So, on generated inputs only,
//! the conversion stays conservative where values could leave float16's
//! range:
//!
//! - exponentials and powers (Exp, Pow, Softplus, ReduceLogSumExp) and
//!   squares (`Mul(a, a)`), and the elementwise chain that computes the
//!   argument of a Log or Sqrt (a power or magnitude: `re*re + im*im + eps`)
//!   together with the Log/Sqrt itself, stay float32;
//! - the float32 model runs once more with its float inputs scaled by
//!   [`HEADROOM`], and what reaches float16's range there stays float32
//!   (the same rule as on the verification inputs).

use std::collections::HashSet;

use infopt_ir::{Model, NodeId};
use infopt_runtime::{HostTensor, TensorData};

use super::nodes::half_nodes;

/// How much larger than the generated inputs real float inputs may be.
pub const HEADROOM: f32 = 16.0;

/// Ops whose output grows exponentially or polynomially with their input.
const EXPONENTIAL: &[&str] = &["Exp", "Pow", "Softplus", "ReduceLogSumExp"];

/// Ops reading a power or a magnitude (their argument is computed by
/// squaring or summing, which is where float16 overflows).
const LOG_DOMAIN: &[&str] = &["Log", "Sqrt"];

/// Elementwise ops and reductions that compute such an argument.
const ARGUMENT_CHAIN: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Abs",
    "Max",
    "Min",
    "Clip",
    "Pow",
    "Neg",
    "Relu",
    "Sqrt",
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
];

/// How far upstream of a Log/Sqrt the chain is followed.
const CHAIN_DEPTH: usize = 6;

/// The inputs with their float values multiplied by `k` (integer inputs,
/// token ids and masks, unchanged).
pub(super) fn scaled_inputs(inputs: &[HostTensor], k: f32) -> Vec<HostTensor> {
    inputs
        .iter()
        .map(|t| {
            let data = match t.data() {
                TensorData::F32(v) => TensorData::F32(v.iter().map(|x| x * k).collect()),
                TensorData::F64(v) => TensorData::F64(v.iter().map(|x| x * f64::from(k)).collect()),
                _ => return t.clone(),
            };
            HostTensor::new(t.name().map(str::to_string), t.shape().to_vec(), data)
                .unwrap_or_else(|_| t.clone())
        })
        .collect()
}

/// Nodes the candidate runs in the half type that compute exponentials,
/// powers, squares, or the argument of a Log/Sqrt: (node, op, first output
/// tensor, why), in graph order.
pub(super) fn risky_nodes(
    fp32: &Model,
    candidate: &Model,
) -> Vec<(String, String, String, &'static str)> {
    let half = half_nodes(candidate);
    let g = &fp32.graph;
    let order = g.topological_order().unwrap_or_else(|_| g.node_ids());
    let mut why: Vec<(NodeId, &'static str)> = Vec::new();
    let mut seen: HashSet<NodeId> = HashSet::new();
    let mut add = |id: NodeId, reason: &'static str, why: &mut Vec<(NodeId, &'static str)>| {
        if seen.insert(id) {
            why.push((id, reason));
            true
        } else {
            false
        }
    };
    for &id in &order {
        let n = g.node(id);
        if !n.domain().is_empty() {
            continue;
        }
        let op = n.op_type.as_str();
        let square = op == "Mul" && !n.inputs.is_empty() && n.inputs.first() == n.inputs.get(1);
        if EXPONENTIAL.contains(&op) {
            add(id, "an exponential or a power", &mut why);
        } else if square {
            add(id, "a square", &mut why);
        }
        if !LOG_DOMAIN.contains(&op) {
            continue;
        }
        add(id, "a logarithm or root of a computed power", &mut why);
        // Upstream: what computes its argument.
        infopt_ir::walk::walk_producers(g, id, CHAIN_DEPTH, |p| {
            let pn = g.node(p);
            pn.domain().is_empty()
                && ARGUMENT_CHAIN.contains(&pn.op_type.as_str())
                && add(
                    p,
                    "the argument of a logarithm or root (a power or magnitude)",
                    &mut why,
                )
        });
    }
    why.sort_by_key(|(id, _)| order.iter().position(|o| o == id));
    why.into_iter()
        .filter_map(|(id, reason)| {
            let n = g.node(id);
            let name = n.name.clone().filter(|s| half.contains(s))?;
            let tensor = n
                .outputs
                .first()
                .copied()
                .flatten()
                .map(|v| g.value(v).name.clone())
                .unwrap_or_default();
            Some((name, n.op_type.clone(), tensor, reason))
        })
        .collect()
}
