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

/// Float graph inputs that hold indices: read by a Cast to an integer type
/// (tf2onnx's embeddings take float character ids and cast them for the
/// Gather: DeepCut's, scaled by 16, indexed past the table and the model
/// did not run, so only the op rules applied).
pub(super) fn index_inputs(model: &Model) -> HashSet<String> {
    let g = &model.graph;
    let mut out = HashSet::new();
    for io in &g.inputs {
        let v = io.value;
        let cast_to_int = g.input_uses(v).any(|(id, _)| {
            let n = g.node(id);
            n.domain().is_empty()
                && n.op_type == "Cast"
                && n.attr_int("to").ok().flatten().is_some_and(|to| {
                    use infopt_ir::DataType as D;
                    matches!(
                        D::from_code(to as i32),
                        D::Int8
                            | D::Int16
                            | D::Int32
                            | D::Int64
                            | D::Uint8
                            | D::Uint16
                            | D::Uint32
                            | D::Uint64
                    )
                })
        });
        if cast_to_int {
            out.insert(g.value(v).name.clone());
        }
    }
    out
}

/// The inputs with their float values multiplied by `k` (integer inputs,
/// token ids and masks, and the float inputs named in `indices`,
/// unchanged).
pub(super) fn scaled_inputs(
    inputs: &[HostTensor],
    k: f32,
    indices: &HashSet<String>,
) -> Vec<HostTensor> {
    inputs
        .iter()
        .map(|t| {
            if t.name().is_some_and(|n| indices.contains(n)) {
                return t.clone();
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};

    #[test]
    fn float_ids_cast_for_an_embedding_are_not_scaled() {
        // ids (float, cast to int64 for a Gather) and a float signal.
        let mut b = GraphBuilder::new();
        let ids = b.input("ids", DataType::Float, dims(&["1", "3"]));
        let x = b.input("x", DataType::Float, dims(&["1", "3", "2"]));
        let i = b.op("Cast", &[ids], vec![Attribute::int("to", 7)]);
        let table = b.f32("table", &[4, 2], &[0.5; 8]);
        let e = b.op("Gather", &[table, i], vec![]);
        let y = b.op("Add", &[e, x], vec![]);
        b.output(y, "y", DataType::Float, None);
        let model = b.build(13);
        let indices = index_inputs(&model);
        assert_eq!(indices, HashSet::from(["ids".to_string()]));
        let t = |name: &str, v: Vec<f32>| {
            HostTensor::new(Some(name.into()), vec![v.len()], TensorData::F32(v)).unwrap()
        };
        let scaled = scaled_inputs(&[t("ids", vec![3.0]), t("x", vec![0.5])], 16.0, &indices);
        assert_eq!(scaled[0].data(), &TensorData::F32(vec![3.0]));
        assert_eq!(scaled[1].data(), &TensorData::F32(vec![8.0]));
    }
}
