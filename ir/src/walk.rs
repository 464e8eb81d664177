//! Walking a graph upward from a node, through the producers of its inputs:
//! the float16 rules that keep an argument's chain in float32 (a guarded
//! `Log`, a log spectrum's front end, a power on generated inputs) all take
//! the nodes that compute something within a few steps.

use crate::graph::{Graph, NodeId};

/// Visits the producers of `start`'s inputs, then of theirs, at most
/// `max_depth` steps up. `visit(producer)` says whether to go on above that
/// producer; it also keeps whatever it takes (and returns false for a node
/// it has seen, which ends a cycle of revisits).
pub fn walk_producers(
    g: &Graph,
    start: NodeId,
    max_depth: usize,
    mut visit: impl FnMut(NodeId) -> bool,
) {
    let mut frontier = vec![(start, 0usize)];
    while let Some((at, depth)) = frontier.pop() {
        if depth >= max_depth {
            continue;
        }
        for v in g.node(at).inputs.iter().flatten() {
            let Some((p, _)) = g.value(*v).producer else {
                continue;
            };
            if visit(p) {
                frontier.push((p, depth + 1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataType::Float;
    use crate::builder::{GraphBuilder, dims};

    #[test]
    fn producers_are_visited_up_to_the_depth_and_where_visit_goes_on() {
        let mut b = GraphBuilder::new();
        let x = b.input("x", Float, dims(&["4"]));
        let a = b.op("Relu", &[x], vec![]);
        let s = b.op("Sigmoid", &[a], vec![]);
        let e = b.op("Exp", &[s], vec![]);
        let l = b.op("Log", &[e], vec![]);
        b.output(l, "y", Float, None);
        let m = b.build(17);
        let g = &m.graph;
        let log = g.value(l).producer.map(|(n, _)| n).expect("Log");
        let ops = |depth: usize, stop_at: &str| {
            let mut seen = Vec::new();
            walk_producers(g, log, depth, |p| {
                seen.push(g.node(p).op_type.clone());
                g.node(p).op_type != stop_at
            });
            seen
        };
        assert_eq!(ops(1, ""), ["Exp"]);
        assert_eq!(ops(9, ""), ["Exp", "Sigmoid", "Relu"]);
        // Not above a producer whose visit says stop.
        assert_eq!(ops(9, "Sigmoid"), ["Exp", "Sigmoid"]);
    }
}
