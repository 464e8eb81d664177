//! Comparing every tensor two models compute under the same name, to find where
//! they start to diverge (`compare --intermediate`, `optimize --verify-each-pass`).

use std::collections::HashSet;
use std::path::PathBuf;

use infopt_ir::{Graph, GraphIo, Model};
use infopt_runtime::compare::{self, OutputAgreement, Tolerance};
use infopt_runtime::{Backend, HostTensor, InputShapes, RuntimeError};
use serde::Serialize;

use crate::exit::{CliError, CliResult, Exit};

/// One model to compare: the IR, the folder its external data lives in, and its inputs.
pub struct Side<'a> {
    pub model: &'a Model,
    pub dir: PathBuf,
    pub inputs: &'a [HostTensor],
}

#[derive(Serialize, Debug)]
pub struct IntermediateAgreement {
    /// The tensor's name in both models.
    pub name: String,
    /// The node of A that produces it.
    pub op_type: String,
    pub node: String,
    pub agreement: OutputAgreement,
}

#[derive(Serialize, Debug)]
pub struct IntermediateReport {
    /// Tensors computed under the same name in both models (graph outputs excluded).
    pub compared: usize,
    pub diverging: usize,
    /// Names left out, with the reason (e.g. a non-tensor type).
    pub skipped: Vec<String>,
    /// The first diverging tensor in A's topological order.
    pub first_divergence: Option<IntermediateAgreement>,
    /// Every compared tensor, in A's topological order.
    pub tensors: Vec<IntermediateAgreement>,
}

/// Main-graph tensors produced by a node, in topological order, with the producing
/// node's op type and name; graph outputs left out.
fn produced_in_order(g: &Graph) -> CliResult<Vec<(String, String, String)>> {
    let order = g
        .topological_order()
        .map_err(|e| CliError::new(Exit::Load, e))?;
    let mut out = Vec::new();
    for id in order {
        let node = g.node(id);
        for v in node.outputs.iter().flatten() {
            let name = &g.value(*v).name;
            if name.is_empty() || g.is_graph_output(*v) {
                continue;
            }
            out.push((
                name.clone(),
                node.op_type.clone(),
                node.name_or_op().to_string(),
            ));
        }
    }
    Ok(out)
}

/// A copy of the model with `names` appended to the graph outputs (types left for the
/// backend to infer), serialized with every tensor inline.
fn with_outputs(model: &Model, names: &[String]) -> CliResult<Vec<u8>> {
    let mut m = model.clone();
    for name in names {
        let Some(v) = m.graph.find_value(name) else {
            continue;
        };
        m.graph.outputs.push(GraphIo {
            value: v,
            info: infopt_ir::proto::ValueInfoProto {
                name: Some(name.clone()),
                ..Default::default()
            },
        });
    }
    m.to_bytes_referencing_sources().map_err(CliError::from_ir)
}

/// Whether the IR knows the tensor's element type is one no backend here holds.
fn unsupported_type(g: &Graph, name: &str) -> Option<String> {
    let v = g.find_value(name)?;
    let ty = g.value_type(v)?;
    let code = ty.dtype.code();
    if code == 0 || infopt_runtime::DType::from_onnx(code).is_some() {
        return None;
    }
    Some(ty.dtype.name())
}

/// Runs both models with the shared intermediates as extra outputs and compares them.
pub fn compare(
    backend: &dyn Backend,
    shapes: &InputShapes,
    a_side: Side<'_>,
    b_side: Side<'_>,
    tol: Tolerance,
) -> CliResult<IntermediateReport> {
    let (a, b) = (a_side.model, b_side.model);
    let in_b: HashSet<String> = produced_in_order(&b.graph)?
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    let mut skipped = Vec::new();
    let mut common: Vec<(String, String, String)> = Vec::new();
    for (name, op, node) in produced_in_order(&a.graph)? {
        if !in_b.contains(&name) {
            continue;
        }
        if let Some(t) =
            unsupported_type(&a.graph, &name).or_else(|| unsupported_type(&b.graph, &name))
        {
            skipped.push(format!("{name} ({t})"));
            continue;
        }
        common.push((name, op, node));
    }
    // A tensor a backend cannot hand back (a sequence, a string, ...) is dropped from
    // both models and the load retried.
    let (ya, yb) = loop {
        let names: Vec<String> = common.iter().map(|(n, _, _)| n.clone()).collect();
        let run = |side: &Side<'_>| -> CliResult<Result<Vec<HostTensor>, RuntimeError>> {
            let bytes = with_outputs(side.model, &names)?;
            Ok(backend
                .load(&bytes, Some(&side.dir), shapes)
                .and_then(|m| m.run(side.inputs)))
        };
        let ra = run(&a_side)?;
        let rb = run(&b_side)?;
        match (ra, rb) {
            (Ok(ya), Ok(yb)) => break (ya, yb),
            (Err(e), _) | (_, Err(e)) => {
                if let RuntimeError::UnsupportedDType {
                    kind: "output",
                    name,
                    dtype,
                    ..
                } = &e
                    && let Some(pos) = common.iter().position(|(n, _, _)| n == name)
                {
                    skipped.push(format!("{name} ({dtype})"));
                    common.remove(pos);
                    continue;
                }
                return Err(CliError::new(
                    Exit::Load,
                    format!(
                        "cannot run the models with their intermediate tensors as outputs in {}: {e}{}",
                        backend.name(),
                        if backend.name() == "tract" {
                            " (try --backend ort)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
    };
    let mut tensors = Vec::with_capacity(common.len());
    for (name, op_type, node) in common {
        let find = |ys: &[HostTensor]| ys.iter().find(|t| t.name() == Some(name.as_str())).cloned();
        let (Some(ta), Some(tb)) = (find(&ya), find(&yb)) else {
            skipped.push(format!("{name} (not returned)"));
            continue;
        };
        let agreement = compare::compare_tensors(&name, &tb, &ta, tol);
        tensors.push(IntermediateAgreement {
            name,
            op_type,
            node,
            agreement,
        });
    }
    let diverging = tensors
        .iter()
        .filter(|t| !t.agreement.within_tolerance)
        .count();
    let first_divergence = tensors
        .iter()
        .find(|t| !t.agreement.within_tolerance)
        .map(|t| IntermediateAgreement {
            name: t.name.clone(),
            op_type: t.op_type.clone(),
            node: t.node.clone(),
            agreement: t.agreement.clone(),
        });
    Ok(IntermediateReport {
        compared: tensors.len(),
        diverging,
        skipped,
        first_divergence,
        tensors,
    })
}
