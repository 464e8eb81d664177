//! Which nodes of a converted model compute in the half type: what the
//! island search and its range and unseen-input rules look at.

use std::collections::HashSet;

use infopt_ir::{DataType, Model};

/// Names of the candidate's nodes whose first output is of the half type,
/// and of its If/Loop/Scan nodes whose subgraphs compute in it (keeping
/// such a node in float32 keeps its subgraphs float32 whole).
pub(crate) fn half_nodes(candidate: &Model) -> HashSet<String> {
    let g = &candidate.graph;
    g.nodes()
        .filter(|(_, n)| {
            n.outputs
                .first()
                .copied()
                .flatten()
                .is_some_and(|v| is_half(g, v))
                || n.subgraphs().any(computes_in_half)
        })
        .filter_map(|(_, n)| n.name.clone())
        .collect()
}

fn is_half(g: &infopt_ir::Graph, v: infopt_ir::ValueId) -> bool {
    g.value_type(v)
        .is_some_and(|t| matches!(t.dtype, DataType::Float16 | DataType::Bfloat16))
}

/// True when a node of `g` or of its nested subgraphs outputs a half value.
fn computes_in_half(g: &infopt_ir::Graph) -> bool {
    g.nodes().any(|(_, n)| {
        n.outputs.iter().flatten().any(|&v| is_half(g, v)) || n.subgraphs().any(computes_in_half)
    })
}
