//! Loading an IR model so that its intermediate tensors can be observed, in
//! whichever backend: tract observes any tensor of the model as it is; ONNX
//! Runtime only hands out graph outputs, so the tensors are exposed as
//! outputs of a copy serialized once (not once per run).

use std::path::Path;

use infopt_ir::{GraphIo, Model};
use infopt_runtime::{Backend, InputShapes, LoadedModel, Observe};

use crate::error::{ErrorKind, Result, VerifyError};

/// Main-graph tensors computed by a node, in topological order, with the
/// producing node's op type and name; graph outputs left out.
pub fn computed_tensors(model: &Model) -> Result<Vec<(String, String, String)>> {
    let g = &model.graph;
    let order = g
        .topological_order()
        .map_err(|e| VerifyError::new(ErrorKind::Load, e))?;
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

/// Adds value `v` (named `name`) to `g`'s outputs, untyped: the runtime
/// types it from the graph.
pub(crate) fn add_output(g: &mut infopt_ir::Graph, v: infopt_ir::ValueId, name: &str) {
    g.outputs.push(GraphIo {
        value: v,
        info: infopt_ir::proto::ValueInfoProto {
            name: Some(name.to_string()),
            ..Default::default()
        },
    });
}

/// Loads `model` in `backend` so that `run_observed` hands out `observe`.
pub fn load_observing(
    backend: &dyn Backend,
    model: &Model,
    dir: &Path,
    shapes: &InputShapes,
    observe: &Observe,
) -> Result<Box<dyn LoadedModel>> {
    let bytes = if backend.name() == "tract" {
        model.to_bytes_referencing_sources()
    } else {
        let names: Vec<String> = match observe {
            Observe::Names(n) => n.clone(),
            Observe::All => computed_tensors(model)?
                .into_iter()
                .map(|(n, _, _)| n)
                .collect(),
        };
        let mut copy = model.clone();
        for name in &names {
            if let Some(v) = copy.graph.find_value(name) {
                add_output(&mut copy.graph, v, name);
            }
        }
        let bytes = copy
            .to_bytes_referencing_sources()
            .map_err(|e| VerifyError::new(ErrorKind::Load, e))?;
        // Serializing read every weight of the mapped model file; while the
        // runtime builds its session from `bytes`, those pages would be a
        // third resident copy of the weights (they come back from the page
        // cache if read again).
        infopt_ir::external::release_mapped_pages();
        return backend
            .load_observing(&bytes, Some(dir), shapes, &Observe::Names(names))
            .map_err(|e| VerifyError::runtime(e, ErrorKind::CannotVerify));
    }
    .map_err(|e| VerifyError::new(ErrorKind::Load, e))?;
    backend
        .load_observing(&bytes, Some(dir), shapes, observe)
        .map_err(|e| VerifyError::runtime(e, ErrorKind::CannotVerify))
}
