//! The tensors a data-dependent selection reads (the boxes and scores a
//! NonMaxSuppression keeps some of, the values a TopK or NonZero picks
//! from), compared by verification beside the model's outputs.
//!
//! Why: the outputs of a detector exported with its NMS (torchvision's
//! detection models, an ultralytics export with `nms=True`) hold only what
//! the selection kept, and on generated inputs it keeps nothing: YOLOv8n
//! with an NMS appended verified "PASSED" at 0 of 0 values compared, so
//! nothing before the NMS was checked, in float32 or float16. Its inputs
//! always hold values.

use infopt_ir::{DataType, Model};

/// Ops whose output sizes depend on the values of the inputs listed.
const SELECTING: &[(&str, &[usize])] = &[
    ("NonMaxSuppression", &[0, 1]),
    ("TopK", &[0]),
    ("NonZero", &[0]),
    ("Compress", &[0]),
];

/// The names of the tensors the main graph's selections read, computed by
/// a node (not inputs or weights) and not already graph
/// outputs, in graph order, each once.
pub fn selection_inputs(model: &Model) -> Vec<String> {
    let g = &model.graph;
    let mut out: Vec<String> = Vec::new();
    for id in g.node_ids() {
        let n = g.node(id);
        if !n.domain().is_empty() {
            continue;
        }
        let Some((_, read)) = SELECTING.iter().find(|(op, _)| *op == n.op_type) else {
            continue;
        };
        for &i in *read {
            let Some(v) = n.inputs.get(i).copied().flatten() else {
                continue;
            };
            let value = g.value(v);
            // Of any type (an exported graph often declares none between
            // its nodes): integers and masks compare exactly; strings are
            // not runtime outputs here.
            let string = g.value_type(v).is_some_and(|t| t.dtype == DataType::String);
            if !string
                && value.producer.is_some()
                && !value.name.is_empty()
                && !g.is_graph_output(v)
                && !out.contains(&value.name)
            {
                out.push(value.name.clone());
            }
        }
    }
    out
}

/// A copy of `model` with the tensors `names` that it computes added to its
/// outputs (a name it does not hold is left out).
pub fn exposing(model: &Model, names: &[String]) -> Model {
    let mut copy = model.clone();
    for name in names {
        let Some(v) = copy.graph.find_value(name) else {
            continue;
        };
        if copy.graph.value(v).producer.is_none() || copy.graph.is_graph_output(v) {
            continue;
        }
        crate::observe::add_output(&mut copy.graph, v, name);
    }
    copy
}
