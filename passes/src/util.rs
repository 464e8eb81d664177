//! Small graph queries shared by passes.

use infopt_ir::{Graph, NodeId, Tensor, ValueId};

/// The constant tensor behind an optional input.
pub fn const_input(g: &Graph, v: Option<ValueId>) -> Option<&Tensor> {
    g.constant(v?)
}

/// Integer constant values (shapes, axes, pads).
pub fn const_i64s(g: &Graph, v: Option<ValueId>) -> Option<Vec<i64>> {
    const_input(g, v)?.to_i64_vec().ok()
}

/// Input `slot` of `node`, if present.
pub fn input(g: &Graph, node: NodeId, slot: usize) -> Option<ValueId> {
    g.node(node).inputs.get(slot).copied().flatten()
}

/// Output `slot` of `node`, if present.
pub fn output(g: &Graph, node: NodeId, slot: usize) -> Option<ValueId> {
    g.node(node).outputs.get(slot).copied().flatten()
}

/// The only reader of `v` (a node input), when `v` has exactly one reader and
/// is not a graph output.
pub fn single_reader(g: &Graph, v: ValueId) -> Option<(NodeId, u32)> {
    if g.reader_count(v) != 1 {
        return None;
    }
    g.input_uses(v).next()
}

/// Ops whose result differs between runs; never merged or folded.
pub fn is_nondeterministic(op: &str) -> bool {
    matches!(
        op,
        "RandomNormal" | "RandomUniform" | "RandomNormalLike" | "RandomUniformLike" | "Multinomial" | "Bernoulli"
    )
}

/// True for ops of the default domain or `com.microsoft` (known semantics, no side effects).
pub fn is_known_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "com.microsoft"
}

/// True when the value's name may change: it is not part of the graph's
/// interface (input/output) and not read from an enclosing scope.
pub fn is_renamable(g: &Graph, v: ValueId) -> bool {
    !g.is_graph_input(v) && !g.is_graph_output(v) && !g.value(v).outer
}
